"""The Kubernetes adapter: the API server's objects into berth's store, berth's decisions
back into the API (conditions, nominations, Events). See services/adapter/service.py."""
