"""seqgate_consumer_lag on a real broker (docs/metrics.md): the records of a
partition a read_committed consumer can read and seqgate has not processed.

test_lag_transactional_input: an upstream exactly-once producer (a Kafka
transaction per chunk, as Kafka Streams, Flink or Debezium write) leaves a
commit marker at the end of each partition; no consumer receives it as a
record, so "high watermark minus the offset after the last record" stays 1
forever. Once seqgate processed every record, the lag is 0 on every
partition; while a transaction is open upstream its records cannot be read
yet and are not lag either (the end is the last stable offset); once it
commits they are read and the lag is 0 again.

test_lag_after_crash_restart: at_least_once keeps the offsets of its
processed batches in its store and commits them to the consumer group at
most every commit_interval_ms (group commit). After a kill -9 the group's
offset may be behind the store's; the restarted instance starts from the
store's offset and has nothing to read. Its lag is 0, not the distance
from the group's old offset.
"""

from __future__ import annotations

import json
import time
import urllib.request

from confluent_kafka import Producer

from kafkautil import create_topics, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until


def records(lo: int, hi: int, partition: int | None = None) -> list[dict]:
    """CloudEvents binary mode, one aggregate per record (version 1): every
    record is applied, wherever it lands."""
    return [{"key": f"agg-{i}", "value": json.dumps({"n": i}),
             "partition": partition,
             "headers": [("ce_specversion", "1.0"), ("ce_id", f"e-{i}"),
                         ("ce_source", "lag-test"), ("ce_type", "t"),
                         ("ce_sequence", "1")]}
            for i in range(lo, hi)]


def lags(sg: Seqgate) -> dict[int, float]:
    """{partition: seqgate_consumer_lag} of one /metrics scrape (partitions
    whose lag is not known have no sample)."""
    body = urllib.request.urlopen(sg.http_url("/metrics"),
                                  timeout=10).read().decode()
    out = {}
    for line in body.splitlines():
        if line.startswith("seqgate_consumer_lag{"):
            part = int(line.split('partition="')[1].split('"')[0])
            out[part] = float(line.rsplit(" ", 1)[1])
    return out


def judged(sg: Seqgate) -> int:
    return (sg.last_stats() or {}).get("records_total", 0)


def wait_lags(sg: Seqgate, want: dict[int, float], what: str,
              timeout_s: float = 30.0) -> None:
    seen = []
    wait_until(lambda: seen.append(lags(sg)) or seen[-1] == want, timeout_s,
               what, on_timeout=lambda: f"; last scrapes: {seen[-3:]}\n"
               + sg.log_tail())


def txn_produce(p: Producer, topic: str, recs: list[dict],
                commit: bool = True) -> None:
    p.begin_transaction()
    for r in recs:
        p.produce(topic, key=r["key"].encode(), value=r["value"].encode(),
                  partition=r["partition"], headers=r["headers"])
    p.flush(30)
    if commit:
        p.commit_transaction(30)


def test_lag_transactional_input(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("lag-in"), unique_name("lag-out"),
                          unique_name("lag-dlq"))
    create_topics(bootstrap, {t_in: 2, t_out: 2, t_dlq: 1})
    up = Producer({"bootstrap.servers": bootstrap,
                   "transactional.id": unique_name("upstream")})
    up.init_transactions(30)
    for chunk in range(4):  # 4 transactions, both partitions
        txn_produce(up, t_in, records(chunk * 50, chunk * 50 + 25, 0)
                    + records(chunk * 50 + 25, chunk * 50 + 50, 1))
    conf = make_config(bootstrap=bootstrap, group=unique_name("sg-lag"),
                       instance="seqgate-lag-1",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       stats_interval_ms=500)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        sg.start(timeout_s=60)
        wait_until(lambda: judged(sg) == 200, 60, "200 records judged",
                   on_timeout=lambda: "\n" + sg.log_tail())
        wait_lags(sg, {0: 0, 1: 0}, "lag 0 after a transactional input")
        wait_until(lambda: (sg.last_stats() or {}).get("consumer_lag") == 0,
                   10, "the stats line's consumer_lag 0")

        # an open transaction upstream: not readable yet, not lag
        txn_produce(up, t_in, records(200, 210, 0), commit=False)
        time.sleep(2)
        wait_lags(sg, {0: 0, 1: 0}, "lag 0 while a transaction is open")
        up.commit_transaction(30)
        wait_until(lambda: judged(sg) == 210, 60, "210 records judged",
                   on_timeout=lambda: "\n" + sg.log_tail())
        wait_lags(sg, {0: 0, 1: 0}, "lag 0 after it committed")
        assert sg.stop() == 0
    finally:
        sg.cleanup()


def test_lag_after_crash_restart(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("lagk-in"), unique_name("lagk-out"),
                          unique_name("lagk-dlq"))
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    conf = make_config(bootstrap=bootstrap, group=unique_name("sg-lagk"),
                       instance="seqgate-lagk-1",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       stats_interval_ms=500)
    # the group commit waits long: the group's offset stays behind the
    # store's until a clean stop
    conf["commit_interval_ms"] = 600000
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        produce(bootstrap, t_in, records(0, 100, 0))
        sg.start(timeout_s=60)
        wait_until(lambda: judged(sg) == 100, 60, "100 records judged")
        assert sg.stop() == 0  # commits 100 to the group
        produce(bootstrap, t_in, records(100, 200, 0))
        sg.start(timeout_s=60)
        wait_until(lambda: judged(sg) == 100, 60, "100 more judged")
        wait_lags(sg, {0: 0}, "lag 0 before the crash")
        sg.kill9()  # the store has 200, the group 100
        sg.start(timeout_s=60)
        assert sg.events("partitions_assigned")[0]["start_offsets"] == [200]
        wait_lags(sg, {0: 0}, "lag 0 after the restart")
        time.sleep(3)
        wait_lags(sg, {0: 0}, "lag still 0", timeout_s=5)
        assert sg.stop() == 0
    finally:
        sg.cleanup()
