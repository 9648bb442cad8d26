"""pod_requests / non_zero_requests: worked examples and upstream PodRequests cases (sidecars)."""

import pytest

from shared.models import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    Pod,
    load_manifest_text,
    non_zero_requests,
    pod_requests,
)
from tests.builders import make_pod

Mi, Gi = 1024**2, 1024**3
G = 10**9


def test_init_containers_take_the_max():
    # IC1 {2, 1G}, IC2 {2, 3G}; C1 {2, 1G}, C2 {1, 1G} -> {3, 3G}.
    pod = (
        make_pod("f1")
        .init_req(cpu="2", memory="1G")
        .init_req(cpu="2", memory="3G")
        .req(cpu="2", memory="1G")
        .req(cpu="1", memory="1G")
        .obj()
    )
    assert pod_requests(pod) == {"cpu": 3000, "memory": 3 * G}


def test_overhead_is_added_after_the_max():
    pod = (
        make_pod("f1o")
        .init_req(cpu="2", memory="1G")
        .init_req(cpu="2", memory="3G")
        .req(cpu="2", memory="1G")
        .req(cpu="1", memory="1G")
        .overhead(cpu="250m", memory="120Mi")
        .obj()
    )
    assert pod_requests(pod) == {"cpu": 3250, "memory": 3 * G + 120 * Mi}
    assert pod_requests(pod, exclude_overhead=True) == {"cpu": 3000, "memory": 3 * G}


F2_MANIFEST = """
apiVersion: v1
kind: Pod
metadata: {name: test-pod}
spec:
  overhead: {cpu: 250m, memory: 120Mi}
  containers:
  - name: busybox-ctr
    image: busybox:1.28
    resources:
      limits: {cpu: 500m, memory: 100Mi}
  - name: nginx-ctr
    image: nginx
    resources:
      limits: {cpu: 1500m, memory: 100Mi}
"""


def test_overhead_with_limits_only_from_manifest():
    # Requests default to limits (API defaulting): 2000m/200Mi + overhead.
    pod = load_manifest_text(F2_MANIFEST).pods[0]
    assert pod.spec.containers[0].resources.requests == {"cpu": 500, "memory": 100 * Mi}
    assert pod_requests(pod) == {"cpu": 2250, "memory": 320 * Mi}
    assert pod_requests(pod)["memory"] == 335544320
    assert pod_requests(pod, exclude_overhead=True) == {"cpu": 2000, "memory": 200 * Mi}


def test_limits_only_pod_built_in_code_defaults_too():
    pod = (
        make_pod("test-pod")
        .lim(cpu="500m", memory="100Mi")
        .lim(cpu="1500m", memory="100Mi")
        .overhead(cpu="250m", memory="120Mi")
        .obj()
    )
    assert pod.spec.containers[0].resources.requests == {}
    assert pod_requests(pod) == {"cpu": 2250, "memory": 320 * Mi}


def test_request_wins_over_limit_per_resource():
    pod = make_pod("p").req_lim({"cpu": "1"}, {"cpu": "2", "memory": "1Gi"}).obj()
    assert pod_requests(pod) == {"cpu": 1000, "memory": Gi}


def _pod(
    init: tuple[tuple[str, bool], ...] | list[tuple[str, bool]] = (),
    containers: tuple[str, ...] | list[str] = (),
    overhead: dict[str, str] | None = None,
) -> Pod:
    """init: (cpu, sidecar?) pairs; containers: cpu values (whole cores)."""
    builder = make_pod("p")
    for cpu, sidecar in init:
        if sidecar:
            builder.sidecar_req(cpu=cpu)
        else:
            builder.init_req(cpu=cpu)
    for cpu in containers:
        builder.req(cpu=cpu)
    if overhead:
        builder.overhead(overhead)
    return builder.obj()


# Ported from upstream component-helpers resource TestPodResourceRequests.
@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(_pod(init=[("4", False)], containers=["1"]), 4000, id="larger-init"),
        pytest.param(
            _pod(init=[("2", False)], containers=["2", "3"]), 5000, id="larger-containers"
        ),
        pytest.param(
            _pod(init=[("1", True)], containers=["1"]),
            2000,
            id="restartable-init-plus-regular",
        ),
        pytest.param(
            _pod(init=[("5", False), ("1", True), ("2", True), ("3", True)], containers=["1"]),
            7000,
            id="multiple-restartable-init",
        ),
        pytest.param(
            _pod(
                init=[("5", False), ("1", True), ("2", True), ("5", False), ("3", True)],
                containers=["1"],
            ),
            8000,
            id="multiple-restartable-and-regular-init",
        ),
        pytest.param(
            _pod(init=[("10", True), ("200", False)], containers=["100"]),
            210000,
            id="restartable-init-init-and-regular",
        ),
    ],
)
def test_upstream_pod_requests(pod, expected):
    assert pod_requests(pod) == {"cpu": expected}


def test_upstream_overhead_included():
    pod = _pod(init=[("2", False)], containers=["2", "3"], overhead={"cpu": "1", "memory": "1Gi"})
    assert pod_requests(pod) == {"cpu": 6000, "memory": Gi}


def test_upstream_overhead_excluded():
    pod = _pod(init=[("2", False)], containers=["2", "3"], overhead={"cpu": "1"})
    assert pod_requests(pod, exclude_overhead=True) == {"cpu": 5000}


def test_non_missing_applied_to_init_container():
    # Upstream "non missing container requests applied to init container".
    pod = make_pod("p").init_req(cpu="1").obj()
    assert pod_requests(pod, non_missing={"memory": 100 * Mi}) == {"cpu": 1000, "memory": 100 * Mi}


def test_empty_pod_requests_nothing():
    assert pod_requests(make_pod("p").obj()) == {}
    assert pod_requests(make_pod("p").container().obj()) == {}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            make_pod("p").container().obj(),
            {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST},
            id="no-requests-gets-defaults",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").obj(),
            {"cpu": 1000, "memory": DEFAULT_MEMORY_REQUEST},
            id="cpu-only",
        ),
        pytest.param(
            make_pod("p").req(cpu="0", memory="0").obj(),
            {"cpu": 0, "memory": 0},
            id="explicit-zero-is-not-missing",
        ),
        pytest.param(
            make_pod("p").container().container().obj(),
            {"cpu": 2 * DEFAULT_MILLI_CPU_REQUEST, "memory": 2 * DEFAULT_MEMORY_REQUEST},
            id="per-container-defaults",
        ),
        pytest.param(
            make_pod("p").req({"nvidia.com/gpu": 1}).obj(),
            {"cpu": 100, "memory": 200 * Mi, "nvidia.com/gpu": 1},
            id="extended-resources-untouched",
        ),
        pytest.param(
            make_pod("p").init_req(cpu="2").container().obj(),
            {"cpu": 2000, "memory": DEFAULT_MEMORY_REQUEST},
            id="init-containers-too",
        ),
        pytest.param(
            make_pod("p").container().overhead(cpu="50m").obj(),
            {"cpu": 150, "memory": DEFAULT_MEMORY_REQUEST},
            id="overhead-added",
        ),
    ],
)
def test_non_zero_requests(pod, expected):
    assert non_zero_requests(pod) == expected


def test_defaults_are_upstream_values():
    assert DEFAULT_MILLI_CPU_REQUEST == 100
    assert DEFAULT_MEMORY_REQUEST == 200 * 1024 * 1024
