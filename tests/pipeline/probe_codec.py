"""Probe (not collected: run it by path): the message codec's cost per message, best of five
rounds over 100-message batches, through the public calls the services use.

    PYTHONPATH=$PWD python tests/pipeline/probe_codec.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgpack

from shared.messaging.messages import Outcome, ScheduleBatch, ScheduleRequest, decode_message
from shared.messaging.proposals import Proposal

BATCH = 100


def per_message(name: str, run: Callable[[], object], rounds: int = 300) -> None:
    run()
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(rounds):
            run()
        best = min(best, (time.perf_counter() - started) / rounds / BATCH)
    print(f"{name:24s} {best * 1e6:6.2f} µs per message")


def main() -> None:
    requests = tuple(
        ScheduleRequest(
            "t1", f"ns/p{i}", f"u-{i}", 1, i + 1, 0, 1.5, 1.5, 31.5,
            pod=b"x" * 400, fingerprint="abcd", resource_version=7,
        )
        for i in range(BATCH)
    )  # fmt: skip
    batch = ScheduleBatch(requests).encode()
    outcomes = [
        Outcome("t1", f"ns/p{i}", f"u-{i}", 1, "scheduled", node_name="node-1")
        for i in range(BATCH)
    ]
    proposals = [
        Proposal(
            "t1", f"ns/p{i}", f"u-{i}", 1, "node-1", node_resource_version=5,
            pod_fingerprint="abcd", pod_resource_version=7, scheduling_cycle=3,
            sequence=i + 1, cycle_started=1.5, queued_at=1.0,
        )
        for i in range(BATCH)
    ]  # fmt: skip
    # As a reader gets them: unpacked from the wire.
    outcome_bodies = [msgpack.unpackb(msgpack.packb(o.to_body())) for o in outcomes]
    proposal_bodies = [msgpack.unpackb(msgpack.packb(p.to_body())) for p in proposals]
    per_message("schedule batch decode", lambda: decode_message(batch))
    per_message("outcome decode", lambda: [Outcome.from_body(b) for b in outcome_bodies])
    per_message("outcome encode", lambda: [o.to_body() for o in outcomes])
    per_message("proposal decode", lambda: [Proposal.from_body(b) for b in proposal_bodies])
    per_message("proposal encode", lambda: [p.to_body() for p in proposals])


if __name__ == "__main__":
    main()
