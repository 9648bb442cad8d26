"""SchedulingGates: a pod with spec.schedulingGates stays out of activeQ until they are gone."""

from scheduling.plugins.schedulinggates.scheduling_gates import SchedulingGates, new

__all__ = ["SchedulingGates", "new"]
