"""A store ahead of its changelog (semantics §6).

When the changelog topic is deleted and created again, the store's
checkpoint lies beyond the changelog's end. Rebuilding the store from that
changelog would forget every dedup record, and the next copy of an event
already applied would be applied again. seqgate refuses: it stops with a
fatal line naming the partition and exit 2 (an operator must act: systemd's
RestartPreventExitStatus=2 ends the restarts), and the store and the output
are left as they were.
"""

from __future__ import annotations

import json
import re

from confluent_kafka.admin import AdminClient

from kafkautil import create_topics, delete_topics, end_offsets, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until

SOURCE = "urn:example:behind"


def event(v: int, ident: str) -> dict:
    return {"key": "agg-1", "value": f'{{"v":{v}}}', "partition": 0,
            "headers": [("ce_specversion", b"1.0"), ("ce_id", ident.encode()),
                        ("ce_source", SOURCE.encode()), ("ce_type", b"t"),
                        ("ce_sequence", str(v).encode())]}


def test_recreated_changelog_is_refused(bootstrap, seqgate_bin, tmp_path):
    n = {k: unique_name(f"sgbehind-{k}") for k in ("in", "out", "dlq", "group")}
    create_topics(bootstrap, {n["in"]: 1, n["out"]: 1, n["dlq"]: 1})
    produce(bootstrap, n["in"], [event(1, "e1"), event(2, "e2")])
    conf = make_config(bootstrap=bootstrap, group=n["group"], instance="behind-1",
                       data_dir=str(tmp_path / "data"), input_topic=n["in"],
                       output_topic=n["out"], dlq_topic=n["dlq"])
    changelog = f"{n['group']}-{n['in']}-changelog"
    a = Seqgate(seqgate_bin, conf, tmp_path / "a")
    try:
        a.start()
        wait_until(lambda: sum(end_offsets(bootstrap, n["out"]).values()) >= 2,
                   30, "the output", on_timeout=lambda: a.log_tail())
        assert a.stop() == 0, a.log_tail()
    finally:
        a.cleanup()

    # the changelog is lost; seqgate creates it again, empty, at start
    delete_topics(bootstrap, [changelog])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(lambda: changelog not in admin.list_topics(timeout=10).topics,
               30, "the changelog's deletion")
    # a copy of e1 waits in the input: a dropped store would apply it again
    produce(bootstrap, n["in"], [event(1, "e1")])

    b = Seqgate(seqgate_bin, conf, tmp_path / "b")
    try:
        b.start(wait_assigned=False)
        rc = b.wait_exit(90)
        assert rc == 2, f"exit {rc}\n{b.log_tail()}"
        exiting = b.events("exiting")
        assert exiting and exiting[-1]["error"] == "SG_ERR_FOREIGN", \
            b.log_tail()
        assert exiting[-1]["error_text"] and \
            exiting[-1]["exit_class"] == "operator action needed", exiting
        fatal = [json.loads(l) for l in b.log_text().splitlines()
                 if "ahead of its changelog" in l]
        assert fatal, b.log_tail()
        text = json.dumps(fatal[-1])
        assert f"{n['in']} [0]" in text and changelog in text, text
        # the changelog holds only this start's claim records now
        m = re.search(r"up to offset (\d+), the changelog ends at offset "
                      r"(\d+)", text)
        assert m and int(m.group(1)) > int(m.group(2)), text
    finally:
        b.cleanup()
    # nothing was applied twice, and the store still knows both events
    assert sum(end_offsets(bootstrap, n["out"]).values()) == 2
