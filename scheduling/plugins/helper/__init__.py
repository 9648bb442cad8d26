"""Helpers shared by several in-tree plugins (upstream pkg/scheduler/framework/plugins/helper)."""

from scheduling.plugins.helper.normalize_score import default_normalize_score

__all__ = ["default_normalize_score"]
