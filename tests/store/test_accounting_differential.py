"""One accounting, checked differentially: random pods and node histories (bound pods added
and deleted, worker assumptions added and forgotten, shared host ports, extended resources,
sidecars, init containers, overhead) through the worker's side (NodeColumns and the real
Filter plugins) and through the binder's check-and-reserve script on a real Redis. After every
step both must give the same answer for a random candidate pod, plugin by plugin (NodePorts,
NodeResourcesFit's reasons, the pod count), also under profiles that disable plugins."""

from __future__ import annotations

import random

import pytest

from scheduling.cache.cache import ClusterCache
from scheduling.framework.columns import NodeColumns
from scheduling.plugins.nodeports import NodePorts
from scheduling.plugins.noderesources.fit import Fit
from services.binder.checks import ProfileChecks, run_filter
from shared.config import NodeResourcesFitArgs, load_config
from shared.models import Pod
from shared.store import ClusterStore, PodCharge, ReserveRequest, ReserveStatus
from tests.builders import make_node, make_pod

GPU = "example.com/gpu"
NOW = 1_000.0

PROFILES = {
    "default": "",
    "no-ports": "      filter: {disabled: [{name: NodePorts}]}\n",
    "no-fit": "      filter: {disabled: [{name: NodeResourcesFit}]}\n",
}


def _profile(name: str) -> ProfileChecks:
    plugins = PROFILES[name]
    text = (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n  - schedulerName: default-scheduler\n"
        + (f"    plugins:\n{plugins}" if plugins else "")
    )
    [profile] = load_config(text).profiles
    return ProfileChecks(profile, ClusterCache())


def _random_pod(rng: random.Random, name: str) -> Pod:
    builder = make_pod(name).uid(name).req(cpu=f"{rng.choice([100, 500, 1000, 1500])}m")
    if rng.random() < 0.4:
        builder.host_port(rng.choice([80, 9100]), host_ip=rng.choice(["", "", "10.0.0.1"]))
    if rng.random() < 0.3:
        builder.sidecar_req(cpu=f"{rng.choice([100, 300])}m", memory="64Mi")
    if rng.random() < 0.2:
        builder.init_req(cpu=f"{rng.choice([500, 2500])}m")
    if rng.random() < 0.2:
        builder.overhead(cpu="100m")
    pod = builder.obj()
    if rng.random() < 0.3:
        pod.spec.containers[0].resources.requests[GPU] = rng.choice([1, 2])
    return pod


def _worker_reasons(columns: NodeColumns, pod: Pod, profile: ProfileChecks) -> set[str]:
    """The node's verdict in the worker's framework: Filter plugins run in the default
    order (NodePorts before NodeResourcesFit) and the first that fails decides (upstream
    RunFilterPlugins), with all of its reasons."""
    plugins: list[tuple[str, NodePorts | Fit]] = [
        ("p", NodePorts()),
        ("f", Fit(NodeResourcesFitArgs())),
    ]
    for letter, plugin in plugins:
        if letter in profile.node_checks:
            status = run_filter(plugin.name, plugin, plugin, pod, columns, 0)
            if not status.is_success():
                return set(status.reasons)
    return set()


@pytest.mark.parametrize("seed", range(6))
async def test_the_worker_and_the_reserve_script_agree(store: ClusterStore, seed: int) -> None:
    rng = random.Random(seed)
    node = make_node("n1").capacity(cpu="4", memory="8Gi", pods=rng.choice([4, 6])).obj()
    if rng.random() < 0.5:
        node.status.allocatable[GPU] = 2
    await store.apply([node])
    profile = _profile(rng.choice(sorted(PROFILES)))
    bound: dict[str, Pod] = {}
    assumed: dict[str, Pod] = {}
    for step in range(40):
        action = rng.random()
        if action < 0.45 or not (bound or assumed):
            pod = _random_pod(rng, f"p{step}")
            pod.spec.node_name = "n1"
            if rng.random() < 0.7:
                await store.apply([pod])  # bound around the scheduler: no fit check
                bound[pod.key] = pod
            else:
                # A worker's assumption that the binder reserved: counted on both sides.
                request = ReserveRequest(
                    pod_key=pod.key,
                    uid=pod.metadata.uid,
                    attempt=1,
                    node="n1",
                    priority=0,
                    charge=PodCharge.of(pod),
                    node_checks="",
                )
                await store.apply([make_pod(pod.metadata.name).uid(pod.metadata.uid).obj()])
                assert (await store.bindings.reserve(request, NOW)).status is ReserveStatus.OK
                assumed[pod.key] = pod
        elif action < 0.8 and bound:
            key = rng.choice(sorted(bound))
            pod = bound.pop(key)
            await store.delete("Pod", pod.metadata.namespace, pod.metadata.name)
        elif assumed:
            key = rng.choice(sorted(assumed))
            pod = assumed.pop(key)
            await store.bindings.unreserve(pod.key, pod.metadata.uid, 1)  # forgotten
        columns = NodeColumns([node], [*bound.values(), *assumed.values()])
        candidate = _random_pod(rng, f"c{step}")
        expected = _worker_reasons(columns, candidate, profile)
        attempt = step + 1
        await store.apply([candidate])
        result = await store.bindings.reserve(
            ReserveRequest(
                pod_key=candidate.key,
                uid=candidate.metadata.uid,
                attempt=attempt,
                node="n1",
                priority=0,
                charge=PodCharge.of(candidate),
                check=profile.fit_check(candidate),
                node_checks=profile.node_checks,
            ),
            NOW,
        )
        got = set(result.reasons) if result.status is ReserveStatus.CONFLICT else set()
        assert got == expected, f"step {step}: worker {expected}, reserve script {got}"
        if result.status is ReserveStatus.OK:
            await store.bindings.unreserve(candidate.key, candidate.metadata.uid, attempt)
        await store.delete("Pod", candidate.metadata.namespace, candidate.metadata.name)
