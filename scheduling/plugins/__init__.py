"""The in-tree plugins, one folder each, reached through the registry (registry.py)."""
