"""ClusterCache: snapshot + changes -> NodeColumns, assumed pods, orphans (no servers)."""

from __future__ import annotations

import asyncio

from scheduling.cache.cache import WORKER_HOLDER, ClusterCache
from scheduling.framework.pod_index import PodIndex as Victims
from scheduling.plugins.podindex.index import PodIndex
from shared.models import HostPort, KubeObject, Node, Pod
from shared.store import RESERVATION, Change, HeldReservation, NodeUsage, Snapshot
from tests.builders import make_namespace, make_node, make_pod, make_pod_group


def put(rv: int, obj: KubeObject) -> Change:
    kind = type(obj).__name__
    key = obj.key
    node = obj.spec.node_name if isinstance(obj, Pod) else ""
    return Change(rv, "put", kind, key, obj.metadata.uid, obj, node)


def delete(rv: int, obj: KubeObject) -> Change:
    return Change(rv, "delete", type(obj).__name__, obj.key, obj.metadata.uid, obj)


def counted(view: ClusterCache) -> dict[str, list[str]]:
    return {
        name: sorted(p.metadata.name for p in view.columns.pods_by_node[row])
        for name, row in view.columns.index.items()
    }


def snapshot(rv: int, *objects: KubeObject) -> Snapshot:
    snap = Snapshot(rv)
    for obj in objects:
        snap.objects.setdefault(type(obj).__name__, []).append(obj)
    return snap


def test_load_and_follow():
    view = ClusterCache()
    n1 = make_node("n1").capacity(cpu="4", pods=10).obj()
    bound = make_pod("a").req(cpu="1").node("n1").obj()
    pending = make_pod("b").obj()
    view.load(snapshot(3, n1, bound, pending, make_namespace("ns", {"t": "x"})))
    assert counted(view) == {"n1": ["a"]}
    assert set(view.pods) == {"default/a", "default/b"}
    assert view.cluster_objects.namespace("ns") is not None
    cpu = view.columns.resource_index["cpu"]
    assert view.columns.requested[0, cpu] == 1000

    n2 = make_node("n2").capacity(cpu="4", pods=10).obj()
    now_bound = make_pod("b").uid(pending.metadata.uid).node("n2").obj()
    view.apply([put(4, n2), put(5, now_bound), delete(6, bound), put(7, make_pod_group("g", 2))])
    assert counted(view) == {"n1": [], "n2": ["b"]}
    assert view.resource_version == 7
    assert set(view.pods) == {"default/b"}
    assert set(view.pod_groups) == {"default/g"}


def test_assumed_pods_until_their_binding_arrives():
    view = ClusterCache()
    view.load(snapshot(1, make_node("n1").capacity(pods=10).obj()))
    pod = make_pod("p").obj()
    assert view.assume(pod, "n1").spec.node_name == "n1"
    ghost = make_pod("q").obj()
    view.assume(ghost, "ghost")  # a node the cache does not have: nothing is assumed
    assert not view.is_assumed(ghost.metadata.uid)
    assert counted(view) == {"n1": ["p"]}
    assert view.is_assumed(pod.metadata.uid)
    assert pod.spec.node_name == ""  # the caller's object is not touched
    bound = make_pod("p").uid(pod.metadata.uid).node("n1").obj()
    view.apply([put(2, bound)])
    assert counted(view) == {"n1": ["p"]}  # replaced, not counted twice
    assert not view.is_assumed(pod.metadata.uid)
    assert not view.forget(pod.metadata.uid)  # a bound pod stays
    assert counted(view) == {"n1": ["p"]}


def test_forget_drops_an_assumed_pod():
    view = ClusterCache()
    view.load(snapshot(1, make_node("n1").obj()))
    pod = make_pod("p").obj()
    view.assume(pod, "n1", attempt=3)
    assert not view.forget(pod.metadata.uid, attempt=2)  # another attempt's: kept
    assert counted(view) == {"n1": ["p"]}
    assert view.forget(pod.metadata.uid, attempt=3)
    assert counted(view) == {"n1": []}


def test_pods_of_unknown_nodes_wait_for_their_node():
    view = ClusterCache()
    orphan = make_pod("o").node("later").obj()
    view.load(snapshot(1, make_node("n1").obj(), orphan))
    assert counted(view) == {"n1": []}
    later: Node = make_node("later").obj()
    view.apply([put(2, later)])
    assert counted(view) == {"later": ["o"], "n1": []}
    view.apply([delete(3, later)])
    assert counted(view) == {"n1": []}
    view.apply([put(4, make_node("later").obj())])
    assert counted(view) == {"later": ["o"], "n1": []}


async def test_wait_for():
    view = ClusterCache()
    assert await view.wait_for(0, 0.01)
    assert not await view.wait_for(5, 0.01)
    waiter = asyncio.create_task(view.wait_for(2, 5))
    await asyncio.sleep(0)
    view.apply([put(1, make_node("a").obj())])
    await asyncio.sleep(0)
    assert not waiter.done()
    view.apply([put(2, make_node("b").obj())])
    assert await waiter


def test_a_reload_does_not_carry_indexes_of_the_old_columns():
    """Indexes listening to the old NodeColumns must not follow it into the new one: the
    inter-pod PodIndex would then never attach to the new columns (a throwaway index built
    on every call) and preemption's dirty-row listener would hear rows that are not its."""
    n1 = make_node("n1").capacity(pods=10).obj()
    bound = make_pod("a").label("app", "x").node("n1").obj()
    view = ClusterCache()
    view.load(snapshot(1, n1, bound))
    old = view.columns
    interpod = PodIndex.of(old)
    victims = Victims()
    victims.sync(old)

    view.load(snapshot(5, n1, bound, make_pod("b").label("app", "x").node("n1").obj()))
    assert view.columns is not old
    assert view.columns.pod_listeners == []
    index = PodIndex.of(view.columns)
    assert index is not interpod
    assert PodIndex.of(view.columns) is index  # attached to the new columns, and kept
    victims.sync(view.columns)
    assert sorted(p.metadata.name for p in victims.pods if p is not None) == ["a", "b"]
    view.apply([put(6, make_pod("c").label("app", "x").node("n1").obj())])
    victims.sync(view.columns)
    assert sorted(p.metadata.name for p in victims.pods if p is not None) == ["a", "b", "c"]


def reservation(rv: int, pod: Pod, node: str, holder: str, op: str = "put") -> Change:
    return Change(
        rv,
        "delete" if op == "delete" else "put",
        RESERVATION,
        pod.key,
        pod.metadata.uid,
        None,
        node,
        holder=holder,
    )


def test_other_binders_reservations_are_counted_until_they_end():
    view = ClusterCache(holder="me")
    n1, n2 = make_node("n1").capacity(pods=10).obj(), make_node("n2").capacity(pods=10).obj()
    theirs, mine, later = make_pod("theirs").obj(), make_pod("mine").obj(), make_pod("later").obj()
    view.load(snapshot(3, n1, n2, theirs, mine, later))
    view.apply([reservation(4, theirs, "n1", "other"), reservation(5, mine, "n2", "me")])
    assert counted(view) == {"n1": ["theirs"], "n2": []}  # my own: assumed by the binder
    view.apply([reservation(6, later, "n2", "other")])
    with view.as_of(5):  # a check as of my reservation: only the reservations before it
        assert counted(view) == {"n1": ["theirs"], "n2": []}
    assert counted(view) == {"n1": ["theirs"], "n2": ["later"]}
    view.apply([reservation(7, theirs, "n1", "other", "delete")])
    assert counted(view) == {"n1": [], "n2": ["later"]}
    bound = make_pod("later").uid(later.metadata.uid).node("n2").obj()
    view.apply([put(8, bound)])  # the binding replaces the reservation
    assert counted(view) == {"n1": [], "n2": ["later"]}
    view.apply([reservation(9, later, "n2", "other", "delete")])  # a stale end: ignored
    assert counted(view) == {"n1": [], "n2": ["later"]}


def test_reservations_held_at_the_snapshot_are_counted():
    view = ClusterCache(holder="me")
    n1 = make_node("n1").capacity(pods=10).obj()
    theirs, mine = make_pod("theirs").obj(), make_pod("mine").obj()
    snap = snapshot(3, n1, theirs, mine)
    snap.reservations = [
        HeldReservation(theirs.key, theirs.metadata.uid, "n1", "other"),
        HeldReservation(mine.key, mine.metadata.uid, "n1", "me"),
    ]
    view.load(snap)
    assert counted(view) == {"n1": ["theirs"]}


def test_a_view_without_a_holder_ignores_reservations():
    view = ClusterCache()
    n1, pod = make_node("n1").capacity(pods=10).obj(), make_pod("p").obj()
    view.load(snapshot(1, n1, pod))
    view.apply([reservation(2, pod, "n1", "some-binder")])
    assert counted(view) == {"n1": []}
    assert RESERVATION not in view.objects


def test_a_workers_view_counts_every_reservation_and_its_own_proposals_once():
    """The room another worker's proposal or a gang waiting at Permit holds is taken in a
    worker's eyes; its own assumption is not counted again when its reservation arrives,
    and counts as a reservation when the assumption is dropped while the reservation lives."""
    view = ClusterCache(WORKER_HOLDER)
    n1 = make_node("n1").capacity(cpu="4", pods=10).obj()
    gang, mine = make_pod("gang").req(cpu="2").obj(), make_pod("mine").req(cpu="1").obj()
    view.load(snapshot(1, n1, gang, mine))
    view.apply([reservation(2, gang, "n1", "binder-a")])
    assert counted(view) == {"n1": ["gang"]}
    view.assume(make_pod("mine").uid(mine.metadata.uid).req(cpu="1").node("n1").obj(), "n1")
    view.apply([reservation(3, mine, "n1", "binder-b")])
    cpu = view.columns.resource_index["cpu"]
    assert counted(view) == {"n1": ["gang", "mine"]}
    assert view.columns.requested[0, cpu] == 3000
    view.forget(mine.metadata.uid)  # e.g. the assumption expired; the reservation did not
    assert counted(view) == {"n1": ["gang", "mine"]}
    view.apply([reservation(4, mine, "n1", "binder-b", "delete")])
    view.apply([reservation(5, gang, "n1", "binder-a", "delete")])
    assert counted(view) == {"n1": []}
    assert view.columns.requested[0, cpu] == 0


def _usage(pods: int, cpu: int, ports: int = 0) -> NodeUsage:
    port = {HostPort("TCP", 9100, "0.0.0.0"): ports} if ports else {}
    return NodeUsage(pods, {"cpu": cpu} if cpu else {}, port)


def ended(rv: int, pod: Pod, attempt: int, node: str = "", usage: NodeUsage | None = None):
    """The store's entry for an attempt that ended without a binding."""
    return Change(
        rv,
        "delete",
        RESERVATION,
        pod.key,
        pod.metadata.uid,
        None,
        node,
        attempt=attempt,
        usage=usage,
    )


def test_a_conflicts_usage_is_checked_at_its_version():
    """The usage check-and-reserve streamed with a conflict, against what the view counts
    there at that very change: agreeing says nothing, counting short is reported."""
    view = ClusterCache(WORKER_HOLDER)
    reports: list[str] = []
    view.on_undercount = reports.append
    n1 = make_node("n1").capacity(cpu="4", pods=10).obj()
    a = make_pod("a").req(cpu="1").host_port(9100).node("n1").obj()
    p = make_pod("p").req(cpu="1").obj()
    view.load(snapshot(5, n1, a, p))
    view.apply([ended(6, p, 1, "n1", _usage(1, 1000, 1))])
    assert reports == []
    view.apply([ended(7, p, 2, "n1", _usage(2, 1500, 2))])
    assert reports == [
        "node n1 at resourceVersion 7: pods 2 > 1, cpu 1500 > 1000, "
        "host port hp:TCP:9100:0.0.0.0 2 > 1"
    ]
    view.apply([ended(8, p, 3, "nx", _usage(2, 1500, 2))])  # a node it does not have
    assert len(reports) == 1


def test_an_ended_attempt_drops_its_assumption_not_a_newer_one():
    view = ClusterCache(WORKER_HOLDER)
    n1 = make_node("n1").capacity(cpu="4", pods=10).obj()
    p = make_pod("p").req(cpu="1").obj()
    view.load(snapshot(5, n1, p))
    view.assume(p, "n1", attempt=3)
    view.apply([ended(6, p, 2)])  # an older attempt's end, read late
    assert counted(view) == {"n1": ["p"]}
    assert view.ended_attempts == {p.metadata.uid: 2}
    view.apply([ended(7, p, 3)])
    assert counted(view) == {"n1": []}
    assert p.metadata.uid not in view.assumed
    assert view.ended_attempts == {p.metadata.uid: 3}


# ------------------------------------------------------------------ nominations (PodNominator)
def test_nominations_from_the_stream_and_from_this_scheduler():
    cache = ClusterCache(WORKER_HOLDER)
    n1 = make_node("n1").capacity(pods=10).obj()
    streamed = make_pod("s").obj()
    streamed.status.nominated_node_name = "n1"
    cache.load(snapshot(1, n1, streamed))
    assert {n: [p.metadata.name for p in ps] for n, ps in cache.nominated_pods.items()} == {
        "n1": ["s"]
    }
    mine = make_pod("m").obj()
    cache.nominate(mine, "n1")  # decided here, before the store says so
    assert sorted(p.metadata.name for p in cache.nominated_pods["n1"]) == ["m", "s"]
    assert mine.status.nominated_node_name == ""  # the caller's pod is not touched
    # Counted on its node (assumed): not also counted as nominated.
    cache.assume(mine, "n1", attempt=1)
    assert [p.metadata.name for p in cache.nominated_pods["n1"]] == ["s"]
    cache.forget(mine.metadata.uid)
    assert sorted(p.metadata.name for p in cache.nominated_pods["n1"]) == ["m", "s"]
    # The stream clears one (its nomination removed), this scheduler clears the other.
    cleared = make_pod("s").uid(streamed.metadata.uid).obj()
    cache.apply([put(2, cleared)])
    cache.nominate(mine, "")
    assert cache.nominated_pods == {}


def test_expire_forgets_assumptions_older_than_the_ttl():
    cache = ClusterCache(WORKER_HOLDER)
    cache.load(snapshot(1, make_node("n1").capacity(pods=10).obj()))
    old, new = make_pod("old").obj(), make_pod("new").obj()
    cache.assume(old, "n1", attempt=1, now=100.0)
    cache.assume(new, "n1", attempt=1, now=150.0)
    assert cache.expire(now=170.0, ttl=60.0) == 1
    assert set(cache.assumed) == {new.metadata.uid}
    assert counted(cache) == {"n1": ["new"]}


def test_a_reload_keeps_assumptions_whose_binding_has_not_arrived():
    cache = ClusterCache(WORKER_HOLDER)
    n1 = make_node("n1").capacity(pods=10).obj()
    cache.load(snapshot(1, n1))
    waiting, done = make_pod("waiting").obj(), make_pod("done").obj()
    cache.assume(waiting, "n1", attempt=2, now=1.0)
    cache.assume(done, "n1", attempt=1, now=1.0)
    bound = make_pod("done").uid(done.metadata.uid).node("n1").obj()
    cache.load(snapshot(5, n1, bound))
    assert set(cache.assumed) == {waiting.metadata.uid}
    assert cache.assumed[waiting.metadata.uid].attempt == 2
    assert counted(cache) == {"n1": ["done", "waiting"]}
    assert cache.bound_node("default/done", done.metadata.uid) == "n1"
    assert cache.bound_node("default/done", "another-uid") == ""
    assert cache.bound_node("default/waiting", waiting.metadata.uid) == ""


def test_what_every_node_may_depend_on_moves_the_shared_epoch():
    """Namespaces, services and workload selectors reach every node's Filter and Score
    results (spread defaults, namespace selectors): the signature cache's entries are rebuilt.
    A pod's binding moves only its row; a pod with inter-pod terms, the inter-pod epoch."""
    view = ClusterCache()
    view.load(snapshot(1, make_node("n1").obj()))
    columns = view.columns
    shared, inter_pod = columns.shared_epoch, columns.inter_pod_epoch
    view.apply([put(2, make_namespace("team-a", {"tier": "gold"}))])
    assert (columns.shared_epoch, columns.inter_pod_epoch) == (shared + 1, inter_pod)
    logged = len(columns.row_log)
    view.apply([put(3, make_pod("plain").uid("p1").node("n1").obj())])
    assert columns.shared_epoch == shared + 1
    assert columns.row_log[logged:] == [(0, "p1")]
    anti = make_pod("anti").uid("p2").node("n1")
    view.apply([put(4, anti.pod_affinity_exists("app", "kubernetes.io/hostname", anti=True).obj())])
    assert (columns.shared_epoch, columns.inter_pod_epoch) == (shared + 1, inter_pod + 1)


def test_the_binding_of_a_reserved_pod_keeps_it_counted_without_touching_the_columns():
    """Another binder's reservation, then its binding (the same stored body, bound): the pod
    stays counted where it was, as the binding of a pod assumed here does; its end
    afterwards changes nothing."""
    view = ClusterCache(holder="me")
    view.load(snapshot(3, make_node("n1").capacity(pods=10).obj(), make_pod("p").uid("u").obj()))
    pending = view.pods["default/p"]
    view.apply([reservation(4, pending, "n1", "other")])
    logged = len(view.columns.row_log)
    bound = make_pod("p").uid("u").node("n1").obj()
    view.apply([Change(5, "put", "Pod", bound.key, "u", bound, "n1", same_body=True)])
    assert counted(view) == {"n1": ["p"]}
    assert len(view.columns.row_log) == logged  # no removal and addition on the row
    view.apply([reservation(6, pending, "n1", "other", "delete")])
    assert counted(view) == {"n1": ["p"]}
    assert not view.is_assumed("u")
    with view.as_of(3):  # bound now, not a reservation a check as of earlier leaves out
        assert counted(view) == {"n1": ["p"]}
