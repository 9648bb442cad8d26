"""Scheduler extenders: the HTTP webhooks of `KubeSchedulerConfiguration.extenders`.

As upstream pkg/scheduler/extender.go and the extender parts of schedule_one.go:

- **filter** (`find_nodes_that_pass_extenders`): after the Filter plugins, each interested
  extender in configuration order narrows the feasible nodes. Its failedNodes become
  Unschedulable statuses and its failedAndUnresolvableNodes UnschedulableAndUnresolvable ones
  (those win when a node is in both). An error fails the cycle unless the extender is ignorable.
- **prioritize** (`extender_scores`): each interested extender scores the feasible nodes
  (0..10); the scheduler adds score x weight x (MaxNodeScore / MaxExtenderPriority) = x10 to
  the plugin total (upstream prioritizeNodes). Extenders run concurrently; a prioritize error
  is always ignored (that extender then gives no score), as upstream.
- **preempt** (`HTTPExtender.process_preemption`): filters preemption candidates.
- **bind** (`HTTPExtender.bind`).
- **managedResources**: an extender with managed resources is consulted only for pods whose
  containers or init containers request or limit one of them (IsInterested).
- **nodeCacheCapable**: the extender gets node names only, not whole Node objects.

Wire format: the extender/v1 Go structs have no JSON tags, so their keys are the Go field names
("Pod", "Nodes", "NodeNames", "FailedNodes", "Host", "Score", ...); the Pod and Nodes inside are
Kubernetes JSON (camelCase). Responses are read case-insensitively, as Go's decoder does.

The calls are blocking (urllib); an asyncio caller runs them with `asyncio.to_thread`.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns
from scheduling.framework.interfaces import MAX_EXTENDER_PRIORITY, MAX_NODE_SCORE
from scheduling.framework.status import Status
from shared.config.types import DEFAULT_EXTENDER_TIMEOUT_SECONDS, Extender
from shared.models import Node, Pod, to_dict

SCORE_SCALE = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
"""MaxNodeScore / MaxExtenderPriority = 10."""


class ExtenderError(Exception):
    """An extender failed: transport error, non-200 answer, undecodable or inconsistent reply."""


@dataclass(slots=True)
class Victims:
    """extenderv1.Victims: the pods to evict on one node and how many PDBs that violates."""

    pods: list[Pod] = field(default_factory=list)
    num_pdb_violations: int = 0


@dataclass(slots=True)
class ExtenderFilterResult:
    nodes: list[Node]
    failed: dict[str, str] = field(default_factory=dict)
    failed_and_unresolvable: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------ JSON encoding
def to_kube_json(obj: Pod | Node) -> dict[str, Any]:
    """A Pod or Node as Kubernetes JSON (apiVersion, kind, camelCase, quantity strings)."""
    return to_dict(obj)


def _lower_keys(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ExtenderError(f"expected a JSON object, got {type(value).__name__}")
    return {str(k).lower(): v for k, v in value.items()}


def _str_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExtenderError(f"{what}: expected an object")
    return {str(k): str(v) for k, v in value.items()}


# ------------------------------------------------------------------------------ client
def _ssl_context(config: Extender) -> ssl.SSLContext | None:
    tls = config.tls_config
    if tls is None and not config.enable_https:
        return None
    context = ssl.create_default_context()
    # Upstream's makeTransport turns verification off for enableHTTPS without a CA; berth
    # then verifies against the system's CAs. Only an explicit `insecure: true` skips it.
    insecure = tls is not None and tls.insecure
    if tls is not None:
        if tls.ca_file:
            context.load_verify_locations(cafile=tls.ca_file)
        if tls.ca_data:
            context.load_verify_locations(cadata=base64.b64decode(tls.ca_data).decode())
        if tls.cert_file:
            context.load_cert_chain(tls.cert_file, tls.key_file or None)
        elif tls.cert_data:
            _load_cert_data(context, tls.cert_data, tls.key_data)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _load_cert_data(context: ssl.SSLContext, cert_b64: str, key_b64: str) -> None:
    # ssl loads client certificates from files only.
    with tempfile.TemporaryDirectory() as tmp:
        cert_path = os.path.join(tmp, "cert.pem")
        with open(cert_path, "wb") as out:
            out.write(base64.b64decode(cert_b64))
        key_path: str | None = None
        if key_b64:
            key_path = os.path.join(tmp, "key.pem")
            with open(key_path, "wb") as out:
                out.write(base64.b64decode(key_b64))
        context.load_cert_chain(cert_path, key_path)


class HTTPExtender:
    """One configured extender (upstream HTTPExtender)."""

    def __init__(self, config: Extender) -> None:
        self.config = config
        self.url_prefix = config.url_prefix
        self.weight = config.weight
        self.timeout = config.http_timeout_seconds or DEFAULT_EXTENDER_TIMEOUT_SECONDS
        self.managed_resources = frozenset(r.name for r in config.managed_resources)
        self._ssl = _ssl_context(config)

    # --------------------------------------------------------------- properties
    @property
    def name(self) -> str:
        return self.url_prefix

    def is_ignorable(self) -> bool:
        return self.config.ignorable

    def supports_preemption(self) -> bool:
        return bool(self.config.preempt_verb)

    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    def is_interested(self, pod: Pod) -> bool:
        """True without managed resources, else when a container asks for one of them."""
        if not self.managed_resources:
            return True
        for container in (*pod.spec.containers, *pod.spec.init_containers):
            resources = container.resources
            if not self.managed_resources.isdisjoint(resources.requests):
                return True
            if not self.managed_resources.isdisjoint(resources.limits):
                return True
        return False

    # ---------------------------------------------------------------- transport
    def _send(self, verb: str, payload: Mapping[str, Any]) -> Any:
        url = self.url_prefix.rstrip("/") + "/" + verb
        body = json.dumps(payload).encode()
        request = urllib.request.Request(
            url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._ssl) as resp:
                status = resp.status
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise ExtenderError(
                f"failed {verb} with extender at URL {url}, code {exc.code}"
            ) from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise ExtenderError(f"Post {url!r}: {exc}") from exc
        if status != 200:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, code {status}")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ExtenderError(f"extender at URL {url} sent invalid JSON: {exc}") from None

    def _args(self, pod: Pod, nodes: Sequence[Node]) -> dict[str, Any]:
        if self.config.node_cache_capable:
            return {
                "Pod": to_kube_json(pod),
                "Nodes": None,
                "NodeNames": [n.metadata.name for n in nodes],
            }
        items = [to_kube_json(n) for n in nodes]
        return {"Pod": to_kube_json(pod), "Nodes": {"items": items}, "NodeNames": None}

    # -------------------------------------------------------------------- verbs
    def filter(self, pod: Pod, nodes: Sequence[Node]) -> ExtenderFilterResult:
        """The nodes this extender keeps (a subset of `nodes`) and why it dropped others."""
        if not self.config.filter_verb:
            return ExtenderFilterResult(list(nodes))
        reply = _lower_keys(self._send(self.config.filter_verb, self._args(pod, nodes)))
        error = reply.get("error")
        if error:
            raise ExtenderError(str(error))
        by_name = {n.metadata.name: n for n in nodes}
        kept: list[Node] = []
        names = reply.get("nodenames")
        node_list = reply.get("nodes")
        if self.config.node_cache_capable and names is not None:
            if not isinstance(names, list):
                raise ExtenderError("NodeNames: expected a list")
            kept = [self._known(by_name, str(name)) for name in names]
        elif node_list is not None:
            items = _lower_keys(node_list).get("items") or []
            for item in items:
                meta = _lower_keys(item).get("metadata") or {}
                kept.append(self._known(by_name, str(_lower_keys(meta).get("name", ""))))
        return ExtenderFilterResult(
            kept,
            _str_map(reply.get("failednodes"), "FailedNodes"),
            _str_map(reply.get("failedandunresolvablenodes"), "FailedAndUnresolvableNodes"),
        )

    def _known(self, by_name: Mapping[str, Node], name: str) -> Node:
        node = by_name.get(name)
        if node is None:
            raise ExtenderError(
                f"extender {self.url_prefix!r} claims a filtered node {name!r} which is not "
                "found in the input node list"
            )
        return node

    def prioritize(self, pod: Pod, nodes: Sequence[Node]) -> tuple[list[tuple[str, int]], int]:
        """(host, score 0..10) pairs and this extender's weight; no verb scores every node 0."""
        if not self.config.prioritize_verb:
            return [(n.metadata.name, 0) for n in nodes], 0
        reply = self._send(self.config.prioritize_verb, self._args(pod, nodes))
        if reply is None:
            return [], self.weight
        if not isinstance(reply, list):
            raise ExtenderError("HostPriorityList: expected a list")
        scores: list[tuple[str, int]] = []
        for entry in reply:
            item = _lower_keys(entry)
            try:
                scores.append((str(item.get("host", "")), int(item.get("score", 0))))
            except (TypeError, ValueError) as exc:
                raise ExtenderError(f"HostPriority: {exc}") from None
        return scores, self.weight

    def process_preemption(
        self,
        pod: Pod,
        victims: Mapping[str, Victims],
        pods_on_node: Mapping[str, Sequence[Pod]],
    ) -> dict[str, Victims]:
        """The candidates (node -> victims) this extender accepts; pods are resolved by uid
        among `pods_on_node[node]`, as upstream resolves them from its snapshot."""
        if not self.supports_preemption():
            raise ExtenderError(
                f"preempt verb is not defined for extender {self.url_prefix} but run into "
                "ProcessPreemption"
            )
        payload: dict[str, Any] = {"Pod": to_kube_json(pod)}
        if self.config.node_cache_capable:
            payload["NodeNameToVictims"] = None
            payload["NodeNameToMetaVictims"] = {
                node: {
                    "Pods": [{"UID": p.metadata.uid} for p in v.pods],
                    "NumPDBViolations": v.num_pdb_violations,
                }
                for node, v in victims.items()
            }
        else:
            payload["NodeNameToVictims"] = {
                node: {
                    "Pods": [to_kube_json(p) for p in v.pods],
                    "NumPDBViolations": v.num_pdb_violations,
                }
                for node, v in victims.items()
            }
            payload["NodeNameToMetaVictims"] = None
        reply = _lower_keys(self._send(self.config.preempt_verb, payload))
        meta = reply.get("nodenametometavictims") or {}
        if not isinstance(meta, dict):
            raise ExtenderError("NodeNameToMetaVictims: expected an object")
        result: dict[str, Victims] = {}
        for node_name, meta_victims in meta.items():
            if node_name not in pods_on_node:
                raise ExtenderError(f'nodeinfo not found for node name "{node_name}"')
            by_uid = {p.metadata.uid: p for p in pods_on_node[node_name]}
            entry = _lower_keys(meta_victims or {})
            chosen = Victims(num_pdb_violations=int(entry.get("numpdbviolations") or 0))
            for meta_pod in entry.get("pods") or []:
                uid = str(_lower_keys(meta_pod).get("uid", ""))
                found = by_uid.get(uid)
                if found is None:
                    raise ExtenderError(
                        f"extender: {self.url_prefix} claims to preempt pod (UID: {uid}) on "
                        f"node: {node_name}, but the pod is not found on that node"
                    )
                chosen.pods.append(found)
            result[str(node_name)] = chosen
        return result

    def bind(self, pod: Pod, node_name: str) -> None:
        if not self.is_binder():
            raise ExtenderError("unexpected empty bindVerb in extender")
        payload = {
            "PodName": pod.metadata.name,
            "PodNamespace": pod.metadata.namespace,
            "PodUID": pod.metadata.uid,
            "Node": node_name,
        }
        reply = _lower_keys(self._send(self.config.bind_verb, payload) or {})
        if reply.get("error"):
            raise ExtenderError(str(reply["error"]))


def build_extenders(configs: Sequence[Extender]) -> list[HTTPExtender]:
    return [HTTPExtender(c) for c in configs]


# ------------------------------------------------------------ scheduling-cycle helpers
def find_nodes_that_pass_extenders(
    extenders: Sequence[HTTPExtender],
    pod: Pod,
    nodes: Sequence[Node],
    statuses: dict[str, Status],
) -> list[Node]:
    """Upstream findNodesThatPassExtenders: narrow `nodes` through each interested extender,
    recording why nodes were dropped in `statuses` (node name -> status).

    Raises ExtenderError when a non-ignorable extender fails (the cycle fails with an error).
    """
    feasible = list(nodes)
    for extender in extenders:
        if not feasible:
            break
        if not extender.is_interested(pod):
            continue
        try:
            result = extender.filter(pod, feasible)
        except ExtenderError:
            if extender.is_ignorable():
                continue
            raise
        for name, message in result.failed_and_unresolvable.items():
            statuses[name] = Status.unresolvable(message)
        for name, message in result.failed.items():
            if name not in result.failed_and_unresolvable:
                statuses[name] = Status.unschedulable(message)
        feasible = result.nodes
    return feasible


def filter_rows_with_extenders(
    extenders: Sequence[HTTPExtender],
    pod: Pod,
    columns: NodeColumns,
    rows: NDArray[np.intp],
) -> tuple[NDArray[np.intp], dict[int, Status]]:
    """`find_nodes_that_pass_extenders` over NodeColumns rows: the rows kept (in input order)
    and a status per dropped row the extenders explained."""
    nodes = [columns.nodes[r] for r in rows.tolist()]
    statuses: dict[str, Status] = {}
    kept = find_nodes_that_pass_extenders(extenders, pod, nodes, statuses)
    kept_names = {n.metadata.name for n in kept}
    index = columns.index
    kept_rows = np.array(
        [r for r in rows.tolist() if columns.names[r] in kept_names], dtype=np.intp
    )
    by_row = {index[name]: status for name, status in statuses.items() if name in index}
    return kept_rows, by_row


def extender_scores(
    extenders: Sequence[HTTPExtender], pod: Pod, nodes: Sequence[Node]
) -> dict[str, int]:
    """Node name -> sum over interested extenders of score x weight x 10. Extenders run
    concurrently; one that fails contributes nothing. Hosts not in `nodes` are ignored."""
    totals: dict[str, int] = {}
    for _, scores in extender_scores_by_extender(extenders, pod, nodes):
        for host, score in scores.items():
            totals[host] = totals.get(host, 0) + score
    return totals


def extender_scores_by_extender(
    extenders: Sequence[HTTPExtender], pod: Pod, nodes: Sequence[Node]
) -> list[tuple[str, dict[str, int]]]:
    """`extender_scores` per extender (for explain, as upstream's NodePluginScores name each
    extender): (extender name, node name -> score x weight x 10), in configuration order, for
    each interested extender that answered."""
    interested = [e for e in extenders if e.is_interested(pod)]
    if not interested or not nodes:
        return []
    wanted = {n.metadata.name for n in nodes}

    def call(extender: HTTPExtender) -> tuple[list[tuple[str, int]], int] | None:
        try:
            return extender.prioritize(pod, nodes)
        except ExtenderError:
            return None

    with ThreadPoolExecutor(max_workers=len(interested)) as pool:
        answers = list(pool.map(call, interested))
    out: list[tuple[str, dict[str, int]]] = []
    for extender, answer in zip(interested, answers, strict=True):
        if answer is None:
            continue
        scores, weight = answer
        totals: dict[str, int] = {}
        for host, score in scores:
            if host in wanted:
                totals[host] = totals.get(host, 0) + score * weight * SCORE_SCALE
        out.append((extender.name, totals))
    return out


def extender_scores_for_rows(
    extenders: Sequence[HTTPExtender],
    pod: Pod,
    columns: NodeColumns,
    rows: NDArray[np.intp],
) -> NDArray[np.int64]:
    """`extender_scores` aligned with `rows`: add it to the plugins' weighted total."""
    totals = np.zeros(rows.shape[0], dtype=np.int64)
    for _, scores in extender_scores_for_rows_by_extender(extenders, pod, columns, rows):
        totals += scores
    return totals


def extender_scores_for_rows_by_extender(
    extenders: Sequence[HTTPExtender],
    pod: Pod,
    columns: NodeColumns,
    rows: NDArray[np.intp],
) -> list[tuple[str, NDArray[np.int64]]]:
    """`extender_scores_by_extender` with each extender's scores aligned with `rows`."""
    nodes = [columns.nodes[r] for r in rows.tolist()]
    return [
        (
            name,
            np.fromiter(
                (scores.get(n.metadata.name, 0) for n in nodes), dtype=np.int64, count=len(nodes)
            ),
        )
        for name, scores in extender_scores_by_extender(extenders, pod, nodes)
    ]
