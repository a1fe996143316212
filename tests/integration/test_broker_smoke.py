"""Smoke test of the integration harness against the real broker.

Creates a 3-partition topic, produces 100 records with keys, values and
headers (including a repeated header name and a null value), reads them back
without a consumer group and checks that every record came back exactly once,
unchanged, in per-partition order. If this fails, the broker or kafkautil is
broken, not seqgate.
"""

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name


def _records(n):
    recs = []
    for i in range(n):
        recs.append({
            "key": f"order-{i % 7}",
            "value": None if i == 42 else f'{{"seq":{i}}}'.encode(),
            "headers": [("ce_id", f"id-{i}".encode()),
                        ("ce_type", b"com.example.order.created"),
                        ("dup", b"first"), ("dup", f"second-{i}".encode())],
            "partition": i % 3,
        })
    return recs


def test_produce_consume_roundtrip(bootstrap):
    topic = unique_name("smoke")
    create_topics(bootstrap, {topic: 3})
    sent = _records(100)
    placed = produce(bootstrap, topic, sent)

    # Every record landed in the partition asked for, offsets dense from 0.
    assert [p for p, _ in placed] == [r["partition"] for r in sent]
    for part in range(3):
        offs = [o for p, o in placed if p == part]
        assert offs == list(range(len(offs)))
    assert end_offsets(bootstrap, topic) == {
        part: sum(1 for r in sent if r["partition"] == part) for part in range(3)}

    got = consume_all(bootstrap, topic, timeout_s=30, expect_count=100)
    assert len(got) == 100

    by_pos = {(p, o): rec for rec, (p, o) in zip(sent, placed)}
    for rec in got:
        want = by_pos.pop((rec["partition"], rec["offset"]))
        assert rec["topic"] == topic
        assert rec["key"] == want["key"].encode()
        assert rec["value"] == want["value"]
        assert rec["headers"] == want["headers"]
        assert rec["headers_dict"]["dup"] == want["headers"][-1][1]
        assert rec["timestamp"] > 0
    assert by_pos == {}, "records produced but never consumed"


def test_topic_config_applied(bootstrap):
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = unique_name("smoke-compact")
    create_topics(bootstrap, {topic: 1}, config={"cleanup.policy": "compact"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    cfg = admin.describe_configs([res])[res].result(timeout=30)
    assert cfg["cleanup.policy"].value == "compact"
