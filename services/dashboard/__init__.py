"""The berth dashboard: a small web page and its JSON API over the store and the queue's state
(`python -m services.dashboard`); see services/dashboard/app.py."""
