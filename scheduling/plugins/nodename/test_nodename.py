import pytest

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.status import Code, Status
from scheduling.plugins import names
from scheduling.plugins.helper.testing import filter_statuses
from scheduling.plugins.nodename import ERR_REASON, NodeName, new
from tests.builders import make_node, make_pod

REJECTED = Status.unresolvable(ERR_REASON, plugin=names.NODE_NAME)


@pytest.mark.parametrize(
    ("node_name", "node", "want"),
    [
        # upstream node_name_test.go
        pytest.param("", "foo", None, id="no-host-specified"),
        pytest.param("foo", "foo", None, id="host-matches"),
        pytest.param("bar", "foo", REJECTED, id="host-does-not-match"),
    ],
)
def test_filter_upstream(node_name: str, node: str, want: Status | None) -> None:
    nodes = NodeColumns([make_node(node).obj()])
    pod = make_pod("p").node(node_name).obj()
    got = filter_statuses(NodeName(), CycleState(), pod, nodes)
    assert got == {node: want}


@pytest.mark.parametrize(
    ("node_name", "subset", "want_ok"),
    [
        pytest.param("n2", None, {"n2"}, id="all-rows-one-match"),
        pytest.param("n2", ["n3", "n2"], {"n2"}, id="index-rows"),
        pytest.param("n2", ["n1", "n3"], set(), id="index-rows-without-the-node"),
        pytest.param("gone", None, set(), id="unknown-node-rejects-all"),
        pytest.param("", ["n3"], {"n3"}, id="no-node-name-passes-subset"),
    ],
)
def test_filter_all_rows_at_once(
    node_name: str, subset: list[str] | None, want_ok: set[str]
) -> None:
    nodes = NodeColumns([make_node(n).obj() for n in ("n1", "n2", "n3")])
    pod = make_pod("p").node(node_name).obj()
    got = filter_statuses(NodeName(), CycleState(), pod, nodes, subset)
    assert {n for n, s in got.items() if s is None} == want_ok
    for status in (s for s in got.values() if s is not None):
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (ERR_REASON,)


def test_new_and_name() -> None:
    plugin = new(None, None)  # type: ignore[arg-type]
    assert plugin.name == "NodeName"
    assert not hasattr(plugin, "pre_filter"), "upstream NodeName has no PreFilter"
