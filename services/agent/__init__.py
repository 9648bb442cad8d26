"""The simulated node agent (standalone mode): pods that finish, node heartbeats, the node
lifecycle controller and taint-based eviction, horizontally partitioned by node."""
