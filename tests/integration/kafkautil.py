"""Kafka helpers for seqgate's integration tests.

Thin wrappers over confluent-kafka (librdkafka, the same client library
seqgate itself uses) so that tests read as "create these topics, produce these
records, read everything back". Reading back never joins a consumer group:
`consume_all` assigns every partition explicitly from OFFSET_BEGINNING and
stops at the partitions' high watermarks, so it cannot disturb the consumer
group under test nor commit offsets.

A record, as given to `produce` and returned by `consume_all`, is a dict:
    key        bytes | str | None
    value      bytes | str | None
    headers    list of (name, bytes) pairs (order and duplicates preserved)
    partition  int (optional for produce: the default partitioner picks)
`consume_all` adds topic, offset, timestamp (ms since the epoch, as the
broker or producer set it), headers_dict (last value wins for a name) and
returns key/value as bytes.
"""

from __future__ import annotations

import time
import uuid
from typing import Iterable

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError,
                             KafkaException, Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

__all__ = ["create_topics", "delete_topics", "produce", "consume_all",
           "end_offsets", "unique_name"]


def unique_name(prefix: str) -> str:
    """A topic/group name unique to this call: prefix + '-' + 12 hex digits."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, topics: dict[str, int],
                  config: dict[str, str] | None = None,
                  timeout_s: float = 30.0) -> None:
    """Create topics {name: partitions} with replication factor 1.

    `config` (topic-level configs, e.g. {"cleanup.policy": "compact"}) is
    applied to every topic. Waits for every creation to complete and raises
    KafkaException if any fails (an existing topic is a failure too: tests
    use unique names). Then waits until the metadata shows every partition
    with a leader, so that a produce right after cannot race the creation.
    """
    admin = _admin(bootstrap)
    new = [NewTopic(name, num_partitions=n, replication_factor=1,
                    config=dict(config or {}))
           for name, n in topics.items()]
    futures = admin.create_topics(new, operation_timeout=timeout_s,
                                  request_timeout=timeout_s)
    for name, fut in futures.items():
        fut.result(timeout=timeout_s)  # raises KafkaException on failure

    deadline = time.monotonic() + timeout_s
    pending = dict(topics)
    while pending:
        md = admin.list_topics(timeout=timeout_s)
        for name, n in list(pending.items()):
            t = md.topics.get(name)
            if t is not None and t.error is None and len(t.partitions) == n \
                    and all(p.leader >= 0 for p in t.partitions.values()):
                del pending[name]
        if pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics not ready after {timeout_s}s: "
                                   f"{sorted(pending)}")
            time.sleep(0.1)


def delete_topics(bootstrap: str, names: Iterable[str],
                  timeout_s: float = 30.0) -> None:
    """Delete topics; raises KafkaException if any deletion fails."""
    futures = _admin(bootstrap).delete_topics(list(names),
                                              operation_timeout=timeout_s)
    for fut in futures.values():
        fut.result(timeout=timeout_s)


def _to_bytes(v: bytes | str | None) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    raise TypeError(f"expected bytes, str or None, got {type(v).__name__}")


def produce(bootstrap: str, topic: str, records: Iterable[dict],
            timeout_s: float = 30.0, config: dict | None = None) -> list[tuple[int, int]]:
    """Produce `records` to `topic` in order, idempotently, and flush.

    Raises KafkaException on the first delivery error and RuntimeError if
    records are still undelivered after `timeout_s`. Returns the (partition,
    offset) of each record in the order given.
    """
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True,
            "linger.ms": 5}
    conf.update(config or {})
    p = Producer(conf)
    records = list(records)
    results: list[tuple[int, int] | None] = [None] * len(records)
    errors: list[KafkaError] = []

    def on_delivery(idx):
        def cb(err, msg):
            if err is not None:
                errors.append(err)
            else:
                results[idx] = (msg.partition(), msg.offset())
        return cb

    for i, r in enumerate(records):
        kwargs = {"key": _to_bytes(r.get("key")),
                  "value": _to_bytes(r.get("value")),
                  "headers": [(h, _to_bytes(v)) for h, v in r.get("headers", [])],
                  "on_delivery": on_delivery(i)}
        if r.get("partition") is not None:
            kwargs["partition"] = r["partition"]
        while True:
            try:
                p.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: serve callbacks, retry
                p.poll(0.1)
        if errors:
            raise KafkaException(errors[0])
    remaining = p.flush(timeout_s)
    if errors:
        raise KafkaException(errors[0])
    if remaining:
        raise RuntimeError(f"{remaining} records undelivered after {timeout_s}s")
    return results  # type: ignore[return-value]


def end_offsets(bootstrap: str, topic: str,
                timeout_s: float = 10.0) -> dict[int, int]:
    """{partition: high watermark} of `topic` (the offset the next record gets)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("sg-probe"),
                  "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=timeout_s)
        t = md.topics[topic]
        if t.error is not None:
            raise KafkaException(t.error)
        return {p: c.get_watermark_offsets(TopicPartition(topic, p),
                                           timeout=timeout_s, cached=False)[1]
                for p in sorted(t.partitions)}
    finally:
        c.close()


def consume_all(bootstrap: str, topic: str, timeout_s: float = 30.0,
                expect_count: int | None = None,
                isolation_level: str = "read_committed") -> list[dict]:
    """Read `topic` from the beginning of every partition, without a group.

    Stops when every partition reached the high watermark measured at the
    start (or, with `expect_count`, once that many records were read and all
    partitions reached their watermarks, re-measured while short), or when
    `timeout_s` passes: then it returns what it has, so the caller's assertion
    shows the difference. Records come back ordered by (partition, offset).
    With read_committed (the default) aborted transactional records are not
    returned, as a downstream consumer would see it.
    """
    c = Consumer({"bootstrap.servers": bootstrap,
                  "group.id": unique_name("sg-reader"),  # required, never joined
                  "enable.auto.commit": False,
                  "enable.partition.eof": True,
                  "isolation.level": isolation_level})
    out: list[dict] = []
    try:
        md = c.list_topics(topic, timeout=timeout_s)
        t = md.topics[topic]
        if t.error is not None:
            raise KafkaException(t.error)
        parts = sorted(t.partitions)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])

        def watermarks():
            return {p: c.get_watermark_offsets(TopicPartition(topic, p),
                                               timeout=timeout_s, cached=False)[1]
                    for p in parts}

        high = watermarks()
        pos = {p: 0 for p in parts}  # next offset to read per partition
        deadline = time.monotonic() + timeout_s

        def done():
            if any(pos[p] < high[p] for p in parts):
                return False
            return expect_count is None or len(out) >= expect_count

        while not done() and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                if expect_count is not None and len(out) < expect_count and \
                        all(pos[p] >= high[p] for p in parts):
                    high = watermarks()
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    # With read_committed the EOF offset can pass control
                    # records / aborted data that are never delivered.
                    pos[msg.partition()] = max(pos[msg.partition()], msg.offset())
                    if expect_count is not None and len(out) < expect_count:
                        high = watermarks()
                    continue
                raise KafkaException(msg.error())
            hdrs = list(msg.headers() or [])
            out.append({
                "topic": msg.topic(),
                "partition": msg.partition(),
                "offset": msg.offset(),
                "key": msg.key(),
                "value": msg.value(),
                "headers": hdrs,
                "headers_dict": {k: v for k, v in hdrs},
                "timestamp": msg.timestamp()[1],
            })
            pos[msg.partition()] = msg.offset() + 1
    finally:
        c.close()
    out.sort(key=lambda r: (r["partition"], r["offset"]))
    return out
