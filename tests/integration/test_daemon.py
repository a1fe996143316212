"""The daemon's process contract: exit statuses, signals, --check-config.

`seqgate --help` promises: exit 0 after a clean stop, 1 for a runtime error,
2 for what a restart cannot fix — a usage or configuration error (also one
the Kafka clients refuse at start-up), a data_dir another process holds,
state that is not this deployment's — so that systemd's
RestartPreventExitStatus=2 does not restart what cannot work; the `exiting`
line names the error by its code and in words, and the exit status. Signals:
SIGTERM and SIGINT finish the batch in flight, commit it, leave the
consumer group and exit 0 (SIGHUP reloads the configuration:
test_reload.py).

test_sigterm_stops_cleanly: SIGTERM stops a running instance (exit 0, the
  "stopped" line, the consumer group left, offsets committed).
test_refused_rdkafka_property_exits_2: ssl.key.location naming a file that
  does not exist: --check-config and the start both refuse it (exit 2,
  the property named; test_preflight.py has several at once).
test_check_config_reports_every_error: three independent mistakes in one
  file are reported in one --check-config run, one line each.
test_check_config_env_secrets: values given through ${VAR}
  (docs/configuration.md "Secrets and environment variables") are substituted,
  an unset variable is an error naming key and variable, three independent
  errors give three lines and a count line (--check-config and the daemon's
  start alike), and no value from the environment appears in any output.
test_stop_during_startup_retries: a cluster that does not answer keeps the
  start-up retrying (broker_retry_timeout_ms); SIGTERM ends it at once with
  exit 0.
test_usage_error_is_short: a mistake on the command line (an option
  without its argument, an unknown option, no --config) exits 2 with the
  mistake, the four-line synopsis and a pointer to --help on stderr — not
  the whole help, which --help alone prints (stdout, exit 0).
test_help_exit_statuses_agree_with_signals: --help's exit-status table
  (generated from the one table, as docs/operating.md's) names as a clean
  stop only the signals its Signals paragraph says stop seqgate: SIGHUP
  reloads.
test_locked_data_dir_exits_2: a second seqgate on a data_dir the first holds
  exits 2 at once (SG_ERR_LOCKED, in words), the first runs on.
test_same_group_instance_id_exits_2: two instances given one
  group.instance.id (static membership): the newer takes the older one's
  place (KIP-345), and the older exits 2 naming the id and what to change
  (a restart would only fence the newer one in turn); the newer runs on.
test_first_start_creates_changelogs_quietly: a first start creates its
  changelog topics and checks their configs without a retry: no
  warning-level kafka_retry for a topic it had just created (both
  guarantees), so that alerts on warnings do not fire at every first start.
(The other exit-2 refusals, each with its own test: a store of another
consumer group, test_restart.py; a store ahead of its changelog,
test_changelog_behind.py; a changelog whose id is not the store's,
test_changelog_id.py; changed key settings, test_key_fingerprint.py.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from kafkautil import (committed_offsets, create_topics, end_offsets, produce,
                       unique_name)
from seqgate_proc import Seqgate, make_config, wait_until


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    return committed_offsets(bootstrap, group, topic, 1)


def _ce(agg: str, v: int) -> dict:
    return {"key": agg, "value": json.dumps({"v": v}),
            "headers": [("ce_specversion", b"1.0"),
                        ("ce_id", f"{agg}-{v}".encode()),
                        ("ce_source", b"urn:test"), ("ce_type", b"t"),
                        ("ce_sequence", str(v).encode())]}


def test_sigterm_stops_cleanly(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("hup-in"), unique_name("hup-out"),
                          unique_name("hup-dlq"))
    group = unique_name("sg-hup")
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    produce(bootstrap, t_in, [_ce("a", v) for v in (1, 2, 3)])
    conf = make_config(bootstrap=bootstrap, group=group, instance="hup",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       guarantee="exactly_once")
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        sg.start()
        end = end_offsets(bootstrap, t_in)
        wait_until(lambda: _committed(bootstrap, group, t_in) == end, 60,
                   "committed offsets", on_timeout=lambda: "\n" + sg.log_tail())
        sg.proc.send_signal(signal.SIGTERM)
        rc = sg.wait_exit(60)
    finally:
        sg.cleanup()
    assert rc == 0, f"exit status {rc} after SIGTERM\n{sg.log_tail()}"
    stopped = sg.events("stopped")
    assert stopped and stopped[0]["result"] == "SG_OK", sg.log_tail()
    assert sg.events("loop_stopped"), sg.log_tail()
    assert sg.events("partitions_revoked"), "the consumer group was not left"


def _write(tmp_path, conf: dict) -> str:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(conf))
    return str(p)


def test_refused_rdkafka_property_exits_2(seqgate_bin, tmp_path):
    missing = tmp_path / "no-such-dir" / "client.key"
    conf = make_config(bootstrap="127.0.0.1:9", group=unique_name("g"),
                       instance="i",
                       data_dir=str(tmp_path / "data"), input_topic="in",
                       output_topic="out", dlq_topic="dlq",
                       guarantee="at_least_once")
    conf["kafka"].update({"security.protocol": "ssl",
                          "ssl.key.location": str(missing)})
    path = _write(tmp_path, conf)
    # --check-config sees it (the files the clients read are checked) ...
    chk = subprocess.run([seqgate_bin, "--check-config", path],
                         capture_output=True, text=True, timeout=30)
    assert chk.returncode == 2, chk.stderr
    assert "kafka.ssl.key.location" in chk.stderr, chk.stderr
    # ... and so does the start: a configuration error.
    run = subprocess.run([seqgate_bin, "--config", path],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    exiting = [json.loads(l) for l in run.stderr.splitlines()
               if '"event":"exiting"' in l]
    assert exiting and exiting[0]["error"] == "SG_ERR_CONFIG", run.stderr
    assert "ssl.key.location" in exiting[0]["detail"], exiting[0]
    assert exiting[0]["exit_status"] == 2 and exiting[0]["error_text"], \
        exiting[0]


def test_usage_error_is_short(seqgate_bin):
    full = subprocess.run([seqgate_bin, "--help"], capture_output=True,
                          text=True, timeout=30)
    assert full.returncode == 0 and len(full.stdout.splitlines()) > 20, full
    for argv, names in ((["--config=x", "--check-config"], "--check-config"),
                        (["--bogus"], "--bogus"),
                        ([], "--config")):
        p = subprocess.run([seqgate_bin, *argv], capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 2, (argv, p.returncode, p.stderr)
        lines = p.stderr.splitlines()
        assert names in lines[0], (argv, p.stderr)
        assert len(lines) <= 7, (argv, len(lines), p.stderr)
        assert "seqgate --help" in lines[-1], (argv, p.stderr)
        assert p.stdout == "", (argv, p.stdout)


def test_help_exit_statuses_agree_with_signals(seqgate_bin):
    text = subprocess.run([seqgate_bin, "--help"], capture_output=True,
                          text=True, timeout=30).stdout
    assert "SIGHUP reloads" in text, text
    table = text[text.index("Exit status:"):]
    clean = table[:table.index("\n  1 ")]
    assert "SIGTERM" in clean and "SIGHUP" not in clean, clean


def test_check_config_reports_every_error(seqgate_bin, tmp_path):
    conf = make_config(bootstrap="127.0.0.1:9", group=unique_name("g"),
                       instance="i",
                       data_dir=str(tmp_path / "data"), input_topic="orders",
                       output_topic="orders.out", dlq_topic="orders.dlq")
    conf["stats_interval_ms"] = "often"                       # 1
    conf["topics"]["orders"]["ordering"]["gap_policy"] = "wait"  # 2
    conf["kafka_producer"]["linger.ms"] = "soon"              # 3
    path = _write(tmp_path, conf)
    r = subprocess.run([seqgate_bin, "--check-config", path],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    for want in ("kafka_producer.linger.ms: ",
                 "stats_interval_ms: must be an integer >= 0",
                 'topics.orders.ordering.gap_policy: "wait" is not allowed; '
                 "allowed: dlq, skip, hold"):
        assert any(want in l for l in lines), (want, r.stderr)
    errs = [l for l in lines if l.startswith("seqgate: config error: ")]
    assert len(errs) == 3, r.stderr


def test_check_config_env_secrets(seqgate_bin, tmp_path):
    secret = "Zq9-env-secret-value-Zq9"
    conf = make_config(bootstrap="${SGT_BOOTSTRAP}", group=unique_name("g"),
                       instance="i",
                       data_dir="${SGT_DATA:-" + str(tmp_path / "data") + "}",
                       input_topic="orders", output_topic="orders.out",
                       dlq_topic="orders.dlq", guarantee="at_least_once")
    conf["kafka"].update({"security.protocol": "sasl_plaintext",
                          "sasl.mechanisms": "PLAIN",
                          "sasl.username": "u",
                          "sasl.password": "${SGT_SASL_PASSWORD}",
                          "client.id": "c$$1"})
    path = _write(tmp_path, conf)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGT_")}
    env.update(SGT_BOOTSTRAP="127.0.0.1:9", SGT_SASL_PASSWORD=secret)
    ok = subprocess.run([seqgate_bin, "--check-config", path], env=env,
                        capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0, ok.stderr
    assert secret not in ok.stdout + ok.stderr

    # three independent errors, two of them values from the environment
    conf["kafka_producer"]["acks"] = "${SGT_ACKS}"                 # 1
    conf["kafka"]["compression.codec"] = "${SGT_CODEC}"            # 2
    conf["topics"]["orders"]["output_topic"] = "${SNAP_TOKEN}"     # 3
    path = _write(tmp_path, conf)
    env.update(SGT_ACKS="1-" + secret, SGT_CODEC="c-" + secret)
    env.pop("SNAP_TOKEN", None)
    for args in (["--check-config", path], ["--config", path]):
        r = subprocess.run([seqgate_bin, *args], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        out = r.stdout + r.stderr
        assert secret not in out, out
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        errs = [l for l in lines if l.startswith("seqgate: config error: ")]
        assert len(errs) == 3, r.stderr
        for want in ('kafka_producer.acks: "***" is not allowed',
                     "kafka.compression.codec: rejected by librdkafka "
                     "(detail withheld",
                     "topics.orders.output_topic: environment variable "
                     "SNAP_TOKEN is not set"):
            assert any(want in l for l in errs), (want, r.stderr)
        assert lines[-1] == f"seqgate: 3 configuration errors in {path}", \
            r.stderr

    # a valid file: the daemon's own log lines and a property the client
    # refuses at start-up (exit 2) say nothing the environment gave
    conf = make_config(bootstrap="127.0.0.1:9", group=unique_name("g"),
                       instance="i",
                       data_dir="${SGT_DATA}", input_topic="orders",
                       output_topic="orders.out", dlq_topic="orders.dlq",
                       guarantee="at_least_once")
    conf["kafka"].update({"security.protocol": "ssl",
                          "ssl.key.location": "${SGT_KEY}"})
    path = _write(tmp_path, conf)
    env.update(SGT_DATA=str(tmp_path / ("data-" + secret)),
               SGT_KEY=str(tmp_path / "no-such-dir" / (secret + ".key")))
    r = subprocess.run([seqgate_bin, "--config", path], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert secret not in r.stdout + r.stderr, r.stderr
    starting = [json.loads(l) for l in r.stderr.splitlines()
                if '"event":"starting"' in l]
    assert starting and starting[0]["data_dir"] == "***", r.stderr


def test_stop_during_startup_retries(seqgate_bin, tmp_path):
    # Port 9 on loopback: nothing listens; every metadata request fails
    # with a retriable transport error.
    conf = make_config(bootstrap="127.0.0.1:9", group=unique_name("g"),
                       instance="i",
                       data_dir=str(tmp_path / "data"), input_topic="in",
                       output_topic="out", dlq_topic="dlq",
                       guarantee="at_least_once")
    conf["broker_retry_timeout_ms"] = 300000
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        sg.start(wait_assigned=False)
        time.sleep(3.0)
        assert sg.running(), sg.log_tail()
        t0 = time.monotonic()
        rc = sg.stop(timeout_s=60)
        took = time.monotonic() - t0
    finally:
        sg.cleanup()
    assert rc == 0, f"exit status {rc}\n{sg.log_tail()}"
    assert took < 20, f"SIGTERM took {took:.1f}s during the start-up retries"
    assert sg.events("stopped"), sg.log_tail()


def test_locked_data_dir_exits_2(seqgate_bin, tmp_path):
    # Both on a cluster that does not answer: the store is opened (and its
    # data_dir locked) before Kafka is reached; the first keeps retrying.
    group = unique_name("g")

    def conf(instance):
        c = make_config(bootstrap="127.0.0.1:9", group=group,
                        instance=instance,
                        data_dir=str(tmp_path / "data"), input_topic="in",
                        output_topic="out", dlq_topic="dlq",
                        guarantee="at_least_once")
        c["broker_retry_timeout_ms"] = 300000
        return c
    first = Seqgate(seqgate_bin, conf("one"), tmp_path / "one")
    second = Seqgate(seqgate_bin, conf("two"), tmp_path / "two")
    try:
        first.start(wait_assigned=False)
        wait_until(lambda: first.events("running") or first.events("kafka_retry"),
                   30, "the first instance past its store's opening",
                   on_timeout=lambda: "\n" + first.log_tail())
        second.start(wait_assigned=False)
        rc = second.wait_exit(30)
        assert first.running(), first.log_tail()
        assert first.stop(timeout_s=60) == 0, first.log_tail()
    finally:
        first.cleanup()
        second.cleanup()
    assert rc == 2, f"exit status {rc}\n{second.log_tail()}"
    exiting = second.events("exiting")
    assert exiting, second.log_tail()
    line = exiting[-1]
    assert line["error"] == "SG_ERR_LOCKED", line
    assert "in use by another seqgate process" in line["error_text"], line
    assert str(tmp_path / "data") in line["detail"], line
    assert line["exit_status"] == 2, line
    assert line["exit_class"] == "operator action needed", line


def test_same_group_instance_id_exits_2(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("sgi-in"), unique_name("sgi-out"),
                          unique_name("sgi-dlq"))
    group = unique_name("sg-sgi")
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})

    def conf(instance):
        c = make_config(bootstrap=bootstrap, group=group, instance=instance,
                        data_dir=str(tmp_path / instance), input_topic=t_in,
                        output_topic=t_out, dlq_topic=t_dlq)
        c["kafka_consumer"]["group.instance.id"] = "shared-static-id"
        return c
    older = Seqgate(seqgate_bin, conf("older"), tmp_path / "run-older")
    newer = Seqgate(seqgate_bin, conf("newer"), tmp_path / "run-newer")
    try:
        older.start()
        newer.start(wait_assigned=False)
        rc = older.wait_exit(60)
        newer.wait_for_event("partitions_assigned", 60)
        assert newer.running(), newer.log_tail()
        assert newer.stop() == 0, newer.log_tail()
    finally:
        older.cleanup()
        newer.cleanup()
    assert rc == 2, f"exit status {rc}\n{older.log_tail()}"
    exiting = older.events("exiting")
    assert len(exiting) == 1, older.log_tail()
    line = exiting[0]
    assert line["error"] == "SG_ERR_CONFIG", line
    assert line["exit_class"] == "operator action needed", line
    assert (f'another consumer joined group "{group}" with this one\'s '
            f'group.instance.id "shared-static-id"') in line["detail"], line
    assert "give every instance its own group.instance.id" in line["detail"]


def test_first_start_creates_changelogs_quietly(bootstrap, seqgate_bin,
                                                tmp_path):
    # the race is the broker's (it serves a topic once it applied the
    # metadata): several first starts, so that it shows
    for i, mode in enumerate(("exactly_once", "at_least_once") * 3):
        t_in, t_out, t_dlq = (unique_name("fs-in"), unique_name("fs-out"),
                              unique_name("fs-dlq"))
        group = unique_name("sg-fs")
        create_topics(bootstrap, {t_in: 3, t_out: 3, t_dlq: 1})
        conf = make_config(bootstrap=bootstrap, group=group, instance="fs",
                           data_dir=str(tmp_path / f"data-{i}"),
                           input_topic=t_in, output_topic=t_out,
                           dlq_topic=t_dlq, guarantee=mode)
        s = Seqgate(seqgate_bin, conf, tmp_path / f"run-{i}")
        try:
            s.start()
            assert s.events("changelog_topic_created"), s.log_tail()
            retries = [e for e in s.events("kafka_retry")
                       if e.get("during") == "changelog topics"]
            assert not retries, (mode, retries)
            assert s.stop() == 0, s.log_tail()
        finally:
            s.cleanup()
