"""The services: queue, scheduler (workers), binder, adapter, agent, dashboard; each a package."""
