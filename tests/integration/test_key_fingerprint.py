"""A configuration change that would silently change keys or digests.

Changing `scope` or `digest` on an existing store turns every benign retry
into `idempotency_conflict`. seqgate fingerprints the key- and
digest-defining settings per partition (in the store and its changelog) and
refuses such a store: exit 2, a log line naming the settings, until the
operator starts it with --accept-key-change.
"""

from __future__ import annotations

import copy
import json

from kafkautil import create_topics, end_offsets, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until

SOURCE = "urn:example:fingerprint"


def test_scope_change_refused_until_accepted(bootstrap, seqgate_bin, tmp_path):
    n = {k: unique_name(f"sgfp-{k}") for k in ("in", "out", "dlq", "group")}
    create_topics(bootstrap, {n["in"]: 1, n["out"]: 1, n["dlq"]: 1})
    produce(bootstrap, n["in"], [
        {"key": "agg-1", "value": f'{{"v":{v}}}', "partition": 0,
         "headers": [("ce_specversion", b"1.0"), ("ce_id", f"e{v}".encode()),
                     ("ce_source", SOURCE.encode()), ("ce_type", b"t"),
                     ("ce_sequence", str(v).encode())]}
        for v in (1, 2)])
    conf = make_config(bootstrap=bootstrap, group=n["group"], instance="fp-1",
                       data_dir=str(tmp_path / "data"), input_topic=n["in"],
                       output_topic=n["out"], dlq_topic=n["dlq"])
    a = Seqgate(seqgate_bin, conf, tmp_path / "a")
    try:
        a.start()
        wait_until(lambda: sum(end_offsets(bootstrap, n["out"]).values()) >= 2,
                   30, "the output", on_timeout=lambda: a.log_tail())
        assert a.stop() == 0, a.log_tail()
    finally:
        a.cleanup()

    changed = copy.deepcopy(conf)
    changed["topics"][n["in"]]["envelope"]["scope"] = ["ce:source", "ce:type"]
    b = Seqgate(seqgate_bin, changed, tmp_path / "b")
    try:
        b.start(wait_assigned=False)
        rc = b.wait_exit(60)
        assert rc == 2, f"exit {rc}\n{b.log_tail()}"
        exiting = b.events("exiting")
        assert exiting and exiting[-1]["error"] == "SG_ERR_CONFIG", \
            b.log_tail()
        assert exiting[-1]["error_text"] and \
            exiting[-1]["exit_class"] == "operator action needed", exiting
        # both lines name the setting by its full key path
        key = f"topics.{n['in']}.envelope.scope"
        lines = [json.loads(l) for l in b.log_text().splitlines()
                 if "envelope.scope" in l]
        assert lines and lines[-1]["level"] == "error", b.log_tail()
        assert f"settings for {key}:" in json.dumps(lines[-1]), lines[-1]
        assert "--accept-key-change" in json.dumps(lines[-1])
        # the operator says it is intended
        b.start(extra_args=["--accept-key-change"])
        assert b.stop() == 0, b.log_tail()
        adopted = [l for l in b.log_lines()
                   if l.get("event") == "key_fingerprint_adopted"]
        assert adopted and adopted[0]["settings"] == key, b.log_tail()
        # adopted: the next start needs no flag
        b.start()
        assert b.stop() == 0, b.log_tail()
    finally:
        b.cleanup()
    assert sum(end_offsets(bootstrap, n["out"]).values()) == 2
