"""The Kubernetes API client of Kubernetes mode and the Events it writes."""
