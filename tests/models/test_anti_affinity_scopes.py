"""Which namespaces' pods a pod's required anti-affinity terms can match (upstream
getNamespacesFromPodAffinityTerm): the scopes the store counts it under."""

from __future__ import annotations

import pytest

from shared.models import Pod
from shared.models.affinity import ANY_NAMESPACE, anti_affinity_scopes
from tests.builders import label_selector, make_pod

DB = label_selector({"app": "db"})


def _pod(*terms: dict[str, object], preferred: bool = False) -> Pod:
    builder = make_pod("p").namespace("team-a")
    for term in terms:
        builder.pod_affinity("zone", DB, anti=True, weight=10 if preferred else 0, **term)  # type: ignore[arg-type]
    return builder.obj()


@pytest.mark.parametrize(
    ("pod", "scopes"),
    [
        pytest.param(make_pod("p").obj(), (), id="no-affinity"),
        pytest.param(_pod({}, preferred=True), (), id="preferred-only"),
        pytest.param(
            make_pod("p").namespace("team-a").pod_affinity("zone", DB).obj(),
            (),
            id="affinity-not-anti",
        ),
        pytest.param(_pod({}), ("team-a",), id="own-namespace"),
        pytest.param(_pod({"namespaces": ["x", "team-a"]}), ("team-a", "x"), id="listed"),
        pytest.param(
            _pod({"namespaces": ["x"]}, {"namespaces": ["y"]}), ("x", "y"), id="two-terms"
        ),
        pytest.param(
            _pod({"namespace_selector": label_selector({})}), (ANY_NAMESPACE,), id="all-ns"
        ),
        pytest.param(
            _pod({}, {"namespace_selector": label_selector({"tier": "prod"})}),
            (ANY_NAMESPACE,),
            id="selector-any",
        ),
    ],
)
def test_scopes(pod: Pod, scopes: tuple[str, ...]) -> None:
    assert anti_affinity_scopes(pod) == scopes
