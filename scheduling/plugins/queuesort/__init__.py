"""PrioritySort: the default QueueSort (higher priority first, then earlier arrival)."""

from scheduling.plugins.queuesort.priority_sort import PrioritySort, new

__all__ = ["PrioritySort", "new"]
