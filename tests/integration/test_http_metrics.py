"""The HTTP endpoint on a real broker: /readyz, /healthz and /metrics.

seqgate runs the scenario of test_scenario.py (known duplicates, a stale
version, gaps, an idempotency conflict, DLQ reasons) while the test scrapes
`/metrics` (parsed with prometheus_client's own parser) and checks that the
counters moved exactly as the scenario's annotations predict; `/readyz` is
503 before the consumer group assigned partitions and 200 after, `/healthz`
200 while it runs. The same real scrape checks the Grafana dashboard
(deploy/grafana/seqgate.json: every metric any panel's `expr` names is
exported) and docs/metrics.md (every exported metric is documented in
"Prometheus metrics").

test_readyz_full_disk: a file size limit (RLIMIT_FSIZE, set on the
daemon; no privilege needed) that the store's growth runs into is a full
disk to seqgate: every batch is aborted, `/readyz` is 503 with the error
meanwhile, `/healthz` stays 200, and once the limit is raised (prlimit on
the running process) the batches commit, `/readyz` is 200 again and every
record is out. A limit is a signal too (SIGXFSZ), which must not kill the
daemon.

Each run listens on a port of its own (http.address 127.0.0.1:0, the port
read from the http_listening log line): tests run beside other brokers.
"""

from __future__ import annotations

import json
import re
import resource
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkautil import create_topics, end_offsets, produce, unique_name
from seqgate_proc import ORDER_STATE_MACHINE, Seqgate, make_config, wait_until
from test_scenario import (DLQ_REASONS, DUP, EXPECTED_GAPS, GAP_TIMEOUT_MS, OUT,
                           SOURCE,
                           _public, phase1, phase2)

ROOT = Path(__file__).resolve().parents[2]


def get(url: str) -> tuple[int, str, str]:
    """(status, content type, body) of GET url; 4xx/5xx are answers too."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def scrape(sg: Seqgate) -> dict:
    """{family name: [(sample name, labels, value)]} of one /metrics GET."""
    status, ctype, body = get(sg.http_url("/metrics"))
    assert status == 200, body
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    fams = {}
    for fam in text_string_to_metric_families(body):
        # the parser names a counter's family without its _total
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        fams[name] = [(s.name, s.labels, s.value) for s in fam.samples]
    return fams


def value(fams: dict, sample: str, **labels) -> float:
    for fam in fams.values():
        for name, lbl, v in fam:
            if name == sample and all(lbl.get(k) == str(x)
                                      for k, x in labels.items()):
                return v
    raise AssertionError(f"no sample {sample}{labels}")


def exported_names(fams: dict) -> set[str]:
    return {name for fam in fams.values() for name, _l, _v in fam}


def _total(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic).values())


def dashboard_metric_names() -> set[str]:
    """Every seqgate_* name in every panel target's expr."""
    dash = json.loads((ROOT / "deploy/grafana/seqgate.json").read_text())
    names = set()

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                names.update(re.findall(r"\bseqgate_[a-zA-Z0-9_]+", node["expr"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(dash)
    return names


def dashboard_selectors() -> list[tuple[str, str]]:
    """(metric, label selector text) of every seqgate_ name with a selector
    in every panel target's expr."""
    dash = json.loads((ROOT / "deploy/grafana/seqgate.json").read_text())
    out = []
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            out += re.findall(r"\b(seqgate_[a-zA-Z0-9_]+)\{([^}]*)\}",
                              t.get("expr", ""))
    return out


def test_http_endpoint_scenario(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("http-in"), unique_name("http-out"),
                          unique_name("http-dlq"))
    create_topics(bootstrap, {t_in: 3, t_out: 3, t_dlq: 1})
    conf = make_config(bootstrap=bootstrap, group=unique_name("sg-http"),
                       instance="seqgate-http-1",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       gap_timeout_ms=GAP_TIMEOUT_MS, gap_policy="dlq",
                       state_machine=ORDER_STATE_MACHINE, stats_interval_ms=500)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        sg.start(wait_assigned=False)

        def tail():
            return "\nseqgate log tail:\n" + sg.log_tail()

        # Before the consumer group's first assignment: not ready, healthy.
        status, ctype, body = get(sg.http_url("/readyz"))
        assigned_before = bool(sg.events("partitions_assigned"))
        if not assigned_before:
            assert status == 503, body
            ready = json.loads(body)
            assert (ready["status"], ready["reason"]) == \
                ("not_ready", "no partitions assigned"), body
            # once subscribed, the hint says why it may last and how to
            # look (test_readyz_hint_after_kill9)
            assert "hint" not in ready or \
                "session.timeout.ms" in ready["hint"], body
        assert ctype == "application/json"
        status, _c, body = get(sg.http_url("/healthz"))
        assert status == 200 and json.loads(body) == {"status": "ok"}, body

        sg.wait_for_event("partitions_assigned", timeout_s=60)
        wait_until(lambda: get(sg.http_url("/readyz"))[0] == 200, 60,
                   "/readyz 200 after the assignment and restore",
                   on_timeout=tail)
        ready = json.loads(get(sg.http_url("/readyz"))[2])
        assert ready == {"status": "ready", "partitions": 3}
        # The first /readyz races the group's first assignment: on a busy
        # machine the join can win, and the 503 above is then not seen
        # here (test_http.c test_ready checks that answer without a race).
        if assigned_before:
            print("note: the first /readyz came after the assignment; "
                  "its 503 was not checked in this run")

        fams = scrape(sg)
        assert value(fams, "seqgate_records_total", topic=t_in) == 0
        assert value(fams, "seqgate_build_info") == 1
        assert value(fams, "seqgate_ready") == 1  # as /readyz
        for p in range(3):
            # restored (an empty changelog) and consuming
            assert value(fams, "seqgate_partition_restoring",
                         topic=t_in, partition=p) == 0

        p1 = phase1()
        produce(bootstrap, t_in, [_public(r) for r in p1])
        n_out = sum(1 for r in p1 if r["_expect"] == OUT)
        n_gap = sum(1 for r in p1 if r["_expect"] == ("dlq", "gap_timeout"))
        n_dlq = sum(1 for r in p1 if r["_expect"] not in (OUT, DUP))
        wait_until(lambda: _total(bootstrap, t_out) >= n_out and
                   _total(bootstrap, t_dlq) >= n_dlq, GAP_TIMEOUT_MS / 1000 + 30,
                   "phase-1 output and DLQ records (gap timeouts included)",
                   on_timeout=tail)
        p2 = phase2()
        produce(bootstrap, t_in, [_public(r) for r in p2])
        records = p1 + p2
        wait_until(lambda: value(scrape(sg), "seqgate_records_total",
                                 topic=t_in) == len(records), 30,
                   "/metrics records_total", on_timeout=tail)

        fams = scrape(sg)
        dups = sum(1 for r in records if r["_expect"] == DUP)
        reasons = Counter(r["_expect"][1] for r in records
                          if r["_expect"] not in (OUT, DUP))
        assert value(fams, "seqgate_applied_total") == n_out
        assert value(fams, "seqgate_dedup_hits_total") == dups
        assert value(fams, "seqgate_idempotency_parameter_conflicts_total") == 1
        assert value(fams, "seqgate_stale_version_rejections_total") == 1
        assert value(fams, "seqgate_event_sequence_gaps_total") == EXPECTED_GAPS
        assert value(fams, "seqgate_gap_timeouts_total") == 1
        assert value(fams, "seqgate_stuck_processing_over_5m",
                     topic=t_in) == 0
        assert value(fams, "seqgate_stuck_processing", topic=t_in) == 0
        for reason in DLQ_REASONS:
            assert value(fams, "seqgate_dlq_records_total", topic=t_in,
                         reason=reason) == reasons.get(reason, 0), reason
        assert n_gap == reasons["gap_timeout"]
        # order-e is quarantined (partition 0), nothing is parked any more
        assert value(fams, "seqgate_quarantined_aggregates",
                     topic=t_in, partition=0) == 1
        for p in range(3):
            assert value(fams, "seqgate_parked_events", topic=t_in,
                         partition=p) == 0
            assert value(fams, "seqgate_consumer_lag", topic=t_in,
                         partition=p) == 0
        # the histograms saw the batches that committed something, not the
        # idle polls the loop made while the test waited (counted in
        # batches_total); cumulative buckets
        batches = value(fams, "seqgate_batches_total")
        assert 1 <= value(fams, "seqgate_batch_duration_seconds_count") < batches
        assert value(fams, "seqgate_commit_latency_seconds_count") >= 1
        buckets = [v for n, l, v in fams["seqgate_commit_latency_seconds"]
                   if n.endswith("_bucket")]
        assert buckets == sorted(buckets) and buckets[-1] == \
            value(fams, "seqgate_commit_latency_seconds_count")
        assert value(fams, "seqgate_store_entries") > 0
        assert value(fams, "seqgate_store_used_bytes") > 0
        # the store's checkpoints: one family without a topic label, the
        # batches above committed by at least one
        assert [l for n, l, v in fams["seqgate_checkpoints_total"]] == [{}]
        assert value(fams, "seqgate_checkpoints_total") >= 1
        assert value(fams, "seqgate_checkpoint_seconds_count") == \
            value(fams, "seqgate_checkpoints_total")
        assert value(fams, "seqgate_process_start_time_seconds") > 1.7e9

        names = exported_names(fams)
        # The Grafana dashboard queries only what is exported.
        dash = dashboard_metric_names()
        assert dash, "the dashboard names no seqgate_ metric"
        missing = sorted(dash - names)
        assert not missing, f"dashboard exprs name unexported metrics: {missing}"
        # A series with the label topic is filtered by the dashboard's
        # topic variable, so several input topics can be told apart.
        topical = {n for fam in fams.values() for n, lbl, _v in fam
                   if "topic" in lbl}
        loose = sorted({m for m, sel in dashboard_selectors()
                        if m in topical and 'topic=~"$topic"' not in sel})
        assert not loose, f"dashboard exprs not filtered by topic: {loose}"
        variables = json.loads((ROOT / "deploy/grafana/seqgate.json")
                               .read_text())["templating"]["list"]
        assert "topic" in {v["name"] for v in variables}
        # docs/metrics.md documents every exported family.
        page = (ROOT / "docs" / "metrics.md").read_text()
        section = page[page.index("## Prometheus metrics"):]
        undocumented = sorted(f for f in fams if f"`{f}`" not in section)
        assert not undocumented, f"not in docs/metrics.md: {undocumented}"

        # The read API answers the result query for known events.
        from urllib.parse import urlencode
        applied = next(r for r in records if r["_expect"] == OUT)
        stale = next(r for r in records
                     if r["_expect"] == ("dlq", "stale_version"))
        for rec, want in ((applied, "applied"), (stale, "dead_lettered")):
            q = urlencode({"topic": t_in, "source": SOURCE, "id": rec["_id"]})
            status, ctype, body = get(sg.http_url(f"/v1/events?{q}"))
            assert status == 200 and ctype.startswith("application/json"), body
            answer = json.loads(body)
            assert answer["status"] == want, answer
        assert json.loads(body)["reason"] == "stale_version"
        q = urlencode({"topic": t_in, "source": SOURCE, "id": "never-sent"})
        assert json.loads(get(sg.http_url(f"/v1/events?{q}"))[2])["status"] \
            == "unknown"

        status, _c, body = get(sg.http_url("/healthz"))
        assert status == 200, body
        assert sg.stop() == 0
    finally:
        sg.cleanup()


def test_http_port_in_use_exits_2(bootstrap, seqgate_bin, tmp_path):
    """A port another process holds: a clear fatal line and exit 2."""
    import socket
    hold = socket.socket()
    hold.bind(("127.0.0.1", 0))
    hold.listen(1)
    port = hold.getsockname()[1]
    try:
        conf = make_config(bootstrap=bootstrap, group=unique_name("sg-http2"),
                           instance="seqgate-http-2",
                           data_dir=str(tmp_path / "data"),
                           input_topic="unused-in", output_topic="unused-out",
                           dlq_topic="unused-dlq")
        conf["http"] = {"address": f"127.0.0.1:{port}"}
        sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
        try:
            sg.start(wait_assigned=False)
            assert sg.wait_exit(30) == 2, sg.log_tail()
            failed = sg.events("http_listen_failed")
            assert failed and failed[0]["address"] == f"127.0.0.1:{port}", \
                sg.log_tail()
            assert "in use" in failed[0]["error"], failed
        finally:
            sg.cleanup()
    finally:
        hold.close()


def test_readyz_full_disk(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("full-in"), unique_name("full-out"),
                          unique_name("full-dlq"))
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    conf = make_config(bootstrap=bootstrap, group=unique_name("sg-full"),
                       instance="seqgate-full-1",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       stats_interval_ms=500)
    # a 1 MiB map grown 1 MiB at a time (semantics §6 "Disk space"): the
    # second growth crosses the limit
    conf["store"] = {"map_size_bytes": 1 << 20, "map_growth_bytes": 1 << 20}
    limit = (5 << 20) // 2  # 2.5 MiB

    def fsize_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE,
                           (limit, resource.RLIM_INFINITY))

    n = 30000
    produce(bootstrap, t_in, [
        {"key": f"agg-{i % 5000}", "partition": 0,
         "value": json.dumps({"i": i, "pad": "x" * 40}),
         "headers": [("ce_specversion", b"1.0"),
                     ("ce_id", f"full-{i}".encode()),
                     ("ce_source", b"urn:example:full"),
                     ("ce_type", b"thing.updated"),
                     ("ce_sequence", str(i // 5000 + 1).encode())]}
        for i in range(n)])
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        sg.start(timeout_s=60, preexec_fn=fsize_limit)

        def tail():
            return "\nseqgate log tail:\n" + sg.log_tail()

        def not_ready_for_disk():
            st, _c, body = get(sg.http_url("/readyz"))
            return st == 503 and "batches aborted" in body

        wait_until(not_ready_for_disk, 90,
                   "/readyz 503 naming the aborted batches", on_timeout=tail)
        st, _c, body = get(sg.http_url("/readyz"))
        ready = json.loads(body)
        assert ready["batches_aborted_in_a_row"] >= 2, ready
        assert "File too large" in ready["reason"] or \
            "No space left" in ready["reason"], ready
        assert get(sg.http_url("/healthz"))[0] == 200
        assert sg.running(), "the daemon died: " + tail()

        # space again: the batches commit, /readyz says ready
        resource.prlimit(sg.proc.pid, resource.RLIMIT_FSIZE,
                         (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        wait_until(lambda: get(sg.http_url("/readyz"))[0] == 200, 90,
                   "/readyz 200 after the limit was raised", on_timeout=tail)
        wait_until(lambda: sum(end_offsets(bootstrap, t_out).values()) >= n,
                   90, f"{n} records out", on_timeout=tail)
        assert sg.stop() == 0
        assert sg.events("batch_aborted"), tail()
    finally:
        sg.cleanup()


def _ce(agg: str, eid: str, seq: str) -> dict:
    return {"key": agg, "value": json.dumps({"id": eid}),
            "headers": [("ce_specversion", "1.0"), ("ce_id", eid),
                        ("ce_source", "per-topic"), ("ce_type", "t"),
                        ("ce_sequence", seq)]}


def test_metrics_per_topic(bootstrap, seqgate_bin, tmp_path):
    """Two input topics: every engine series carries the label topic, and
    each topic's numbers are its own; the DLQ's per-topic summary line
    (docs/operating.md "Logs") names the topic, its DLQ and the reasons."""
    t_a, t_b = unique_name("pt-a"), unique_name("pt-b")
    outs = {t: (unique_name("pt-out"), unique_name("pt-dlq"))
            for t in (t_a, t_b)}
    create_topics(bootstrap, {t_a: 1, t_b: 1,
                              **{o: 1 for pair in outs.values() for o in pair}})
    conf = make_config(bootstrap=bootstrap, group=unique_name("sg-pt"),
                       instance="seqgate-pt-1",
                       data_dir=str(tmp_path / "data"), input_topic=t_a,
                       output_topic=outs[t_a][0], dlq_topic=outs[t_a][1],
                       stats_interval_ms=500)
    conf["topics"][t_b] = json.loads(json.dumps(conf["topics"][t_a]))
    conf["topics"][t_b]["output_topic"] = outs[t_b][0]
    conf["topics"][t_b]["dlq_topic"] = outs[t_b][1]
    # topic A: v1..v5 applied, a stale v3 dead-lettered
    produce(bootstrap, t_a, [_ce("a", f"a{v}", str(v)) for v in range(1, 6)]
            + [_ce("a", "a3-again", "3")])
    # topic B: v1..v3 applied, two duplicates dropped
    produce(bootstrap, t_b, [_ce("b", f"b{v}", str(v)) for v in range(1, 4)]
            + [_ce("b", "b1", "1"), _ce("b", "b2", "2")])
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        sg.start(timeout_s=60)
        wait_until(lambda: (sg.last_stats() or {}).get("records_total") == 11,
                   60, "11 records judged",
                   on_timeout=lambda: "\n" + sg.log_tail())
        fams = scrape(sg)
        want = {t_a: {"records_total": 6, "applied_total": 5,
                      "dedup_hits_total": 0,
                      "stale_version_rejections_total": 1},
                t_b: {"records_total": 5, "applied_total": 3,
                      "dedup_hits_total": 2,
                      "stale_version_rejections_total": 0}}
        for topic, counts in want.items():
            for name, n in counts.items():
                assert value(fams, f"seqgate_{name}", topic=topic) == n, \
                    (topic, name)
        assert value(fams, "seqgate_dlq_records_total", topic=t_a,
                     reason="stale_version") == 1
        assert value(fams, "seqgate_dlq_records_total", topic=t_b,
                     reason="stale_version") == 0
        # no engine series without its topic
        engine = ("seqgate_records_total", "seqgate_applied_total",
                  "seqgate_dlq_records_total", "seqgate_stuck_processing",
                  "seqgate_stuck_processing_over_5m")
        for fam in engine:
            for _n, lbl, _v in fams[fam]:
                assert lbl.get("topic") in (t_a, t_b), (fam, lbl)
        # the threshold is a number, not a name
        assert value(fams, "seqgate_stuck_threshold_seconds", topic=t_a) == 300
        assert sg.stop() == 0
    finally:
        sg.cleanup()
    summaries = sg.events("dlq_summary")
    assert [s["topic"] for s in summaries] == [t_a], summaries
    assert summaries[0]["dlq_topic"] == outs[t_a][1]
    assert summaries[0]["records"] == 1
    assert summaries[0]["reasons"] == {"stale_version": 1}
    assert summaries[0]["level"] == "info"


@pytest.mark.serial  # kills seqgate and times the group's wait
def test_readyz_hint_after_kill9(bootstrap, seqgate_bin, tmp_path):
    """After a kill -9 and a quick restart the group waits for the dead
    member's session to expire before it assigns anything: /readyz's 503
    says so (the session.timeout.ms in force, how to see the group), and
    one assignment_waiting log line says the same a few seconds into the
    wait, once; then the partitions come and /readyz is 200."""
    t_in, t_out, t_dlq = (unique_name("hint-in"), unique_name("hint-out"),
                          unique_name("hint-dlq"))
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    group = unique_name("sg-hint")
    conf = make_config(bootstrap=bootstrap, group=group,
                       instance="seqgate-hint-1",
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       guarantee="at_least_once")
    # long enough that the restart's wait is seen, short enough for a test
    conf["kafka_consumer"]["session.timeout.ms"] = "15000"
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    try:
        sg.start(wait_assigned=True, timeout_s=60)
        sg.kill9()
        sg.start(wait_assigned=False)

        def tail():
            return "\nseqgate log tail:\n" + sg.log_tail()

        status, _c, body = get(sg.http_url("/readyz"))
        assert not sg.events("partitions_assigned"), \
            "assigned at once: no wait to see" + tail()
        assert status == 503, body
        ready = json.loads(body)
        assert ready["reason"] == "no partitions assigned", body
        assert ready["session_timeout_ms"] == 15000, body
        assert "session.timeout.ms 15000" in ready["hint"], body
        assert "previous member" in ready["hint"], body
        assert "kafka-consumer-groups.sh" in ready["hint"], body
        assert f"--describe --group {group}" in ready["hint"], body
        waiting = sg.wait_for_event("assignment_waiting", timeout_s=30)
        assert waiting["session_timeout_ms"] == 15000, waiting
        assert waiting["group_id"] == group, waiting
        assert waiting["waiting_ms"] >= 3000, waiting
        assert "session.timeout.ms 15000" in waiting["hint"], waiting
        sg.wait_for_event("partitions_assigned", timeout_s=60)
        wait_until(lambda: get(sg.http_url("/readyz"))[0] == 200, 60,
                   "/readyz 200 after the assignment", on_timeout=tail)
        assert len(sg.events("assignment_waiting")) == 1, tail()
        assert sg.stop() == 0, tail()
    finally:
        sg.cleanup()
