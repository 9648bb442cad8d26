"""Quota admission (Kueue's model): ClusterQueues, cohorts and flavors, the pure rules that
decide admission, preemption and fair sharing, and the queue's admission loop over them."""
