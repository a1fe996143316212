"""SIGHUP reloads the configuration (semantics "Reloading the configuration").

logrotate and habit send SIGHUP; seqgate reloads its file as nginx, HAProxy
and Prometheus do, between two batches, and never stops for it. Each test
runs a real broker and the daemon, changes the file, sends SIGHUP and reads
the effect from the log, the read API (/v1/) and the topics.

test_sighup_reloads_live_keys: a parked event waits for a gap deadline of
  10 minutes; the file lowers gap_timeout_ms to 2 s and the dedup TTL to an
  hour. After SIGHUP: "signal_received" and "config_reloaded" (each key with
  from and to), the process runs on, the parked event's deadline is its
  parked_at + the new timeout (it is dead-lettered as a gap timeout within
  seconds), an event judged before the reload keeps the expiry it was
  written with and one judged after gets first_seen + the new TTL.
test_sighup_refuses_restart_keys: a change of a Kafka client property and
  data_dir beside a live key: "config_reload_refused" names both, nothing
  changes (the live key's deadline stays), seqgate runs on and applies
  records.
test_sighup_bad_file_runs_on: a file that is not valid JSON and then one
  with an invalid value: each "config_reload_failed" with the error line,
  seqgate runs on; the file fixed, the next SIGHUP applies it.
test_sigterm_names_the_signal: SIGTERM still stops (exit 0) and the log
  names the signal.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request

from kafkautil import consume_all, create_topics, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until


def _ce(agg: str, v: int, eid: str | None = None) -> dict:
    return {"key": agg, "value": json.dumps({"v": v}),
            "headers": [("ce_specversion", b"1.0"),
                        ("ce_id", (eid or f"{agg}-{v}").encode()),
                        ("ce_source", b"urn:test"), ("ce_type", b"t"),
                        ("ce_sequence", str(v).encode())]}


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _ms(rfc3339: str) -> int:
    """Milliseconds since the epoch of "2026-12-01T15:30:00.123Z"."""
    from datetime import datetime, timezone
    d = datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(d.replace(tzinfo=timezone.utc).timestamp() * 1000)


def _setup(bootstrap, seqgate_bin, tmp_path, name, **kw):
    t_in, t_out, t_dlq = (unique_name(f"{name}-in"), unique_name(f"{name}-out"),
                          unique_name(f"{name}-dlq"))
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    conf = make_config(bootstrap=bootstrap, group=unique_name(f"sg-{name}"),
                       instance=name, data_dir=str(tmp_path / "data"),
                       input_topic=t_in, output_topic=t_out, dlq_topic=t_dlq,
                       **kw)
    return t_in, t_out, t_dlq, conf, Seqgate(seqgate_bin, conf, tmp_path / "run")


def _rewrite(sg: Seqgate, conf: dict) -> None:
    sg.config_path.write_text(json.dumps(conf, indent=2))


def _hup_and_wait(sg: Seqgate, event: str, n_before: int) -> dict:
    sg.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: len(sg.events(event)) > n_before or not sg.running(),
               30, event, on_timeout=lambda: "\n" + sg.log_tail())
    assert sg.running(), f"seqgate stopped on SIGHUP\n{sg.log_tail()}"
    return sg.events(event)[-1]


def _event(sg: Seqgate, topic: str, eid: str) -> dict:
    return _get(sg.http_url(f"/v1/events?topic={topic}&source=urn:test"
                            f"&id={eid}"))


def test_sighup_reloads_live_keys(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq, conf, sg = _setup(
        bootstrap, seqgate_bin, tmp_path, "hup-live", gap_timeout_ms=600000,
        guarantee="exactly_once")
    try:
        sg.start()
        # a-1 applied, a-3 parked (waits for a-2, deadline in 10 min)
        produce(bootstrap, t_in, [_ce("a", 1), _ce("a", 3)])
        wait_until(lambda: _event(sg, t_in, "a-3").get("status") == "parked",
                   60, "a-3 parked", on_timeout=lambda: "\n" + sg.log_tail())
        old = _event(sg, t_in, "a-1")
        assert old["status"] == "applied", old
        parked = _event(sg, t_in, "a-3")
        assert _ms(parked["gap_deadline"]) - _ms(parked["parked_at"]) == 600000

        conf["topics"][t_in]["ordering"]["gap_timeout_ms"] = 2000
        conf["topics"][t_in]["dedup"]["ttl_ms"] = 3600000
        _rewrite(sg, conf)
        ev = _hup_and_wait(sg, "config_reloaded", 0)
        changed = {c["key"]: (c.get("from"), c.get("to"))
                   for c in ev["changed"]}
        assert changed == {
            f"topics.{t_in}.dedup.ttl_ms": (604800000, 3600000),
            f"topics.{t_in}.ordering.gap_timeout_ms": (600000, 2000),
        }, ev
        sig = sg.events("signal_received")
        assert sig and sig[0]["signal"] == "SIGHUP" and \
            sig[0]["action"] == "reload", sg.log_tail()

        # The parked event's deadline: its parked_at + the new timeout, so
        # it is dead-lettered (gap_policy dlq) within seconds.
        dlq = consume_all(bootstrap, t_dlq, timeout_s=60, expect_count=1)
        reasons = [r["headers_dict"]["__seqgate.errors.reason"] for r in dlq]
        assert reasons == [b"gap_timeout"], (reasons, sg.log_tail())

        # Stored dedup records keep the expiry they were written with; a
        # record judged after the reload gets the new TTL.
        again = _event(sg, t_in, "a-1")
        assert again["expires"] == old["expires"], (old, again)
        assert _ms(old["expires"]) - _ms(old["first_seen"]) == 604800000
        produce(bootstrap, t_in, [_ce("b", 1)])
        wait_until(lambda: _event(sg, t_in, "b-1").get("status") == "applied",
                   60, "b-1 applied")
        new = _event(sg, t_in, "b-1")
        assert _ms(new["expires"]) - _ms(new["first_seen"]) == 3600000, new
        assert sg.running()
        assert sg.stop() == 0, sg.log_tail()
    finally:
        sg.cleanup()


def test_sighup_refuses_restart_keys(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq, conf, sg = _setup(
        bootstrap, seqgate_bin, tmp_path, "hup-refuse", gap_timeout_ms=600000)
    try:
        sg.start()
        produce(bootstrap, t_in, [_ce("a", 1), _ce("a", 3)])
        wait_until(lambda: _event(sg, t_in, "a-3").get("status") == "parked",
                   60, "a-3 parked", on_timeout=lambda: "\n" + sg.log_tail())

        conf["kafka_producer"]["linger.ms"] = 50
        conf["data_dir"] = str(tmp_path / "elsewhere")
        conf["topics"][t_in]["ordering"]["gap_timeout_ms"] = 2000
        _rewrite(sg, conf)
        ev = _hup_and_wait(sg, "config_reload_refused", 0)
        refused = sorted(c["key"] for c in ev["refused"])
        assert refused == ["data_dir", "kafka_producer.linger.ms"], ev
        assert "data_dir" in ev["detail"] and "restart" in ev["action"], ev
        assert not sg.events("config_reloaded"), sg.log_tail()
        # nothing changed: the deadline is still parked_at + 10 minutes
        parked = _event(sg, t_in, "a-3")
        assert _ms(parked["gap_deadline"]) - _ms(parked["parked_at"]) == 600000
        # and it runs on
        produce(bootstrap, t_in, [_ce("a", 2)])
        wait_until(lambda: _event(sg, t_in, "a-3").get("status") == "applied",
                   60, "a-2 fills the gap, a-3 applied")
        assert sg.stop() == 0, sg.log_tail()
    finally:
        sg.cleanup()


def test_sighup_bad_file_runs_on(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq, conf, sg = _setup(
        bootstrap, seqgate_bin, tmp_path, "hup-bad")
    try:
        sg.start()
        sg.config_path.write_text('{"data_dir": ')
        ev = _hup_and_wait(sg, "config_reload_failed", 0)
        assert any("not valid JSON" in e for e in ev["errors"]), ev
        bad = json.loads(json.dumps(conf))
        bad["topics"][t_in]["ordering"]["gap_policy"] = "wait"
        _rewrite(sg, bad)
        ev = _hup_and_wait(sg, "config_reload_failed", 1)
        assert any(f"topics.{t_in}.ordering.gap_policy" in e
                   for e in ev["errors"]), ev
        produce(bootstrap, t_in, [_ce("a", 1)])
        out = consume_all(bootstrap, t_out, timeout_s=60, expect_count=1)
        assert len(out) == 1, ("a-1 applied after two failed reloads",
                               sg.log_tail())
        conf["topics"][t_in]["ordering"]["gap_policy"] = "skip"
        _rewrite(sg, conf)
        ev = _hup_and_wait(sg, "config_reloaded", 0)
        assert [c["key"] for c in ev["changed"]] == \
            [f"topics.{t_in}.ordering.gap_policy"], ev
        assert sg.stop() == 0, sg.log_tail()
    finally:
        sg.cleanup()


def test_sigterm_names_the_signal(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq, conf, sg = _setup(
        bootstrap, seqgate_bin, tmp_path, "term")
    try:
        sg.start()
        assert sg.stop() == 0, sg.log_tail()
        sig = sg.events("signal_received")
        assert [(s["signal"], s["action"]) for s in sig] == \
            [("SIGTERM", "stop")], sg.log_tail()
        assert sg.events("stopped"), sg.log_tail()
    finally:
        sg.cleanup()
