"""Node selectors compiled once per cycle, evaluated over NodeColumns rows with numpy.

Semantics are upstream component-helpers `nodeaffinity` plus apimachinery `labels`:
- requirements inside a term are ANDed, the terms of a selector are ORed;
- an empty term (no matchExpressions, no matchFields) matches nothing, and so does a selector
  without terms;
- a term that fails to parse (unknown operator, wrong number of values, a key that is not a
  qualified name, a value that is not a valid label value, a Gt/Lt value that is not an int64)
  matches nothing; the other terms still count (upstream LazyErrorNodeSelector);
- In/NotIn/Exists/DoesNotExist work on label codes; NotIn and DoesNotExist match a node without
  the key; Gt/Lt compare the label parsed as an int64 and never match a node without the key or
  with a non-integer value;
- matchFields support `metadata.name` with In/NotIn and exactly one value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows, parse_int64
from shared.config.names import label_value_errors, qualified_name_errors
from shared.models import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
)

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
NODE_NAME_FIELD = "metadata.name"

Mask = NDArray[np.bool_]

# Below this magnitude a float64 comparison with the (float64) label column is exact.
_FLOAT_EXACT = 2**53
# Up to this many wanted codes, ORed equality beats np.isin's setup cost.
_SMALL_IN = 8


def _rows_equal(codes: NDArray[np.int32], wanted: list[int]) -> Mask:
    if not wanted:
        return np.zeros(codes.shape[0], dtype=np.bool_)
    if len(wanted) > _SMALL_IN:
        found: Mask = np.isin(codes, wanted)
        return found
    mask: Mask = codes == wanted[0]
    for code in wanted[1:]:
        mask |= codes == code
    return mask


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One parsed matchExpressions entry (or one nodeSelector pair, as In with one value)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    number: int = 0
    """The Gt/Lt operand."""

    def mask(self, nodes: NodeColumns, rows: Rows) -> Mask:
        column = nodes.label(self.key)
        codes = column.codes[rows]
        if self.operator in (IN, NOT_IN):
            wanted = [c for c in (column.code_of(v) for v in self.values) if c >= 0]
            matched = _rows_equal(codes, wanted)
            return matched if self.operator == IN else ~matched
        if self.operator == EXISTS:
            return codes >= 0
        if self.operator == DOES_NOT_EXIST:
            return codes < 0
        if abs(self.number) < _FLOAT_EXACT:
            numbers = column.numeric()[rows]  # NaN (no key, not an integer) compares False
            return numbers > self.number if self.operator == GT else numbers < self.number
        # Huge operands: compare exactly, once per distinct value (trailing False: no key).
        parsed = (parse_int64(v) for v in column.values)
        if self.operator == GT:
            table = [n is not None and n > self.number for n in parsed]
        else:
            table = [n is not None and n < self.number for n in parsed]
        return np.array([*table, False], dtype=np.bool_)[codes]


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One parsed matchFields entry: `field In [value]` or `field NotIn [value]`."""

    key: str
    operator: str
    value: str

    def mask(self, nodes: NodeColumns, rows: Rows) -> Mask:
        equal: Mask
        if self.key == NODE_NAME_FIELD:
            equal = nodes.row_indices(rows) == nodes.index.get(self.value, -1)
        else:
            # The only node field is metadata.name; any other field reads as "".
            equal = np.full(nodes.size_of(rows), self.value == "", dtype=np.bool_)
        return equal if self.operator == IN else ~equal


@dataclass(frozen=True, slots=True)
class Term:
    """A parsed, non-empty NodeSelectorTerm: every requirement must hold."""

    labels: tuple[LabelRequirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()

    def mask(self, nodes: NodeColumns, rows: Rows) -> Mask:
        requirements: Iterable[LabelRequirement | FieldRequirement] = (*self.labels, *self.fields)
        mask: Mask | None = None
        for requirement in requirements:
            matched = requirement.mask(nodes, rows)
            mask = matched if mask is None else mask & matched
            if not mask.any():
                break
        if mask is None:  # not built by compile_term: empty terms are dropped there
            return np.zeros(nodes.size_of(rows), dtype=np.bool_)
        return mask


def _parse_label_requirement(
    req: NodeSelectorRequirement,
) -> tuple[LabelRequirement | None, list[str]]:
    errors: list[str] = []
    key_errors = qualified_name_errors(req.key)
    if key_errors:
        errors.append(f"invalid label key {req.key!r}: " + "; ".join(key_errors))
    op, values = req.operator, req.values
    number = 0
    if op in (IN, NOT_IN):
        if not values:
            errors.append(f"{req.key}: for 'in', 'notin' operators, values set can't be empty")
    elif op in (EXISTS, DOES_NOT_EXIST):
        if values:
            errors.append(f"{req.key}: values set must be empty for exists and does not exist")
    elif op in (GT, LT):
        parsed = parse_int64(values[0]) if len(values) == 1 else None
        if len(values) != 1:
            errors.append(f"{req.key}: for 'Gt', 'Lt' operators, exactly one value is required")
        elif parsed is None:
            errors.append(f"{req.key}: for 'Gt', 'Lt' operators, the value must be an integer")
        else:
            number = parsed
    else:
        errors.append(f"{req.key}: unsupported operator {op!r}")
    for value in values:
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(f"{req.key}: invalid label value {value!r}: " + "; ".join(value_errors))
    if errors:
        return None, errors
    return LabelRequirement(req.key, op, tuple(values), number), []


def _parse_field_requirement(req: NodeSelectorRequirement) -> tuple[FieldRequirement | None, str]:
    if req.operator not in (IN, NOT_IN):
        return None, f"{req.key}: unsupported field operator {req.operator!r}"
    if len(req.values) != 1:
        return None, f"{req.key}: field requirement values must have one element"
    return FieldRequirement(req.key, req.operator, req.values[0]), ""


def compile_term(term: NodeSelectorTerm) -> tuple[Term | None, list[str]]:
    """(term, parse errors). An empty term gives (None, []): it matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return None, []
    labels: list[LabelRequirement] = []
    fields: list[FieldRequirement] = []
    errors: list[str] = []
    for req in term.match_expressions:
        label, label_errors = _parse_label_requirement(req)
        errors.extend(label_errors)
        if label is not None:
            labels.append(label)
    for req in term.match_fields:
        field_req, field_error = _parse_field_requirement(req)
        if field_req is None:
            errors.append(field_error)
        else:
            fields.append(field_req)
    if errors:
        return None, errors
    return Term(tuple(labels), tuple(fields)), []


@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed NodeSelector: matching terms ORed (empty and unparsable terms dropped)."""

    terms: tuple[Term, ...] = ()
    errors: tuple[str, ...] = ()

    def mask(self, nodes: NodeColumns, rows: Rows) -> Mask:
        mask: Mask | None = None
        for term in self.terms:
            matched = term.mask(nodes, rows)
            mask = matched if mask is None else mask | matched
            if mask.all():
                break
        if mask is None:
            return np.zeros(nodes.size_of(rows), dtype=np.bool_)
        return mask


def compile_selector(selector: NodeSelector) -> Selector:
    terms: list[Term] = []
    errors: list[str] = []
    for term in selector.node_selector_terms:
        compiled, term_errors = compile_term(term)
        errors.extend(term_errors)
        if compiled is not None:
            terms.append(compiled)
    return Selector(tuple(terms), tuple(errors))


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """A pod's nodeSelector (every pair) AND its required node affinity (upstream
    GetRequiredNodeAffinity). Either part may be absent; with neither, every node matches."""

    node_selector: tuple[LabelRequirement, ...] = ()
    affinity: Selector | None = None

    def mask(self, nodes: NodeColumns, rows: Rows) -> Mask:
        mask: Mask | None = None
        for requirement in self.node_selector:
            matched = requirement.mask(nodes, rows)
            mask = matched if mask is None else mask & matched
        if self.affinity is not None and (mask is None or mask.any()):
            matched = self.affinity.mask(nodes, rows)
            mask = matched if mask is None else mask & matched
        if mask is None:
            return np.ones(nodes.size_of(rows), dtype=np.bool_)
        return mask


def compile_required(
    node_selector: Mapping[str, str], affinity: NodeSelector | None
) -> RequiredNodeAffinity:
    # labels.SelectorFromSet: equality on each pair, no validation.
    pairs = tuple(LabelRequirement(key, IN, (value,)) for key, value in node_selector.items())
    return RequiredNodeAffinity(pairs, compile_selector(affinity) if affinity is not None else None)


@dataclass(frozen=True, slots=True)
class PreferredTerms:
    """Parsed preferred terms; a node scores the sum of the weights of the terms it matches."""

    terms: tuple[tuple[int, Term], ...] = ()

    def score(self, nodes: NodeColumns, rows: Rows, out: NDArray[np.int64]) -> None:
        """Add each matching term's weight into `out` (aligned with `rows`)."""
        for weight, term in self.terms:
            out += np.multiply(term.mask(nodes, rows), weight, dtype=np.int64)


def compile_preferred(terms: list[PreferredSchedulingTerm]) -> tuple[PreferredTerms, list[str]]:
    """Upstream NewPreferredSchedulingTerms: weight-0 and empty terms are ignored; any parse
    error is reported (the caller fails)."""
    parsed: list[tuple[int, Term]] = []
    errors: list[str] = []
    for preferred in terms:
        if preferred.weight == 0:
            continue
        term, term_errors = compile_term(preferred.preference)
        errors.extend(term_errors)
        if term is not None:
            parsed.append((preferred.weight, term))
    return PreferredTerms(tuple(parsed)), errors
