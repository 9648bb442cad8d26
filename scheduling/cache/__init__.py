"""The cluster views (ClusterCache): a snapshot of the store kept current from its change stream."""
