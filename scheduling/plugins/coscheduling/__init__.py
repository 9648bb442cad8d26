"""Coscheduling: gang scheduling with scheduler-plugins' PodGroups (on in berth's default
profile; see coscheduling.py)."""

from scheduling.plugins.coscheduling.coscheduling import (
    Coscheduling,
    Gang,
    gang_of,
    group_key,
    new,
    wait_seconds,
)

__all__ = [
    "Coscheduling",
    "Gang",
    "gang_of",
    "group_key",
    "new",
    "wait_seconds",
]
