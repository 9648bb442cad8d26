"""DefaultBinder: binds the pod through the framework handle's binder."""

from services.scheduler.plugins.defaultbinder.default_binder import DefaultBinder, new

__all__ = ["DefaultBinder", "new"]
