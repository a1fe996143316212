"""seqgatectl's and seqgate's command-line conventions.

test_version: `-V` / `--version` on both binaries print `seqgate <meson
project version>` and then the versions of the libraries (librdkafka, LMDB,
cJSON, OpenSSL, libmicrohttpd), exit 0.

test_usage_error_one_line: a usage error is one line naming the problem and
`Try 'seqgatectl COMMAND --help' for more information.`, exit 2 — not the
help text. `replay` without `--reason` or `--all` is such an error.

test_replay_dry_run_unreachable / test_release_timeout_bounds_delivery: a
broker that does not answer (a closed loopback port) fails the command
(exit 1) with the broker's error within --timeout-ms; a dry run does not
print a "would replay 0" summary, and `release --timeout-ms` bounds the
wait for the control record's delivery.

test_no_store_names_data_dir: a store-reading command (lookup, inspect,
partitions) whose config's data_dir holds no store says so and names
--data-dir, the option that points it at the store elsewhere (exit 1;
lookup 2, its 1 meaning "unknown event").

test_log_level: --log-level filters seqgatectl's warnings and librdkafka's
own log lines (here the `debug` property's lines, set with -X).

test_common_options_on_broker: -X NAME=VALUE applies to every client of the
command, on top of the config's kafka block (a later -X wins; a config whose
bootstrap.servers is wrong works with -X bootstrap.servers); the properties
the daemon refuses are refused (exit 2, naming them); --data-dir replaces the
config's data_dir for the commands that read a store.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

import pytest

from kafkautil import consume_all, produce
from test_seqgatectl import ctl, event, json_lines, setup_gate
from seqgate_proc import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]


def meson_version() -> str:
    text = (REPO_ROOT / "meson.build").read_text()
    return re.search(r"version\s*:\s*'([^']+)'", text).group(1)


def offline_config(tmp_path: Path, port: int) -> str:
    # a group of its own: tests run side by side, and a second seqgate
    # with one (group.id, instance_id) on a host is refused at start
    conf = {"kafka": {"bootstrap.servers": f"127.0.0.1:{port}",
                      "group.id": f"ctl-cli-{uuid.uuid4().hex[:12]}"},
            "data_dir": str(tmp_path / "nodata"),
            "guarantee": "at_least_once",
            # a port of its own: the default 127.0.0.1:9464 is taken by
            # whichever daemon of a test running beside this one came first
            "http": {"address": "127.0.0.1:0"},
            "topics": {"in": {"output_topic": "out", "dlq_topic": "dlq"}}}
    path = tmp_path / "offline.json"
    path.write_text(json.dumps(conf))
    return str(path)


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(seqgate_bin, seqgatectl_bin, flag):
    for binary in (seqgate_bin, seqgatectl_bin):
        r = ctl(binary, flag, timeout_s=10)
        assert r.returncode == 0, r
        lines = r.stdout.splitlines()
        assert lines[0] == f"seqgate {meson_version()}", r.stdout
        for lib in ("librdkafka", "LMDB", "cJSON", "OpenSSL", "libmicrohttpd"):
            assert any(re.fullmatch(rf"{lib} \d+\.\d+\S*", l)
                       for l in lines[1:]), (lib, r.stdout)


@pytest.mark.parametrize("args,problem", [
    (["replay", "--bogus"], "unrecognized option '--bogus'"),
    (["replay", "--config", "c.json", "--dlq", "d"],
     "--reason R or --all is required"),
    (["inspect", "--partition"], "option '--partition' requires an argument"),
    (["partitions", "-X", "a=b"], "invalid option '-X'"),
    (["release", "stray"], "unexpected argument 'stray'"),
])
def test_usage_error_one_line(seqgatectl_bin, args, problem):
    r = ctl(seqgatectl_bin, *args, timeout_s=10)
    assert r.returncode == 2, r
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith(f"seqgatectl {args[0]}: ") and problem in lines[0], \
        r.stderr
    assert lines[1] == f"Try 'seqgatectl {args[0]} --help' for more information."
    assert r.stdout == ""


def test_command_help(seqgatectl_bin):
    r = ctl(seqgatectl_bin, "replay", "--help", timeout_s=10)
    assert r.returncode == 0 and r.stdout.startswith("usage: seqgatectl replay")
    for opt in ("--all", "--reason", "-X NAME=VALUE", "--log-level", "--json"):
        assert opt in r.stdout, opt
    assert "--data-dir" not in r.stdout  # replay reads no store
    r = ctl(seqgatectl_bin, "partitions", "--help", timeout_s=10)
    assert "--data-dir" in r.stdout and "-X NAME" not in r.stdout


def test_replay_dry_run_unreachable(seqgatectl_bin, tmp_path, closed_port):
    cfg = offline_config(tmp_path, closed_port)
    t0 = time.monotonic()
    r = ctl(seqgatectl_bin, "replay", "--config", cfg, "--dlq", "dlq", "--all",
            "--dry-run", "--timeout-ms", "2000", timeout_s=60)
    took = time.monotonic() - t0
    assert r.returncode == 1, r
    assert "would replay" not in r.stdout and r.stdout == "", r.stdout
    assert "dlq" in r.stderr and "Broker transport failure" in r.stderr, r.stderr
    assert took < 15, f"{took:.1f} s: --timeout-ms 2000 not honoured"


@pytest.mark.parametrize("args,rc", [
    (["lookup", "--topic", "in", "--source", "s", "--id", "e-1"], 2),
    (["inspect"], 1), (["partitions"], 1)])
def test_no_store_names_data_dir(seqgatectl_bin, tmp_path, closed_port, args,
                                 rc):
    cfg = offline_config(tmp_path, closed_port)
    r = ctl(seqgatectl_bin, args[0], "--config", cfg, *args[1:], timeout_s=30)
    assert r.returncode == rc, r
    assert "no seqgate store in" in r.stderr, r.stderr
    assert "--data-dir" in r.stderr, r.stderr


def test_release_timeout_bounds_delivery(seqgatectl_bin, tmp_path, closed_port):
    cfg = offline_config(tmp_path, closed_port)
    t0 = time.monotonic()
    r = ctl(seqgatectl_bin, "release", "--config", cfg, "--topic", "in",
            "--partition", "0", "--aggregate", "a-1", "--timeout-ms", "2000",
            timeout_s=60)
    took = time.monotonic() - t0
    assert r.returncode == 1, r
    assert "not delivered" in r.stderr, r.stderr
    assert took < 15, f"{took:.1f} s: --timeout-ms 2000 not honoured"


def test_log_level(seqgatectl_bin, tmp_path, closed_port):
    cfg = offline_config(tmp_path, closed_port)
    base = ["replay", "--config", cfg, "--dlq", "not-a-dlq", "--all",
            "--dry-run", "--timeout-ms", "1500", "-X", "debug=broker"]
    r = ctl(seqgatectl_bin, *base, timeout_s=60)
    assert "warning: not-a-dlq is not a dlq_topic" in r.stderr, r.stderr
    debug = [l for l in r.stderr.splitlines() if "kafka librdkafka" in l
             and '"fac":"FAIL"' not in l]
    assert not debug, debug[:3]  # librdkafka's debug lines: not at warning
    r = ctl(seqgatectl_bin, *base, "--log-level", "debug", timeout_s=60)
    assert sum("kafka librdkafka" in l for l in r.stderr.splitlines()) > 3, \
        r.stderr
    r = ctl(seqgatectl_bin, *base, "--log-level", "error", timeout_s=60)
    assert "warning" not in r.stderr, r.stderr
    assert r.returncode == 1 and "Broker transport failure" in r.stderr
    r = ctl(seqgatectl_bin, *base, "--log-level", "loud", timeout_s=60)
    assert r.returncode == 2 and "unknown level 'loud'" in r.stderr


def test_common_options_on_broker(bootstrap, seqgate_bin, seqgatectl_bin,
                                  tmp_path, closed_port):
    sg, n = setup_gate(bootstrap, tmp_path, seqgate_bin)
    try:
        # one record to the DLQ (no version: malformed), one applied
        bad = event("order-1", 1)
        bad["headers"] = [h for h in bad["headers"] if h[0] != "ce_sequence"]
        produce(bootstrap, n["in"], [bad, event("order-2", 1)])
        assert len(consume_all(bootstrap, n["dlq"], timeout_s=30,
                               expect_count=1)) == 1
        wait_until(lambda: (sg.last_stats() or {}).get("applied_total", 0) >= 1,
                   30, "the applied record", on_timeout=sg.log_tail)
        conf = json.loads(Path(sg.config_path).read_text())
        real_dir = conf["data_dir"]
        conf["kafka"]["bootstrap.servers"] = f"127.0.0.1:{closed_port}"
        conf["data_dir"] = str(tmp_path / "not-the-store")
        wrong = tmp_path / "wrong.json"
        wrong.write_text(json.dumps(conf))

        # -X on top of the config, the later one winning
        replay = ["replay", "--config", str(wrong), "--dlq", n["dlq"], "--all",
                  "--dry-run", "--json", "--timeout-ms", "20000"]
        r = ctl(seqgatectl_bin, *replay, "-X",
                f"bootstrap.servers=127.0.0.1:{closed_port}", "-X",
                f"bootstrap.servers={bootstrap}")
        assert r.returncode == 0, r.stderr
        summary = json_lines(r.stdout)[-1]
        assert (summary["read"], summary["selected"]) == (1, 1), summary
        r = ctl(seqgatectl_bin, *replay[:-2], "--timeout-ms", "2000", "-X",
                f"bootstrap.servers={bootstrap}", "-X",
                f"bootstrap.servers=127.0.0.1:{closed_port}")
        assert r.returncode == 1, r
        # what the daemon refuses is refused, naming it
        for prop, why in (("enable.idempotence=false", "semantics §6"),
                          ("acks=1", "semantics §6"),
                          ("enable.auto.commit=true", "semantics §6"),
                          ("no.such.thing=1", "librdkafka"),
                          ("novalue", "NAME=VALUE")):
            r = ctl(seqgatectl_bin, *replay, "-X", prop, timeout_s=30)
            assert r.returncode == 2, (prop, r)
            assert prop.split("=")[0] in r.stderr and why in r.stderr, \
                (prop, r.stderr)

        # --data-dir instead of the config's data_dir
        r = ctl(seqgatectl_bin, "partitions", "--config", str(wrong), "--json")
        assert r.returncode == 1, r
        r = ctl(seqgatectl_bin, "partitions", "--config", str(wrong),
                "--data-dir", real_dir, "--json")
        assert r.returncode == 0, r.stderr
        parts = [l for l in json_lines(r.stdout) if l.get("topic") == n["in"]]
        assert parts, r.stdout
        r = ctl(seqgatectl_bin, "inspect", "--config", str(wrong), "--data-dir",
                real_dir, "--topic", n["in"], "--partition", "0", "--aggregate",
                "order-2", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["meta"]["group"] == n["group"], r.stdout
        assert sg.stop() == 0
    finally:
        sg.cleanup()


@pytest.mark.parametrize("level,want_debug,want_info", [
    (None, False, True), ("debug", True, True), ("error", False, False)])
def test_daemon_log_level(seqgate_bin, tmp_path, closed_port, level,
                          want_debug, want_info):
    """seqgate's --log-level filters its own lines and librdkafka's (here
    the lines of the `debug` property, at debug level)."""
    conf = json.loads(Path(offline_config(tmp_path, closed_port)).read_text())
    conf["kafka"]["debug"] = "broker"
    conf["broker_retry_timeout_ms"] = 300000
    from seqgate_proc import Seqgate
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        sg.start(wait_assigned=False,
                 extra_args=["--log-level", level] if level else [])
        time.sleep(2.5)
        assert sg.stop(timeout_s=60) == 0, sg.log_tail()
    finally:
        sg.cleanup()
    lines = sg.log_lines()
    levels = {l.get("level") for l in lines}
    kafka_debug = [l for l in lines
                   if l.get("event") == "librdkafka" and l["level"] == "debug"]
    assert bool(kafka_debug) == want_debug, sg.log_tail()
    assert ("info" in levels) == want_info, sg.log_tail()
    if level == "error":
        assert levels <= {"error"}, levels
