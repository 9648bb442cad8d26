"""Scheduler workers: stateless consumers of `berth.schedule` that run the scheduling cycle
optimistically against their own view of the cluster and publish proposals to the binder.

    python -m services.scheduler --redis-url ... --kafka-bootstrap ... [--config F]

Modules: `config` (WorkerConfig, flags), `cycle` (one request -> a proposal or an outcome),
`service` (Kafka and the change stream), `results` (what each decision sends), `heartbeat`
(what a worker reports), `main` (the process). The cluster view the cycle runs
against is the scheduling library's (`scheduling/cache`).
"""

from services.scheduler.config import WorkerConfig
from services.scheduler.service import SchedulerWorker
from shared.store.objects import read_heartbeats

__all__ = ["SchedulerWorker", "WorkerConfig", "read_heartbeats"]
