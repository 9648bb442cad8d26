"""The scheduling library the dry run, the workers and the binder run: framework, plugins, views."""
