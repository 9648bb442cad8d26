"""Tests of the typed settings (shared/runtime/settings.py), their docs and the chart's env."""
