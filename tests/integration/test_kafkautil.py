"""The test readers themselves (tests/integration/kafkautil.py).

A read_committed reader that measures "the end" once, at its start, stops
short when a transaction's markers are not written yet: Kafka answers a
read_committed ListOffsets with the last stable offset, which stays at the
first record of an undecided transaction. seqgate's exactly_once tests read
its output right after seqgate committed, when the coordinator may still be
writing the markers, so every reader must wait for what it expects: a count,
or the last stable offset reaching the high watermark.

test_consume_all_waits_for_open_transaction: records of a transaction that
  commits only after the reader started are all returned.
test_consume_all_aborted_transaction: beside a committed record, the
  records of a transaction that aborts while the reader waits are not
  returned, and the reader does not wait for its timeout.
test_wait_stable: `wait_stable` returns once no transaction is undecided.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from kafkautil import consume_all, create_topics, unique_name, wait_stable


def _txn_producer(bootstrap: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap,
                  "transactional.id": unique_name("sg-txn-test"),
                  "linger.ms": 5})
    p.init_transactions(30)
    return p


def _open_transaction(bootstrap: str, topic: str, n: int) -> Producer:
    """A transaction holding `n` records of `topic`, flushed, not decided."""
    p = _txn_producer(bootstrap)
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                  partition=i % 2)
    assert p.flush(30) == 0
    return p


def _read_in_thread(bootstrap: str, topic: str, **kw):
    box: dict = {}

    def run():
        t0 = time.monotonic()
        box["out"] = consume_all(bootstrap, topic, **kw)
        box["s"] = time.monotonic() - t0

    th = threading.Thread(target=run)
    th.start()
    return th, box


def test_consume_all_waits_for_open_transaction(bootstrap):
    topic = unique_name("kutil-open")
    create_topics(bootstrap, {topic: 2})
    p = _open_transaction(bootstrap, topic, 6)
    th, box = _read_in_thread(bootstrap, topic, timeout_s=30)
    time.sleep(2.0)  # the reader measured its end while undecided
    p.commit_transaction(30)
    th.join(60)
    assert not th.is_alive()
    got = sorted(r["value"] for r in box["out"])
    assert got == sorted(f"v{i}".encode() for i in range(6)), box["out"]


def test_consume_all_aborted_transaction(bootstrap):
    topic = unique_name("kutil-abort")
    create_topics(bootstrap, {topic: 2})
    q = _txn_producer(bootstrap)  # a committed record first
    q.begin_transaction()
    q.produce(topic, key=b"c", value=b"committed", partition=1)
    q.commit_transaction(30)
    p = _open_transaction(bootstrap, topic, 4)
    th, box = _read_in_thread(bootstrap, topic, timeout_s=30)
    time.sleep(2.0)
    p.abort_transaction(30)
    th.join(60)
    assert not th.is_alive()
    assert [r["value"] for r in box["out"]] == [b"committed"], box["out"]
    assert box["s"] < 25, f"the reader waited {box['s']:.1f}s for its timeout"


def test_wait_stable(bootstrap):
    topic = unique_name("kutil-stable")
    create_topics(bootstrap, {topic: 2})
    p = _open_transaction(bootstrap, topic, 2)
    assert wait_stable(bootstrap, topic, timeout_s=1.0) is False
    p.commit_transaction(30)
    assert wait_stable(bootstrap, topic, timeout_s=30) is True
