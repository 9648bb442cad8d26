"""Pod resource requests, as upstream k8s.io/component-helpers/resource.PodRequests.

Effective request of a pod (sidecar-aware, KEP-753):
- regular containers are summed;
- each restartable init container (restartPolicy "Always", a sidecar) is added to that sum
  and to a running sidecar total;
- each other init container needs (sidecars started before it + itself) while it runs;
- result = per-resource max(containers + sidecars, every init container's need), then
  spec.overhead is added.
A container's requests default to its limits where a request is absent (API defaulting).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.models.meta import ResourceList
from shared.models.pod import CONTAINER_RESTART_ALWAYS, Container, Pod

# schedutil.DefaultMilliCPURequest / DefaultMemoryRequest: what scoring assumes for a
# container that requests no cpu / memory, so empty pods do not all look free.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_NON_ZERO_DEFAULTS: ResourceList = {
    "cpu": DEFAULT_MILLI_CPU_REQUEST,
    "memory": DEFAULT_MEMORY_REQUEST,
}


def container_requests(container: Container) -> ResourceList:
    """The container's requests, with limits standing in for absent requests."""
    resources = container.resources
    if not resources.limits:
        return resources.requests
    merged = dict(resources.limits)
    merged.update(resources.requests)
    return merged


def _add(total: dict[str, int], extra: Mapping[str, int]) -> None:
    for name, value in extra.items():
        total[name] = total.get(name, 0) + value


def _max(total: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if name not in total or value > total[name]:
            total[name] = value


def _with_defaults(requests: ResourceList, non_missing: Mapping[str, int]) -> ResourceList:
    missing = {name: v for name, v in non_missing.items() if name not in requests}
    if not missing:
        return requests
    return {**requests, **missing}


def pod_requests(
    pod: Pod,
    *,
    non_missing: Mapping[str, int] | None = None,
    exclude_overhead: bool = False,
) -> ResourceList:
    """Upstream resourcehelper.PodRequests.

    ``non_missing`` gives a value per resource for containers that do not request it
    (upstream PodResourcesOptions.NonMissingContainerRequests).
    """
    total: dict[str, int] = {}
    for container in pod.spec.containers:
        reqs = container_requests(container)
        if non_missing:
            reqs = _with_defaults(reqs, non_missing)
        _add(total, reqs)

    if pod.spec.init_containers:
        sidecars: dict[str, int] = {}
        init_max: dict[str, int] = {}
        for container in pod.spec.init_containers:
            reqs = container_requests(container)
            if non_missing:
                reqs = _with_defaults(reqs, non_missing)
            if container.restart_policy == CONTAINER_RESTART_ALWAYS:
                _add(total, reqs)
                _add(sidecars, reqs)
                need: Mapping[str, int] = sidecars
            else:
                running = dict(reqs)
                _add(running, sidecars)
                need = running
            _max(init_max, need)
        _max(total, init_max)

    if not exclude_overhead and pod.spec.overhead:
        _add(total, pod.spec.overhead)
    return total


def non_zero_requests(pod: Pod) -> ResourceList:
    """Requests as scoring sees them: cpu 100m / memory 200Mi where a container asks none.

    Upstream noderesources calculatePodResourceRequest with useRequested=false (what
    LeastAllocated, MostAllocated and BalancedAllocation use), and NodeInfo.NonZeroRequested.
    """
    return pod_requests(pod, non_missing=_NON_ZERO_DEFAULTS)


PortKey = tuple[str, int]
"""(protocol, hostPort): the key of `NodeColumns.used_ports`."""
DEFAULT_PROTOCOL = "TCP"
BIND_ALL_HOST_IP = "0.0.0.0"


def pod_host_ports(pod: Pod) -> list[tuple[PortKey, str]]:
    """((protocol, hostPort), hostIP) of every port with hostPort > 0: the restartable init
    containers' (sidecars run for the pod's whole life) first, then the containers' (upstream
    schedutil.GetHostPorts), sanitized as upstream (empty protocol TCP, empty hostIP 0.0.0.0).

    The one definition of a pod's host ports: NodeColumns records and counts them,
    preemption's scratch copy adds and removes them; as HostPort records (`host_ports`)
    NodePorts checks them, the placement audit compares them, and the binder's charge
    (shared.store.records.PodCharge) hands them to the reserve script, which counts them per
    node exactly as NodeColumns does.
    """
    sidecars = [c for c in pod.spec.init_containers if c.restart_policy == CONTAINER_RESTART_ALWAYS]
    return [
        ((port.protocol or DEFAULT_PROTOCOL, port.host_port), port.host_ip or BIND_ALL_HOST_IP)
        for container in (*sidecars, *pod.spec.containers)
        for port in container.ports
        if port.host_port > 0
    ]


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    """A host port a pod uses, sanitized like upstream (empty protocol TCP, empty IP 0.0.0.0).

    The one record of a used port: NodePorts' PreFilter state, the binder's charge and the
    store's usage hash (`field`), and the placement audit all use it.
    """

    protocol: str
    port: int
    host_ip: str

    def field(self) -> str:
        """The store's usage-hash field counting this port (shared/store/keys.py; the Lua
        prelude's add_usage builds the same text, tests/store/test_lua_keys.py checks it)."""
        return f"hp:{self.protocol}:{self.port}:{self.host_ip}"

    @staticmethod
    def parse_field(name: str) -> HostPort | None:
        """The port a usage-hash field counts; None for the other fields ("pods", "r:...")."""
        if not name.startswith("hp:"):
            return None
        # The IP goes last: an IPv6 address has colons of its own.
        protocol, port, host_ip = name[3:].split(":", 2)
        return HostPort(protocol, int(port), host_ip)

    def conflicts(self, other: HostPort) -> bool:
        """Upstream HostPortInfo.CheckConflict for one pair: same protocol and port, and the
        same IP or either one 0.0.0.0."""
        if (self.protocol, self.port) != (other.protocol, other.port):
            return False
        return BIND_ALL_HOST_IP in (self.host_ip, other.host_ip) or self.host_ip == other.host_ip


def host_ports(pod: Pod) -> tuple[HostPort, ...]:
    """`pod_host_ports` as HostPort records, in the same order (sidecars first)."""
    return tuple(HostPort(protocol, port, ip) for (protocol, port), ip in pod_host_ports(pod))
