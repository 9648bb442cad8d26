from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import PreFilterResult
from scheduling.framework.status import SUCCESS, Code, Status
from scheduling.plugins.helper.testing import by_name, filter_statuses, rows_of
from scheduling.plugins.nodeaffinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NodeAffinity,
    NodeAffinityArgsError,
    compile_selector,
    new,
)
from shared.config.plugin_args import NodeAffinityArgs
from shared.models import (
    Affinity,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodSpec,
    PreferredSchedulingTerm,
)
from shared.models import NodeAffinity as NodeAffinitySpec
from tests.builders import make_node, make_pod

NAME = "metadata.name"
Req = tuple[str, str, Sequence[str]]


def reqs(*items: Req) -> list[NodeSelectorRequirement]:
    return [NodeSelectorRequirement(key=k, operator=op, values=list(v)) for k, op, v in items]


def term(*exprs: Req, fields: Sequence[Req] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=reqs(*exprs), match_fields=reqs(*fields))


def selector(*terms: NodeSelectorTerm) -> NodeSelector:
    return NodeSelector(node_selector_terms=list(terms))


def preferred(*weighted: tuple[int, NodeSelectorTerm]) -> list[PreferredSchedulingTerm]:
    return [PreferredSchedulingTerm(weight=w, preference=t) for w, t in weighted]


def pod(
    *terms: NodeSelectorTerm,
    node_selector: Mapping[str, str] | None = None,
    prefer: list[PreferredSchedulingTerm] | None = None,
) -> Pod:
    the_pod = make_pod("p").node_selector(node_selector).obj()
    if terms or prefer:
        the_pod.spec.affinity = Affinity(
            node_affinity=NodeAffinitySpec(
                required_during_scheduling_ignored_during_execution=selector(*terms)
                if terms
                else None,
                preferred_during_scheduling_ignored_during_execution=prefer or [],
            )
        )
    return the_pod


def added(
    required: NodeSelector | None = None, prefer: list[PreferredSchedulingTerm] | None = None
) -> NodeAffinityArgs:
    return NodeAffinityArgs(
        added_affinity=NodeAffinitySpec(
            required_during_scheduling_ignored_during_execution=required,
            preferred_during_scheduling_ignored_during_execution=prefer or [],
        )
    )


def node(name: str, labels: Mapping[str, str] | None = None) -> Node:
    return make_node(name).labels(labels).obj()


def unresolvable(reason: str) -> Status:
    return Status.unresolvable(reason, plugin="NodeAffinity")


POD_REJECTED = unresolvable(ERR_REASON_POD)
ENFORCED_REJECTED = unresolvable(ERR_REASON_ENFORCED)
SKIP = Status.skip()
GPU_EXISTS_NOT_AMD = term(("GPU", "Exists", []), ("GPU", "NotIn", ["AMD", "INTER"]))
NO_REQUIRED_AFFINITY = Pod(spec=PodSpec(affinity=Affinity(node_affinity=NodeAffinitySpec())))


@dataclass(frozen=True)
class FilterCase:
    pod: Pod
    labels: Mapping[str, str] = field(default_factory=dict)
    node_name: str = "node"
    args: NodeAffinityArgs | None = None
    run_pre_filter: bool = True
    want_pre_filter: Status = SUCCESS
    want_names: set[str] | None = None
    """Node names of the PreFilterResult (None: no narrowing)."""
    want: Status | None = None
    """Filter's status for the node (None: it passes)."""


FILTER_CASES = [
    # upstream node_affinity_test.go TestNodeAffinity
    pytest.param(
        FilterCase(pod(node_selector={"foo": "bar"}), want=POD_REJECTED), id="missing-labels"
    ),
    pytest.param(FilterCase(pod(node_selector={"foo": "bar"}), {"foo": "bar"}), id="same-labels"),
    pytest.param(
        FilterCase(pod(node_selector={"foo": "bar"}), {"foo": "bar", "baz": "blah"}),
        id="node-labels-are-superset",
    ),
    pytest.param(
        FilterCase(
            pod(node_selector={"foo": "bar", "baz": "blah"}), {"foo": "bar"}, want=POD_REJECTED
        ),
        id="node-labels-are-subset",
    ),
    pytest.param(
        FilterCase(pod(term(("foo", "In", ["bar", "value2"]))), {"foo": "bar"}),
        id="in-operator-matches",
    ),
    pytest.param(
        FilterCase(pod(term(("kernel-version", "Gt", ["0204"]))), {"kernel-version": "0206"}),
        id="gt-operator-matches",
    ),
    pytest.param(
        FilterCase(pod(term(("mem-type", "NotIn", ["DDR", "DDR2"]))), {"mem-type": "DDR3"}),
        id="notin-operator-matches",
    ),
    pytest.param(
        FilterCase(pod(term(("GPU", "Exists", []))), {"GPU": "NVIDIA-GRID-K1"}),
        id="exists-operator-matches",
    ),
    pytest.param(
        FilterCase(
            pod(term(("foo", "In", ["value1", "value2"]))), {"foo": "bar"}, want=POD_REJECTED
        ),
        id="affinity-does-not-match",
    ),
    pytest.param(
        FilterCase(pod(term()), {"foo": "bar"}, want=POD_REJECTED),
        id="empty-match-expressions-match-nothing",
    ),
    pytest.param(FilterCase(pod(), {"foo": "bar"}, want_pre_filter=SKIP), id="no-affinity"),
    pytest.param(
        FilterCase(NO_REQUIRED_AFFINITY, {"foo": "bar"}, want_pre_filter=SKIP),
        id="affinity-with-nil-required-selector",
    ),
    pytest.param(
        FilterCase(pod(GPU_EXISTS_NOT_AMD), {"GPU": "NVIDIA-GRID-K1"}),
        id="expressions-anded-match",
    ),
    pytest.param(
        FilterCase(
            pod(term(("GPU", "Exists", []), ("GPU", "In", ["AMD", "INTER"]))),
            {"GPU": "NVIDIA-GRID-K1"},
            want=POD_REJECTED,
        ),
        id="expressions-anded-do-not-match",
    ),
    pytest.param(
        FilterCase(
            pod(
                term(("foo", "In", ["bar", "value2"])),
                term(("diffkey", "In", ["wrong", "value2"])),
            ),
            {"foo": "bar"},
        ),
        id="terms-ored-match",
    ),
    pytest.param(
        FilterCase(pod(term(("foo", "Exists", [])), node_selector={"foo": "bar"}), {"foo": "bar"}),
        id="affinity-and-node-selector-both-satisfied",
    ),
    pytest.param(
        FilterCase(
            pod(term(("foo", "Exists", [])), node_selector={"foo": "bar"}),
            {"foo": "barrrrrr"},
            want=POD_REJECTED,
        ),
        id="affinity-matches-but-node-selector-does-not",
    ),
    pytest.param(
        FilterCase(
            pod(term(("foo", "NotIn", ["invalid value: ___@#$%^"]))),
            {"foo": "bar"},
            want=POD_REJECTED,
        ),
        id="invalid-value-in-term-never-matches",
    ),
    pytest.param(
        FilterCase(
            pod(term(fields=[(NAME, "In", ["node1"])])), node_name="node1", want_names={"node1"}
        ),
        id="match-fields-in-matches",
    ),
    pytest.param(
        FilterCase(
            pod(term(fields=[(NAME, "In", ["node1"])])),
            node_name="node2",
            want_names={"node1"},
            want=POD_REJECTED,
        ),
        id="match-fields-in-does-not-match",
    ),
    pytest.param(
        FilterCase(
            pod(
                term(fields=[(NAME, "In", ["node1"]), (NAME, "In", ["node2"])]),
                term(("foo", "In", ["bar"])),
            ),
            {"foo": "bar"},
            node_name="node2",
        ),
        id="two-terms-fields-fail-expressions-match",
    ),
    pytest.param(
        FilterCase(
            pod(term(("foo", "In", ["bar"]), fields=[(NAME, "In", ["node1"])])),
            {"foo": "bar"},
            node_name="node2",
            want_names={"node1"},
            want=POD_REJECTED,
        ),
        id="one-term-fields-fail-expressions-match",
    ),
    pytest.param(
        FilterCase(
            pod(term(("foo", "In", ["bar"]), fields=[(NAME, "In", ["node1"])])),
            {"foo": "bar"},
            node_name="node1",
            want_names={"node1"},
        ),
        id="one-term-fields-and-expressions-match",
    ),
    pytest.param(
        FilterCase(
            pod(term(fields=[(NAME, "In", ["node1"])]), term(("foo", "In", ["not-match-to-bar"]))),
            {"foo": "bar"},
            node_name="node2",
            want=POD_REJECTED,
        ),
        id="two-terms-neither-matches",
    ),
    pytest.param(
        FilterCase(
            pod(term(fields=[(NAME, "In", ["node1"])]), term(fields=[(NAME, "In", ["node2"])])),
            node_name="node2",
            want_names={"node1", "node2"},
        ),
        id="two-terms-of-node-name-affinity",
    ),
    pytest.param(
        FilterCase(
            pod(term(fields=[(NAME, "In", ["node1"]), (NAME, "In", ["node2"])])),
            {"foo": "bar"},
            node_name="node2",
            want_pre_filter=unresolvable(ERR_REASON_CONFLICT),
            want=POD_REJECTED,
        ),
        id="conflicting-match-field-requirements",
    ),
    pytest.param(
        FilterCase(
            pod(term(("zone", "In", ["foo"]))),
            {"zone": "foo"},
            node_name="node2",
            args=added(selector(term(fields=[(NAME, "In", ["node2"])]))),
        ),
        id="matches-added-and-pod-affinity",
    ),
    pytest.param(
        FilterCase(
            pod(term(("zone", "In", ["bar"]))),
            {"zone": "foo"},
            node_name="node2",
            args=added(selector(term(fields=[(NAME, "In", ["node2"])]))),
            want=POD_REJECTED,
        ),
        id="matches-added-but-not-pod-affinity",
    ),
    pytest.param(
        FilterCase(
            pod(),
            {"zone": "foo"},
            node_name="node2",
            args=added(selector(term(("zone", "In", ["bar"])))),
            want=ENFORCED_REJECTED,
        ),
        id="does-not-match-added-affinity",
    ),
    pytest.param(
        FilterCase(
            pod(node_selector={"foo": "bar"}), {"foo": "bar", "baz": "blah"}, run_pre_filter=False
        ),
        id="node-selector-without-pre-filter",
    ),
    pytest.param(
        FilterCase(pod(GPU_EXISTS_NOT_AMD), {"GPU": "NVIDIA-GRID-K1"}, run_pre_filter=False),
        id="node-affinity-without-pre-filter",
    ),
    # berth additions (upstream semantics)
    pytest.param(
        FilterCase(
            pod(term(("zone", "In", ["bar"]))),
            {"zone": "foo"},
            args=added(selector(term(("zone", "In", ["bar"])))),
            want=ENFORCED_REJECTED,
        ),
        id="added-affinity-checked-first",
    ),
    pytest.param(
        FilterCase(
            pod(term(fields=[(NAME, "In", ["node1", "node2"])])),
            node_name="node1",
            want_names={"node1", "node2"},
            want=POD_REJECTED,
        ),
        id="field-in-with-two-values-narrows-but-never-matches",
    ),
    pytest.param(
        FilterCase(pod(term(fields=[(NAME, "NotIn", ["node1"])])), node_name="node2"),
        id="field-not-in-matches-other-node",
    ),
    pytest.param(
        FilterCase(
            pod(term(fields=[(NAME, "NotIn", ["node1"])])), node_name="node1", want=POD_REJECTED
        ),
        id="field-not-in-rejects-named-node",
    ),
    pytest.param(
        FilterCase(pod(term(fields=[(NAME, "Exists", [])])), want=POD_REJECTED),
        id="field-operator-other-than-in-notin-never-matches",
    ),
    pytest.param(
        FilterCase(
            pod(term(fields=[(NAME, "In", ["node1"])]), term()),
            node_name="node2",
            want=POD_REJECTED,
        ),
        id="an-empty-term-stops-narrowing",
    ),
    pytest.param(
        FilterCase(pod(node_selector={"foo": ""}), {"foo": ""}), id="selector-empty-value-matches"
    ),
    pytest.param(
        FilterCase(pod(node_selector={"foo": ""}), want=POD_REJECTED),
        id="selector-empty-value-needs-the-key",
    ),
]


@pytest.mark.parametrize("case", FILTER_CASES)
def test_filter(case: FilterCase) -> None:
    nodes = NodeColumns([node(case.node_name, case.labels)])
    plugin = new(case.args, None)  # type: ignore[arg-type]
    state = CycleState()
    if case.run_pre_filter:
        result, status = plugin.pre_filter(state, case.pod, nodes)
        assert status == case.want_pre_filter
        want_result = PreFilterResult(case.want_names) if case.want_names is not None else None
        assert result == want_result
    assert filter_statuses(plugin, state, case.pod, nodes) == {case.node_name: case.want}


NODES = [
    node("n1", {"zone": "a", "disk": "ssd", "cores": "8", "gpu": "t4"}),
    node("n2", {"zone": "b", "disk": "hdd", "cores": "32"}),
    node("n3", {"zone": "c", "cores": "not-a-number"}),
    node("n4", {"zone": "a", "disk": "ssd", "cores": "-4", "gpu": "a100"}),
    node("n5", {"zone": "d", "cores": "9223372036854775807"}),
    node("n6", {}),
]


@pytest.mark.parametrize(
    ("terms", "want_ok"),
    [
        pytest.param([term(("zone", "In", ["a", "b"]))], {"n1", "n2", "n4"}, id="in"),
        pytest.param(
            [term(("zone", "In", ["a", "x", "y", "z", "q", "r", "s", "t", "u", "c"]))],
            {"n1", "n3", "n4"},
            id="in-many-values",
        ),
        pytest.param([term(("zone", "In", ["nowhere"]))], set(), id="in-unknown-value"),
        pytest.param([term(("rack", "In", ["r1"]))], set(), id="in-unknown-key"),
        pytest.param(
            [term(("disk", "NotIn", ["ssd"]))], {"n2", "n3", "n5", "n6"}, id="notin-missing-key"
        ),
        pytest.param([term(("gpu", "Exists", []))], {"n1", "n4"}, id="exists"),
        pytest.param(
            [term(("gpu", "DoesNotExist", []))], {"n2", "n3", "n5", "n6"}, id="does-not-exist"
        ),
        pytest.param([term(("cores", "Gt", ["8"]))], {"n2", "n5"}, id="gt-skips-non-integers"),
        pytest.param([term(("cores", "Lt", ["9"]))], {"n1", "n4"}, id="lt-negative-label"),
        pytest.param(
            [term(("cores", "Gt", ["9223372036854775806"]))], {"n5"}, id="gt-exact-beyond-2-53"
        ),
        pytest.param(
            [term(("cores", "Lt", ["9223372036854775807"]))],
            {"n1", "n2", "n4"},
            id="lt-exact-beyond-2-53",
        ),
        pytest.param(
            [term(("cores", "Gt", ["-1"]))],
            set(),
            id="gt-negative-operand-is-not-a-label-value",
        ),
        pytest.param(
            [term(("cores", "Gt", ["9223372036854775808"]))], set(), id="gt-operand-overflows"
        ),
        pytest.param([term(("cores", "Gt", ["1", "2"]))], set(), id="gt-two-values-invalid"),
        pytest.param([term(("zone", "In", []))], set(), id="in-without-values-invalid"),
        pytest.param([term(("gpu", "Exists", ["t4"]))], set(), id="exists-with-values-invalid"),
        pytest.param([term(("zone", "Like", ["a"]))], set(), id="unknown-operator-invalid"),
        pytest.param([term(("bad key!", "Exists", []))], set(), id="invalid-key"),
        pytest.param(
            [term(("zone", "Like", ["a"])), term(("zone", "In", ["b"]))],
            {"n2"},
            id="invalid-term-does-not-spoil-others",
        ),
        pytest.param(
            [term(("zone", "In", ["a"]), ("gpu", "In", ["t4"])), term(("zone", "In", ["d"]))],
            {"n1", "n5"},
            id="and-within-or-across",
        ),
        pytest.param(
            [term(("zone", "In", ["a"]), fields=[(NAME, "NotIn", ["n1"])])],
            {"n4"},
            id="labels-and-fields",
        ),
        pytest.param([], set(), id="no-terms-match-nothing"),
        pytest.param([term()], set(), id="empty-term-matches-nothing"),
    ],
)
@pytest.mark.parametrize(
    "subset",
    [pytest.param(None, id="all-rows"), pytest.param(["n6", "n4", "n1", "n3"], id="index-rows")],
)
def test_required_over_many_nodes(
    terms: list[NodeSelectorTerm], want_ok: set[str], subset: list[str] | None
) -> None:
    nodes = NodeColumns(NODES)
    the_pod = pod()
    the_pod.spec.affinity = Affinity(
        node_affinity=NodeAffinitySpec(
            required_during_scheduling_ignored_during_execution=selector(*terms)
        )
    )
    plugin = NodeAffinity()
    state = CycleState()
    _, status = plugin.pre_filter(state, the_pod, nodes)
    assert status.code in (Code.SUCCESS, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    got = filter_statuses(plugin, state, the_pod, nodes, subset)
    assert {n for n, s in got.items() if s is None} == want_ok & set(got)
    assert all(s == POD_REJECTED for s in got.values() if s is not None)


def test_masks_agree_with_per_node_reference() -> None:
    # The models' NodeSelector.matches is a per-node reference for valid selectors.
    terms = [
        term(("zone", "In", ["a", "c"]), ("disk", "NotIn", ["hdd"])),
        term(("cores", "Gt", ["10"])),
        term(("gpu", "DoesNotExist", []), fields=[(NAME, "In", ["n6"])]),
        term(("cores", "Lt", ["0"])),
    ]
    nodes = NodeColumns(NODES)
    for subset in (None, ["n5", "n2"]):
        rows = rows_of(nodes, subset)
        for chosen in ([0], [1], [2], [3], [0, 1], [1, 2, 3], [0, 1, 2, 3]):
            reference = selector(*(terms[i] for i in chosen))
            mask = compile_selector(reference).mask(nodes, rows)
            evaluated = [nodes.names[r] for r in nodes.row_indices(rows).tolist()]
            want = [
                reference.matches(nodes.nodes[nodes.index[n]].metadata.labels, n) for n in evaluated
            ]
            assert mask.tolist() == want, (chosen, subset)


def test_filter_reports_enforced_and_pod_reasons_per_node() -> None:
    nodes = NodeColumns(
        [node("a", {"pool": "batch", "zone": "x"}), node("b", {"pool": "batch"}), node("c", {})]
    )
    plugin = new(added(selector(term(("pool", "In", ["batch"])))), None)  # type: ignore[arg-type]
    the_pod = pod(term(("zone", "Exists", [])))
    state = CycleState()
    assert plugin.pre_filter(state, the_pod, nodes) == (None, SUCCESS)
    assert filter_statuses(plugin, state, the_pod, nodes) == {
        "a": None,
        "b": POD_REJECTED,
        "c": ENFORCED_REJECTED,
    }


def test_pre_filter_skip_needs_no_selector_and_no_added_affinity() -> None:
    nodes = NodeColumns([node("a")])
    plain = make_pod().obj()
    assert NodeAffinity().pre_filter(CycleState(), plain, nodes) == (None, SKIP)
    with_added = new(added(selector(term(("pool", "Exists", [])))), None)  # type: ignore[arg-type]
    assert with_added.pre_filter(CycleState(), plain, nodes) == (None, SUCCESS)


# ---------------------------------------------------------------------------- scoring
LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}
AFFINITY1 = preferred((2, term(("foo", "In", ["bar"]))))
AFFINITY2 = preferred(
    (2, term(("foo", "In", ["bar"]))),
    (4, term(("key", "In", ["value"]))),
    (5, term(("foo", "In", ["bar"]), ("key", "In", ["value"]), ("az", "In", ["az1"]))),
)


def run_score(
    the_pod: Pod,
    the_nodes: list[Node],
    args: NodeAffinityArgs | None = None,
    run_pre_score: bool = True,
    subset: list[str] | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """(raw scores, normalized scores) by node."""
    nodes = NodeColumns(the_nodes)
    plugin = new(args, None)  # type: ignore[arg-type]
    state = CycleState()
    rows = rows_of(nodes, subset)
    if run_pre_score:
        status = plugin.pre_score(state, the_pod, nodes, rows)
        assert status.code in (Code.SUCCESS, Code.SKIP)
    raw = plugin.score(state, the_pod, nodes, rows)
    assert isinstance(raw, np.ndarray)
    return by_name(nodes, rows, raw), by_name(
        nodes, rows, plugin.normalize_score(state, the_pod, raw)
    )


@pytest.mark.parametrize(
    ("the_pod", "the_nodes", "args", "run_pre_score", "want"),
    [
        # upstream node_affinity_test.go TestNodeAffinityPriority
        pytest.param(
            pod(),
            [node("node1", LABEL1), node("node2", LABEL2), node("node3", LABEL3)],
            None,
            True,
            {"node1": 0, "node2": 0, "node3": 0},
            id="no-node-affinity-all-equal",
        ),
        pytest.param(
            pod(prefer=AFFINITY1),
            [node("node1", LABEL4), node("node2", LABEL2), node("node3", LABEL3)],
            None,
            True,
            {"node1": 0, "node2": 0, "node3": 0},
            id="no-node-matches-preferred",
        ),
        pytest.param(
            pod(prefer=AFFINITY1),
            [node("node1", LABEL1), node("node2", LABEL2), node("node3", LABEL3)],
            None,
            True,
            {"node1": 100, "node2": 0, "node3": 0},
            id="only-node1-matches",
        ),
        pytest.param(
            pod(prefer=AFFINITY2),
            [node("node1", LABEL1), node("node5", LABEL5), node("node2", LABEL2)],
            None,
            True,
            {"node1": 18, "node5": 100, "node2": 36},
            id="all-match-with-different-priorities",
        ),
        pytest.param(
            pod(),
            [node("node1", LABEL1), node("node2", LABEL2)],
            added(prefer=AFFINITY1),
            True,
            {"node1": 100, "node2": 0},
            id="added-affinity",
        ),
        pytest.param(
            pod(prefer=AFFINITY1),
            [node("node1", LABEL1), node("node2", LABEL2), node("node3", LABEL5)],
            added(prefer=preferred((3, term(("key", "In", ["value"]))))),
            True,
            {"node1": 40, "node2": 60, "node3": 100},
            id="added-affinity-and-pod-affinity",
        ),
        pytest.param(
            pod(prefer=AFFINITY2),
            [node("node1", LABEL1), node("node5", LABEL5), node("node2", LABEL2)],
            None,
            False,
            {"node1": 18, "node5": 100, "node2": 36},
            id="correct-without-pre-score",
        ),
        # berth additions (upstream semantics)
        pytest.param(
            pod(prefer=preferred((0, term(("foo", "In", ["bar"]))), (7, term()))),
            [node("node1", LABEL1), node("node2", LABEL2)],
            None,
            True,
            {"node1": 0, "node2": 0},
            id="weight-zero-and-empty-terms-ignored",
        ),
    ],
)
def test_score(
    the_pod: Pod,
    the_nodes: list[Node],
    args: NodeAffinityArgs | None,
    run_pre_score: bool,
    want: dict[str, int],
) -> None:
    _, normalized = run_score(the_pod, the_nodes, args, run_pre_score)
    assert normalized == want


def test_spec_f16_node_y_wins() -> None:
    # The node-affinity docs' example: preferred label-1=key-1 (weight 1) and label-2=key-2
    # (weight 50); NodeX has label-1, NodeY label-2. The docs quote the raw sums (X=1, Y=50);
    # upstream's NormalizeScore scales by the max, so after normalization X=2 and Y=100. NodeY
    # wins either way.
    the_pod = pod(
        prefer=preferred(
            (1, term(("label-1", "In", ["key-1"]))), (50, term(("label-2", "In", ["key-2"])))
        )
    )
    the_nodes = [node("NodeX", {"label-1": "key-1"}), node("NodeY", {"label-2": "key-2"})]
    raw, normalized = run_score(the_pod, the_nodes)
    assert raw == {"NodeX": 1, "NodeY": 50}
    assert normalized == {"NodeX": 2, "NodeY": 100}
    assert max(normalized, key=normalized.__getitem__) == "NodeY"


def test_score_index_rows() -> None:
    the_nodes = [node("node1", LABEL1), node("node5", LABEL5), node("node2", LABEL2)]
    raw, normalized = run_score(pod(prefer=AFFINITY2), the_nodes, subset=["node2", "node1"])
    assert raw == {"node2": 4, "node1": 2}
    assert normalized == {"node2": 100, "node1": 50}


@pytest.mark.parametrize(
    ("the_pod", "args", "want_code"),
    [
        pytest.param(pod(), None, Code.SKIP, id="nothing-preferred-skips"),
        pytest.param(pod(term(("a", "Exists", []))), None, Code.SKIP, id="required-only-skips"),
        pytest.param(pod(prefer=AFFINITY1), None, Code.SUCCESS, id="pod-preferred"),
        pytest.param(pod(), added(prefer=AFFINITY1), Code.SUCCESS, id="added-preferred"),
        pytest.param(
            pod(prefer=preferred((3, term(("foo", "In", ["not a value!"]))))),
            None,
            Code.ERROR,
            id="unparsable-preferred-term-is-an-error",
        ),
    ],
)
def test_pre_score_status(the_pod: Pod, args: NodeAffinityArgs | None, want_code: Code) -> None:
    plugin = new(args, None)  # type: ignore[arg-type]
    nodes = NodeColumns([node("a")])
    assert plugin.pre_score(CycleState(), the_pod, nodes, ALL_ROWS).code == want_code


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param(
            added(selector(term(("zone", "In", [])))),
            "parsing addedAffinity.required",
            id="required-without-values",
        ),
        pytest.param(
            added(prefer=preferred((5, term(("zone", "Gt", ["x"]))))),
            "parsing addedAffinity.preferred",
            id="preferred-gt-not-int",
        ),
        pytest.param({"addedAffinity": None}, "not of type NodeAffinityArgs", id="wrong-args-type"),
    ],
)
def test_new_rejects_bad_args(args: object, match: str) -> None:
    with pytest.raises(NodeAffinityArgsError, match=match):
        new(args, None)  # type: ignore[arg-type]


def test_new_defaults() -> None:
    assert new(None, None).name == "NodeAffinity"  # type: ignore[arg-type]
    assert new(NodeAffinityArgs(), None).name == "NodeAffinity"  # type: ignore[arg-type]
