"""What operators see of a service: tracing, Prometheus metrics (kube-scheduler's and Kueue's
families), structured logs, the health and metrics endpoints, throughput and latency."""
