"""SchedulingGates: a pod with spec.schedulingGates stays out of activeQ until they are gone."""

from services.scheduler.plugins.schedulinggates.scheduling_gates import SchedulingGates, new

__all__ = ["SchedulingGates", "new"]
