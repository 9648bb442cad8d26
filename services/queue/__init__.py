"""The berth queue service: kube-scheduler's PriorityQueue in Redis, driven by Kafka.

- `services.queue.store.QueueStore`: the queue itself (Lua scripts over Redis), usable
  without Kafka.
- `services.queue.service.QueueService`: one replica consuming pod/node events and outcomes,
  dispatching leased pods to `berth.schedule`.
- `services.queue.client.QueueClient`: what other services and the CLI may read of it.

The package imports nothing itself, so that a reader of the queue's client (`berth get`)
does not load the service, Kafka's client among it.
"""
