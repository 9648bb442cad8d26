"""A simulated cluster that lives (standalone mode): pods that finish (KWOK stage annotations),
node heartbeats and conditions, the node-lifecycle taints, taint-based eviction and the
simulated owners of evicted pods. Pure rules here; the node agent (services/agent) runs them."""
