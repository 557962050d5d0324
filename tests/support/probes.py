"""Messages with unique values, produced so that tests can find each one in a syscall trace."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer


def produce_probes(bootstrap: str, topic: str, kind: str, one_by_one: int = 4, burst: int = 12) -> list[bytes]:
    """Values `<kind>-<tag>-<n>.` produced with acks=all: `one_by_one` each awaited alone, then
    `burst` in flight together (several requests at once: fsyncs shared by group commit). The
    final "." keeps one probe from being a prefix of another ("-1" of "-14")."""
    tag = uuid.uuid4().hex[:8]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                         "compression.type": "none", "enable.idempotence": False})
    values = [f"{kind}-{tag}-{n}.".encode() for n in range(one_by_one + burst)]
    failures: list[object] = []

    def report(error: object, _message: object) -> None:
        if error is not None:
            failures.append(error)

    for value in values[:one_by_one]:
        producer.produce(topic, value, on_delivery=report)
        assert producer.flush(30) == 0
    for value in values[one_by_one:]:
        producer.produce(topic, value, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not failures, failures
    return values
