"""Kafka helpers for seqgate's integration tests.

Thin wrappers over confluent-kafka (librdkafka, the same client library
seqgate itself uses) so that tests read as "create these topics, produce these
records, read everything back". Reading back never joins a consumer group:
`consume_all` assigns every partition explicitly from OFFSET_BEGINNING, so it
cannot disturb the consumer group under test nor commit offsets.

Readers wait for what they expect, never for a snapshot of "the end" taken
when they start: a read_committed ListOffsets answers the last stable offset
(LSO), which stays at the first record of a transaction whose markers the
coordinator has not written yet, even after the producer's
commit_transaction returned. So `consume_all` reads until every partition's
LSO equals its high watermark (no transaction undecided) and it has read up
to it, re-measuring while short, and (with `expect_count`) until it has that
many records; `wait_stable` waits for the first condition alone. Both give up
after their timeout (the caller's assertion then shows the difference).

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
           "end_offsets", "stable_offsets", "wait_stable", "unique_name",
           "set_client_config", "CommittedOffsets", "committed_offsets"]

# Client properties per bootstrap address (a secured broker's login):
# every client these helpers make for that address gets them.
_CLIENT_CONFIG: dict[str, dict] = {}


def set_client_config(bootstrap: str, config: dict | None) -> None:
    """Every client made for `bootstrap` from now on gets `config` (e.g.
    security.protocol, sasl.*, ssl.ca.location); None forgets it."""
    if config is None:
        _CLIENT_CONFIG.pop(bootstrap, None)
    else:
        _CLIENT_CONFIG[bootstrap] = dict(config)


def _base(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, **_CLIENT_CONFIG.get(bootstrap, {})}


def unique_name(prefix: str) -> str:
    """A topic/group name unique to this call: prefix + '-' + 12 hex digits."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient(_base(bootstrap))


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
    admin = _admin(bootstrap)  # alive until the results are in
    futures = admin.delete_topics(list(names), operation_timeout=timeout_s)
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
    conf = {**_base(bootstrap), "enable.idempotence": True,
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
        if r.get("timestamp") is not None:  # ms since the epoch (CreateTime)
            kwargs["timestamp"] = r["timestamp"]
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


# Errors a group's coordinator answers while it moves or loads (a broker
# restart, a new __consumer_offsets partition): asked again, they pass.
_COORDINATOR_BUSY = (KafkaError.NOT_COORDINATOR,
                     KafkaError.COORDINATOR_NOT_AVAILABLE,
                     KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                     KafkaError._WAIT_COORD)


class CommittedOffsets:
    """A consumer group's committed offsets, read through a Consumer of that
    group.id that never joins it (no subscribe, no assign, no commit: the
    group and its members are untouched).

    Not AdminClient.list_consumer_group_offsets: librdkafka (the client
    library of confluent-kafka, through at least 2.15) crashes the whole
    process with SIGSEGV (rd_kafka_cgrp_op on a client without a consumer
    group) when that request is answered NOT_COORDINATOR or
    COORDINATOR_NOT_AVAILABLE, which a broker answers while the group's
    coordinator moves or loads, e.g. right after a restart. A consumer's
    committed() takes the same answer as an error, asked again here until
    `timeout_s`.

    require_stable: wait for offsets of transactions still undecided
    (isolation.level read_committed, KIP-447), as a consumer of the group
    would start from; else the offsets as written.
    """

    def __init__(self, bootstrap: str, group: str, require_stable: bool = False):
        self.group = group
        self.busy_answers = 0  # coordinator-busy errors asked again
        self.consumer = Consumer({
            **_base(bootstrap), "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": ("read_committed" if require_stable
                                else "read_uncommitted")})

    def get(self, topic: str, parts: int,
            timeout_s: float = 10.0) -> dict[int, int]:
        """{partition: committed offset} of `topic`'s partitions 0..parts-1
        (-1001, OFFSET_INVALID, where nothing is committed). Raises
        KafkaException on any other error, or a busy coordinator that stays
        busy past `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        tps = [TopicPartition(topic, p) for p in range(parts)]
        while True:
            left = max(deadline - time.monotonic(), 0.1)
            try:
                res = self.consumer.committed(tps, timeout=left)
                return {tp.partition: tp.offset for tp in res}
            except KafkaException as e:
                err = e.args[0] if e.args else None
                busy = isinstance(err, KafkaError) and \
                    (err.code() in _COORDINATOR_BUSY or err.retriable())
                if not busy or time.monotonic() >= deadline:
                    raise
                self.busy_answers += 1
                time.sleep(0.1)

    def close(self) -> None:
        self.consumer.close()


def committed_offsets(bootstrap: str, group: str, topic: str, parts: int,
                      timeout_s: float = 10.0,
                      require_stable: bool = False) -> dict[int, int]:
    """CommittedOffsets(...).get(topic, parts) once."""
    c = CommittedOffsets(bootstrap, group, require_stable)
    try:
        return c.get(topic, parts, timeout_s)
    finally:
        c.close()


def _probe(bootstrap: str, isolation_level: str) -> Consumer:
    return Consumer({**_base(bootstrap),
                     "group.id": unique_name("sg-probe"),  # never joined
                     "enable.auto.commit": False,
                     "isolation.level": isolation_level})


def _partitions(c: Consumer, topic: str, timeout_s: float) -> list[int]:
    md = c.list_topics(topic, timeout=timeout_s)
    t = md.topics[topic]
    if t.error is not None:
        raise KafkaException(t.error)
    return sorted(t.partitions)


def _ends(c: Consumer, topic: str, parts: list[int],
          timeout_s: float) -> dict[int, int]:
    # A ListOffsets request: librdkafka sends the handle's isolation.level,
    # so read_uncommitted answers the high watermark, read_committed the LSO.
    return {p: c.get_watermark_offsets(TopicPartition(topic, p),
                                       timeout=timeout_s, cached=False)[1]
            for p in parts}


def end_offsets(bootstrap: str, topic: str,
                timeout_s: float = 10.0) -> dict[int, int]:
    """{partition: high watermark} of `topic` (the offset the next record
    gets; transaction markers and aborted records count)."""
    c = _probe(bootstrap, "read_uncommitted")
    try:
        return _ends(c, topic, _partitions(c, topic, timeout_s), timeout_s)
    finally:
        c.close()


def stable_offsets(bootstrap: str, topic: str,
                   timeout_s: float = 10.0) -> dict[int, tuple[int, int]]:
    """{partition: (last stable offset, high watermark)} of `topic`. The two
    differ while a transaction on the partition is undecided (or its markers
    are not written yet)."""
    hw_c = _probe(bootstrap, "read_uncommitted")
    lso_c = _probe(bootstrap, "read_committed")
    try:
        parts = _partitions(hw_c, topic, timeout_s)
        lso = _ends(lso_c, topic, parts, timeout_s)
        hw = _ends(hw_c, topic, parts, timeout_s)
        return {p: (lso[p], hw[p]) for p in parts}
    finally:
        hw_c.close()
        lso_c.close()


def wait_stable(bootstrap: str, topic: str, timeout_s: float = 30.0,
                interval_s: float = 0.1) -> bool:
    """Waits until no transaction on `topic` is undecided (every partition's
    last stable offset equals its high watermark). Returns False if that
    did not happen within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        if all(lso == hw for lso, hw in
               stable_offsets(bootstrap, topic).values()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)


def consume_all(bootstrap: str, topic: str, timeout_s: float = 30.0,
                expect_count: int | None = None,
                isolation_level: str = "read_committed") -> list[dict]:
    """Read `topic` from the beginning of every partition, without a group.

    Reads until it has read every partition up to its high watermark and,
    with read_committed (the default), the last stable offset equals that
    high watermark (no transaction is undecided: a committed transaction
    whose markers are not written yet is waited for, an aborted one is not
    returned); both are measured again whenever the reader caught up with
    the previous measurement. With `expect_count` it also waits until that
    many records were read. After `timeout_s` it returns what it has, so
    the caller's assertion shows the difference. Records come back ordered
    by (partition, offset), as a downstream consumer with the same
    isolation level would see them.
    """
    c = Consumer({**_base(bootstrap),
                  "group.id": unique_name("sg-reader"),  # required, never joined
                  "enable.auto.commit": False,
                  "enable.partition.eof": True,
                  "isolation.level": isolation_level})
    hw_c = _probe(bootstrap, "read_uncommitted")
    committed = isolation_level == "read_committed"
    out: list[dict] = []
    try:
        parts = _partitions(c, topic, timeout_s)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        pos = {p: 0 for p in parts}  # next offset to read per partition
        deadline = time.monotonic() + timeout_s

        def measure():
            """(high watermarks, stable?) now: the LSO before the high
            watermarks, so that "stable" cannot be claimed for a
            transaction that started in between."""
            lso = _ends(c, topic, parts, timeout_s) if committed else None
            hw = _ends(hw_c, topic, parts, timeout_s)
            return hw, lso is None or lso == hw

        high, stable = measure()

        def caught_up():
            return all(pos[p] >= high[p] for p in parts)

        def done():
            return stable and caught_up() and \
                (expect_count is None or len(out) >= expect_count)

        while not done() and time.monotonic() < deadline:
            if caught_up():
                # Caught up with a measurement that was not final (still
                # undecided, or short of the count): measure again.
                high, stable = measure()
                if done():
                    break
            msg = c.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    # With read_committed the EOF offset (the LSO) can pass
                    # control records / aborted data that are never
                    # delivered.
                    pos[msg.partition()] = max(pos[msg.partition()], msg.offset())
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
        hw_c.close()
    out.sort(key=lambda r: (r["partition"], r["offset"]))
    return out
