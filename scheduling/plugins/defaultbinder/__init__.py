"""DefaultBinder: binds the pod through the framework handle's binder."""

from scheduling.plugins.defaultbinder.default_binder import DefaultBinder, new

__all__ = ["DefaultBinder", "new"]
