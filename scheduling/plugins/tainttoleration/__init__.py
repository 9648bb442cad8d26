"""TaintToleration: Filter on NoSchedule/NoExecute taints, Score on PreferNoSchedule taints."""

from scheduling.plugins.tainttoleration.taint_toleration import (
    TaintToleration,
    new,
    untolerated_taint_reason,
)

__all__ = ["TaintToleration", "new", "untolerated_taint_reason"]
