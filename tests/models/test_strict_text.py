"""Hostile manifest text (issue 19, items 6, 8, 10): duplicate keys, alias bombs, lone
surrogates and blank padding get a precise error (or, for padding, none), never a hang, a
traceback or a silent choice."""

from __future__ import annotations

import pytest

from shared.models import ManifestError, load_manifest_text

POD_YAML = """apiVersion: v1
kind: Pod
metadata: {{name: p, annotations: {{note: "{note}"}}}}
spec:
  containers:
  - name: c
    image: busybox
    resources:
      requests:
{requests}
"""


def pod_yaml(requests: str = '        cpu: "1"', note: str = "x") -> str:
    return POD_YAML.format(requests=requests, note=note)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param(
            pod_yaml('        cpu: "64"\n        cpu: 1m'),
            "line 11: duplicate key 'cpu' (first on line 10)",
            id="yaml-duplicate-key",
        ),
        pytest.param(
            '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {'
            '"containers": [{"name": "c", "image": "i", "resources": {"requests": '
            '{"cpu": "64", "cpu": "1m"}}}]}}',
            "duplicate key 'cpu'",
            id="json-duplicate-key",
        ),
        pytest.param(
            '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": '
            '{"note": "\\ud800"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}',
            "metadata.annotations.note: invalid Unicode (a lone surrogate",
            id="json-lone-surrogate",
        ),
        pytest.param(
            pod_yaml(note="\\ud800"),
            "YAML syntax error: found invalid Unicode character escape code",
            id="yaml-lone-surrogate",
        ),
    ],
)
def test_refused_with_the_reason(text: str, error: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(text, source="pod.yaml")
    assert error in str(caught.value)
    assert str(caught.value).startswith("pod.yaml")


def billion_laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n" + "\n".join(
        "  " + line for line in lines
    )


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    text = billion_laughs(9)  # 9**9 = 387 million strings once expanded
    assert len(text) < 2000
    with pytest.raises(ManifestError, match="YAML aliases expand the text to more than"):
        load_manifest_text(text, source="bomb.yaml")


def test_modest_aliases_are_read() -> None:
    text = """apiVersion: v1
kind: Pod
metadata: {name: p, labels: &shared {app: web, tier: front}, annotations: *shared}
spec:
  containers: [{name: c, image: busybox}]
"""
    [pod] = load_manifest_text(text).pods
    assert pod.metadata.annotations == {"app": "web", "tier": "front"}


def test_blank_padding_is_not_nesting() -> None:
    text = pod_yaml() + "\n" + " " * (4 * 1024 * 1024) + "\n"
    [pod] = load_manifest_text(text).pods
    assert pod.metadata.name == "p"


def test_generate_name_gets_a_name_from_the_server() -> None:
    text = """apiVersion: v1
kind: Pod
metadata: {generateName: job-}
spec: {containers: [{name: c, image: busybox}]}
"""
    first = load_manifest_text(text).pods[0].metadata
    second = load_manifest_text(text).pods[0].metadata
    assert first.name.startswith("job-")
    assert len(first.name) == len("job-") + 5
    assert first.name != second.name
    assert first.generate_name == "job-"
