"""Tests of the typed settings (shared/settings.py), their docs and the chart's env."""
