"""Snapshot refetch (semantics §4 step 1) against a real broker.

When an aggregate's gap deadline passes, seqgate asks the aggregate's
authority for its current version S and state, and uses the answer: S >= L
→ a snapshot record on the output topic (headers __seqgate.snapshot = S,
__seqgate.snapshot.state), L = S, parked events <= S superseded (dropped),
drain from S + 1; S < L → late, ignored; a reply nobody waits for → ignored;
failed attempts → retries with backoff, then the topic's gap policy.

The authority is deploy/authority/authority.py, the reference responder
shipped with seqgate: over HTTP on a free loopback port (Python standard
library), or over Kafka request/reply topics. Where a test needs to control
exactly when and what a Kafka reply says, the test itself plays the
authority and produces the reply.

Every order here follows the seed's order state machine
(CREATED→PAID→SHIPPED→COMPLETED, SHIPPED→RETURNING→CANCELLED).
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name
from seqgate_proc import ORDER_STATE_MACHINE, Seqgate, make_config, wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
AUTHORITY = REPO_ROOT / "deploy" / "authority" / "authority.py"
REQUEST_SCHEMA = REPO_ROOT / "schemas" / "snapshot-request.schema.json"
SOURCE = "urn:example:shop"
H_SNAP = "__seqgate.snapshot"
H_SNAP_STATE = "__seqgate.snapshot.state"
H_SOURCE = "__seqgate.source"
AUTH_ENV = "SEQGATE_SNAPSHOT_AUTH"


# --- helpers ---------------------------------------------------------------

def ce(order: str, seq: int, typ: str, ce_id: str | None = None) -> dict:
    """One binary-mode CloudEvent on partition 0 (key = order id)."""
    ce_id = ce_id or f"{order}-{seq}"
    return {
        "key": order.encode(),
        "value": json.dumps({"order": order, "type": typ, "seq": seq}).encode(),
        "headers": [("ce_specversion", b"1.0"), ("ce_id", ce_id.encode()),
                    ("ce_source", SOURCE.encode()), ("ce_type", typ.encode()),
                    ("ce_sequence", str(seq).encode()),
                    ("content-type", b"application/json")],
        "partition": 0,
    }


# The events of one order, by version.
TYPES = {1: "order.created", 2: "order.paid", 3: "order.shipped",
         4: "order.returning", 5: "order.cancelled"}


def ev(order: str, seq: int) -> dict:
    return ce(order, seq, TYPES[seq])


def hdr(rec: dict, name: str) -> str | None:
    v = rec["headers_dict"].get(name)
    return None if v is None else v.decode()


def label(rec: dict) -> tuple[str, str]:
    """(key, "vN") for an ordinary output record, (key, "SN") for a snapshot
    record."""
    s = hdr(rec, H_SNAP)
    if s is not None:
        return (rec["key"].decode(), f"S{s}")
    return (rec["key"].decode(), f"v{hdr(rec, 'ce_sequence')}")


def per_key(out: list[dict]) -> dict[str, list[str]]:
    res: dict[str, list[str]] = {}
    for r in out:
        k, lab = label(r)
        res.setdefault(k, []).append(lab)
    return res


def total(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic).values())


def sha16(agg: str) -> str:
    return hashlib.sha256(agg.encode()).hexdigest()[:16]


def stat(sg: Seqgate, name: str) -> int:
    s = sg.last_stats()
    return -1 if s is None else s.get(name, -1)


class Authority:
    """deploy/authority/authority.py as a subprocess (one start per object)."""

    def __init__(self, workdir: Path, states: dict, args: list[str]):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.states_path = self.workdir / "states.json"
        self.log_path = self.workdir / "authority.log"
        self.set_states(states)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(AUTHORITY), "--states", str(self.states_path),
             *args], stdout=subprocess.PIPE, stderr=self._log,
            stdin=subprocess.DEVNULL)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            self.stop(check=False)
            raise AssertionError("authority.py did not start:\n"
                                 + self.log_path.read_text())
        self.listening = json.loads(line)
        self.http = self.listening.get("http")

    def set_states(self, states: dict) -> None:
        """Replaces the states file atomically (authority.py re-reads it)."""
        tmp = self.states_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(states))
        os.replace(tmp, self.states_path)

    def log_lines(self) -> list[dict]:
        return [json.loads(l) for l in self.log_path.read_text().splitlines()
                if l.strip()]

    def requests(self) -> list[dict]:
        """Requests as they arrived (HTTP) or were read (Kafka)."""
        return [l for l in self.log_lines()
                if l["event"] in ("http_request", "kafka_request")]

    def responses(self) -> list[dict]:
        """HTTP answers: aggregate, status."""
        return [l for l in self.log_lines() if l["event"] == "http_response"]

    def stop(self, check: bool = True) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if check:
            assert self.proc.returncode == 0, \
                f"authority.py exit {self.proc.returncode}:\n" + \
                self.log_path.read_text()[-3000:]


class Env:
    """Topics, a config and a Seqgate for one test."""

    def __init__(self, bootstrap, seqgate_bin, tmp_path, *, source: str,
                 snapshot: dict, gap_timeout_ms: int = 1000,
                 gap_policy: str = "dlq"):
        self.bootstrap = bootstrap
        self.t_in = unique_name("snap-in")
        self.t_out = unique_name("snap-out")
        self.t_dlq = unique_name("snap-dlq")
        topics = {self.t_in: 1, self.t_out: 1, self.t_dlq: 1}
        snap = {"source": source, **snapshot}
        if source == "kafka":
            self.t_req = unique_name("snap-req")
            self.t_rep = unique_name("snap-rep")
            topics.update({self.t_req: 1, self.t_rep: 1})
            snap.update(request_topic=self.t_req, reply_topic=self.t_rep)
        create_topics(bootstrap, topics)
        self.group = unique_name("sg-snap")
        self.instance = "seqgate-snap-1"
        conf = make_config(bootstrap=bootstrap, group=self.group,
                           instance=self.instance,
                           data_dir=str(tmp_path / "data"),
                           input_topic=self.t_in, output_topic=self.t_out,
                           dlq_topic=self.t_dlq, gap_timeout_ms=gap_timeout_ms,
                           gap_policy=gap_policy,
                           state_machine=ORDER_STATE_MACHINE,
                           snapshot=snap, batch_max_ms=50,
                           stats_interval_ms=200)
        self.sg = Seqgate(seqgate_bin, conf, tmp_path / "run")

    def tail(self) -> str:
        return "\nseqgate log tail:\n" + self.sg.log_tail(60)

    def produce(self, records: list[dict]) -> None:
        produce(self.bootstrap, self.t_in, records)

    def out(self) -> list[dict]:
        return consume_all(self.bootstrap, self.t_out, timeout_s=20)

    def dlq(self) -> list[dict]:
        return consume_all(self.bootstrap, self.t_dlq, timeout_s=20)

    def requests(self) -> list[tuple[dict, dict]]:
        """(record, parsed value) of every request record (Kafka source)."""
        return [(r, json.loads(r["value"]))
                for r in consume_all(self.bootstrap, self.t_req, timeout_s=20)]

    def reply(self, request_id: str, aggregate: str, version, state=None,
              data=None, raw: bytes | None = None) -> None:
        """Produces a reply to the reply topic, as an authority would."""
        if raw is None:
            body = {"request_id": request_id, "aggregate": aggregate,
                    "version": version}
            if state is not None:
                body["state"] = state
            if data is not None:
                body["data"] = data
            raw = json.dumps(body).encode()
        produce(self.bootstrap, self.t_rep, [{"key": aggregate, "value": raw}])

    def wait_out(self, n: int, timeout_s: float = 30, what: str = "") -> None:
        wait_until(lambda: total(self.bootstrap, self.t_out) >= n, timeout_s,
                   what or f"{n} output records", interval_s=0.05,
                   on_timeout=self.tail)

    def wait_stat(self, name: str, value: int, timeout_s: float = 30) -> None:
        wait_until(lambda: stat(self.sg, name) >= value, timeout_s,
                   f"stats {name} >= {value}", interval_s=0.05,
                   on_timeout=self.tail)

    def stop(self) -> dict:
        rc = self.sg.stop()
        assert rc == 0, f"seqgate exit status {rc}" + self.tail()
        stats = self.sg.last_stats()
        assert stats is not None, "no stats line" + self.tail()
        return stats


def check_snapshot_record(rec: dict, aggregate: str, S: int, state: str,
                          data, source: str) -> None:
    assert rec["key"] == aggregate.encode()
    assert hdr(rec, H_SNAP) == str(S)
    assert hdr(rec, H_SNAP_STATE) == state
    assert hdr(rec, H_SOURCE) == source
    assert json.loads(rec["value"]) == data


# --- (a) and (b): a gap resolved by a snapshot -------------------------------

SHIPPED_DATA = {"order": "o-1", "carrier": "dhl", "amount": 42}
GAP_MS = 1500  # long enough for the test to send v4 before v5's new deadline


def _gap_resolved(env: Env, agg: str, start_authority) -> tuple[list, Authority]:
    """order: v1 applied, v3 and v5 parked (v2 never comes). The authority
    says S = 3 (SHIPPED): v3 is superseded, v5 waits for v4, which then
    arrives and v4, v5 drain. Returns (output records, authority)."""
    env.sg.start()
    auth = start_authority()
    t0 = time.monotonic()
    env.produce([ev(agg, 1), ev(agg, 3), ev(agg, 5)])
    env.wait_out(2, what="v1 and the snapshot record")
    waited = time.monotonic() - t0
    assert waited >= GAP_MS / 1000, \
        f"snapshot after {waited:.2f}s, before gap_timeout_ms"
    env.produce([ev(agg, 4)])
    env.wait_out(4, what="v4 and v5 drained after the snapshot")
    time.sleep(0.5)  # anything extra would show up now
    return env.out(), auth


def _check_gap_resolved(env: Env, out: list[dict], agg: str,
                        source: str) -> dict:
    assert per_key(out) == {agg: ["v1", "S3", "v4", "v5"]}, \
        f"output {[label(r) for r in out]}" + env.tail()
    check_snapshot_record(out[1], agg, 3, "SHIPPED", SHIPPED_DATA, source)
    assert env.dlq() == [], "nothing goes to the DLQ"
    stats = env.stop()
    assert stats["snapshot_requests_total"] == 1, stats
    assert stats["snapshot_applied_total"] == 1, stats
    assert stats["snapshot_superseded_total"] == 1, stats  # v3 <= S
    assert stats["snapshot_failures_total"] == 0, stats
    assert stats["snapshot_late_total"] == 0, stats
    assert stats["snapshot_ignored_total"] == 0, stats
    assert stats["snapshot_in_flight"] == 0, stats
    assert stats["snapshot_resolve_ms_last"] > 0, stats
    assert stats["applied_total"] == 3, stats  # v1, v4, v5
    assert stats["parked_events"] == 0, stats
    assert stats["dlq_total"] == 0, stats
    return stats


def test_kafka_source_gap_resolved_by_snapshot(bootstrap, seqgate_bin, tmp_path):
    env = Env(bootstrap, seqgate_bin, tmp_path, source="kafka",
              snapshot={"timeout_ms": 10000}, gap_timeout_ms=GAP_MS)
    agg = "order-k1"
    states = {agg: {"version": 3, "state": "SHIPPED", "data": SHIPPED_DATA}}
    auth = None

    def start_authority():
        nonlocal auth
        auth = Authority(tmp_path / "auth", states,
                         ["--kafka", bootstrap, "--request-topic", env.t_req,
                          "--group", unique_name("authority")])
        return auth
    try:
        out, _ = _gap_resolved(env, agg, start_authority)
        reqs = env.requests()
        assert len(reqs) == 1, reqs
        rec, req = reqs[0]
        # the published contract (also fixes the hash prefix's length)
        jsonschema.validate(req, json.loads(REQUEST_SCHEMA.read_text()))
        assert rec["key"] == agg.encode()
        assert hdr(rec, "content-type") == "application/json"
        rid = req["request_id"]
        topic, part, ahash, seq = rid.rsplit("/", 3)
        assert (topic, part) == (env.t_in, "0")
        assert hashlib.sha256(agg.encode()).hexdigest().startswith(ahash), rid
        assert seq.isdigit(), rid
        assert {k: req[k] for k in ("aggregate", "have_version", "want_version",
                                    "reply_to", "topic", "partition",
                                    "instance", "attempt")} == {
            "aggregate": agg, "have_version": 1, "want_version": 2,
            "reply_to": env.t_rep, "topic": env.t_in, "partition": 0,
            "instance": env.instance, "attempt": 1}
        replies = consume_all(bootstrap, env.t_rep, timeout_s=20)
        assert len(replies) == 1
        assert json.loads(replies[0]["value"])["request_id"] == rid
        _check_gap_resolved(env, out, agg, f"{env.t_rep}/0/0")
    finally:
        env.sg.cleanup()
        if auth:
            auth.stop(check=False)


def test_http_source_gap_resolved_by_snapshot(bootstrap, seqgate_bin, tmp_path,
                                              monkeypatch):
    # The Authorization value comes from the environment, never the config.
    secret = "Bearer s3cr3t-" + unique_name("tok")
    monkeypatch.setenv(AUTH_ENV, secret)
    agg = "order/h 1"  # '/' and ' ' are percent-encoded into the URL
    states = {agg: {"version": 3, "state": "SHIPPED", "data": SHIPPED_DATA}}
    auth = Authority(tmp_path / "auth", states,
                     ["--http", "127.0.0.1:0", "--prefix", "orders",
                      "--require-auth", secret])
    env = Env(bootstrap, seqgate_bin, tmp_path, source="http",
              snapshot={"url": f"http://{auth.http}/orders/{{aggregate}}",
                        "auth_header_env": AUTH_ENV, "timeout_ms": 5000},
              gap_timeout_ms=GAP_MS)
    try:
        out, _ = _gap_resolved(env, agg, lambda: auth)
        resp = auth.responses()
        assert [(r["aggregate"], r["status"]) for r in resp] == [(agg, 200)], resp
        rid = hdr(out[1], H_SOURCE)
        assert rid is not None and rid.startswith(f"{env.t_in}/0/"), rid
        _check_gap_resolved(env, out, agg, rid)
        for run in range(len(env.sg.runs)):
            assert secret not in env.sg.log_text(run), "secret in seqgate's log"
    finally:
        env.sg.cleanup()
        auth.stop()


# --- (c) a late reply after a newer apply -----------------------------------

def test_late_reply_after_newer_apply_is_ignored(bootstrap, seqgate_bin, tmp_path):
    """v1 applied, v3 and v5 parked; the refetch starts; then v2 arrives, v2
    and v3 apply (L = 3) and v5 still waits. The authority's answer S = 2
    (what it knew when asked) is late: ignored, counted, nothing emitted.
    A later answer S = 4 is applied and v5 drains."""
    env = Env(bootstrap, seqgate_bin, tmp_path, source="kafka",
              snapshot={"timeout_ms": 60000})
    agg = "order-late"
    try:
        env.sg.start()
        env.produce([ev(agg, 1), ev(agg, 3), ev(agg, 5)])
        wait_until(lambda: len(env.requests()) >= 1, 30, "a request record",
                   on_timeout=env.tail)
        rid = env.requests()[0][1]["request_id"]
        env.produce([ev(agg, 2)])
        env.wait_out(3, what="v1 v2 v3")
        env.reply(rid, agg, 2, "PAID", {"stale": True})
        env.wait_stat("snapshot_late_total", 1)
        time.sleep(0.5)
        assert per_key(env.out()) == {agg: ["v1", "v2", "v3"]}, env.tail()

        env.reply(rid, agg, 4, "RETURNING", {"fresh": True})
        env.wait_out(5, what="snapshot S4 and v5")
        time.sleep(0.5)
        out = env.out()
        assert per_key(out) == {agg: ["v1", "v2", "v3", "S4", "v5"]}, env.tail()
        check_snapshot_record(out[3], agg, 4, "RETURNING", {"fresh": True},
                              f"{env.t_rep}/0/1")
        assert env.dlq() == []
        stats = env.stop()
        assert stats["snapshot_late_total"] == 1, stats
        assert stats["snapshot_applied_total"] == 1, stats
        assert stats["snapshot_requests_total"] == 1, stats
        assert stats["snapshot_superseded_total"] == 0, stats
        assert stats["parked_events"] == 0, stats
    finally:
        env.sg.cleanup()


# --- (d) a reply for an unknown request ---------------------------------------

def test_reply_for_unknown_request_is_ignored(bootstrap, seqgate_bin, tmp_path):
    env = Env(bootstrap, seqgate_bin, tmp_path, source="kafka",
              snapshot={"timeout_ms": 60000})
    try:
        env.sg.start()
        env.produce([ev("order-d", 1)])
        env.wait_out(1)
        bogus = [
            # not a request id seqgate issues
            ("order-d", json.dumps({"request_id": "nope", "aggregate": "order-d",
                                    "version": 7, "state": "PAID"}).encode()),
            # well-formed (schemas/snapshot-request.schema.json), but for an
            # aggregate nobody asked about
            ("order-x", json.dumps({
                "request_id": f"{env.t_in}/0/{sha16('order-x')}/9",
                "aggregate": "order-x", "version": 7, "state": "PAID"}).encode()),
            # for an aggregate that exists but does not wait
            ("order-d", json.dumps({
                "request_id": f"{env.t_in}/0/{sha16('order-d')}/1",
                "aggregate": "order-d", "version": 7, "state": "PAID"}).encode()),
            # no request id at all
            ("order-d", json.dumps({"aggregate": "order-d",
                                    "version": 7}).encode()),
        ]
        for key, raw in bogus:
            env.reply("", key, 0, raw=raw)
        env.wait_stat("snapshot_ignored_total", len(bogus))
        env.produce([ev("order-d", 2)])  # order-d still flows, from L = 1
        env.wait_out(2)
        time.sleep(0.5)
        assert per_key(env.out()) == {"order-d": ["v1", "v2"]}, env.tail()
        assert env.dlq() == []
        stats = env.stop()
        assert stats["snapshot_ignored_total"] == len(bogus), stats
        assert stats["snapshot_applied_total"] == 0, stats
        assert stats["snapshot_requests_total"] == 0, stats
    finally:
        env.sg.cleanup()


# --- (e) the authority is down or answers nonsense --------------------------

FAULTS = {
    "connection_refused": None,  # nothing listens on the port
    "http_500": ["--fail-first", "1000"],
    "timeout": ["--delay-ms", "1500"],  # > timeout_ms 300
    "garbage_body": ["--garbage"],
    "missing_version": ["--omit", "version"],
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_authority_failure_retries_then_gap_policy(bootstrap, seqgate_bin,
                                                   tmp_path, closed_port,
                                                   fault):
    agg = "order-f"
    states = {agg: {"version": 3, "state": "SHIPPED", "data": {"x": 1}}}
    auth = None
    if FAULTS[fault] is None:
        # refused: bound, never listening, for the whole test (a port
        # picked and let go could be a test's beside this one by then)
        url = f"http://127.0.0.1:{closed_port}/orders/{{aggregate}}"
    else:
        auth = Authority(tmp_path / "auth", states,
                         ["--http", "127.0.0.1:0", "--prefix", "orders",
                          *FAULTS[fault]])
        url = f"http://{auth.http}/orders/{{aggregate}}"
    env = Env(bootstrap, seqgate_bin, tmp_path, source="http",
              snapshot={"url": url, "timeout_ms": 300, "backoff_ms": 50,
                        "backoff_max_ms": 100, "max_attempts": 3},
              gap_timeout_ms=1000, gap_policy="dlq")
    try:
        env.sg.start()
        env.produce([ev(agg, 1), ev(agg, 3)])
        env.wait_out(1)
        wait_until(lambda: total(bootstrap, env.t_dlq) >= 1, 30,
                   "the gap_timeout DLQ record", interval_s=0.05,
                   on_timeout=env.tail)
        env.produce([ev(agg, 2)])  # too late: the aggregate is quarantined
        wait_until(lambda: total(bootstrap, env.t_dlq) >= 2, 30,
                   "the aggregate_quarantined DLQ record", on_timeout=env.tail)
        time.sleep(0.5)
        dlq = env.dlq()
        assert [(label(d)[1], hdr(d, "__seqgate.errors.reason")) for d in dlq] \
            == [("v3", "gap_timeout"), ("v2", "aggregate_quarantined")], env.tail()
        assert per_key(env.out()) == {agg: ["v1"]}, "no snapshot record"
        stats = env.stop()
        # max_attempts (3) before the gap policy; then the event of the
        # quarantined aggregate asks the authority again (a new refetch of
        # up to 3 attempts, still failing), so the quarantine is not final
        assert 3 < stats["snapshot_requests_total"] <= 6, stats
        assert 1 <= stats["snapshot_gave_up_total"] <= 2, stats
        assert stats["snapshot_applied_total"] == 0, stats
        if fault == "timeout":
            # each attempt times out (seqgate's clock or curl's, whichever
            # sees it first; curl's failure of an attempt already retried
            # is only counted)
            assert stats["snapshot_timeouts_total"] + \
                stats["snapshot_failures_total"] >= 3, stats
        else:
            assert stats["snapshot_failures_total"] >= 3, stats
            assert stats["snapshot_timeouts_total"] == 0, stats
        assert stats["gap_timeouts_total"] == 1, stats
        assert stats["quarantined_aggregates"] == 1, stats
        assert stats["snapshot_in_flight"] <= 1, stats  # 2nd refetch
        if auth is not None:
            auth.stop()
            # a GET submitted just before the stop may never have left
            assert 3 < len(auth.requests()) <= \
                stats["snapshot_requests_total"], auth.requests()
    finally:
        env.sg.cleanup()
        if auth:
            auth.stop(check=False)


# --- (f) restart while a request is in flight -------------------------------

def test_restart_with_request_in_flight(bootstrap, seqgate_bin, tmp_path):
    """Two orders wait for a snapshot when seqgate stops (requests r1A, r1B
    in the request topic, unanswered). After the restart:
    - order-A: its request times out and is re-issued (r2A, attempt 2); the
      authority (started only now, ignoring the first two requests it reads,
      r1A and r1B) answers r2A: applied. The authority's answer to r1A
      arriving afterwards finds nobody waiting: ignored.
    - order-B: a reply to r1B - a request of the previous incarnation - is
      still judged by version: applied."""
    env = Env(bootstrap, seqgate_bin, tmp_path, source="kafka",
              snapshot={"timeout_ms": 3000, "backoff_ms": 50,
                        "backoff_max_ms": 100, "max_attempts": 5})
    A, B = "order-A", "order-B"
    auth = None
    try:
        env.sg.start()
        env.produce([ev(A, 1), ev(B, 1), ev(A, 3), ev(B, 3)])
        wait_until(lambda: len(env.requests()) >= 2, 30, "two request records",
                   on_timeout=env.tail)
        rc = env.sg.stop()
        assert rc == 0, env.tail()
        first = {req["aggregate"]: req for _, req in env.requests()}
        assert set(first) == {A, B} and len(env.requests()) == 2
        assert all(r["attempt"] == 1 for r in first.values())

        env.sg.start()  # run 2
        auth = Authority(tmp_path / "auth",
                         {A: {"version": 3, "state": "SHIPPED",
                              "data": {"who": "A"}}},
                         ["--kafka", bootstrap, "--request-topic", env.t_req,
                          "--group", unique_name("authority"),
                          "--fail-first", "2"])
        env.reply(first[B]["request_id"], B, 3, "SHIPPED", {"who": "B"})
        env.wait_out(4, what="v1 and the snapshot record of both orders")
        env.wait_stat("snapshot_applied_total", 2)

        reissued = [req for _, req in env.requests()
                    if req["aggregate"] == A and req["attempt"] > 1]
        assert reissued, "order-A's request was not re-issued" + env.tail()
        assert reissued[0]["request_id"] != first[A]["request_id"]
        answered = [l["request_id"] for l in auth.requests() if l["replied"]]
        assert answered == [reissued[0]["request_id"]], auth.requests()

        # The (late) answer to the previous incarnation's request r1A.
        env.reply(first[A]["request_id"], A, 3, "SHIPPED", {"who": "A-late"})
        env.wait_stat("snapshot_ignored_total", 1)
        time.sleep(0.5)
        out = env.out()
        assert per_key(out) == {A: ["v1", "S3"], B: ["v1", "S3"]}, env.tail()
        snaps = {r["key"].decode(): r for r in out if hdr(r, H_SNAP)}
        assert json.loads(snaps[A]["value"]) == {"who": "A"}
        assert json.loads(snaps[B]["value"]) == {"who": "B"}
        assert env.dlq() == []
        stats = env.stop()
        assert stats["snapshot_applied_total"] == 2, stats
        assert stats["snapshot_ignored_total"] == 1, stats
        assert stats["snapshot_superseded_total"] == 2, stats
        assert stats["snapshot_timeouts_total"] >= 1, stats  # r1A, after restart
        assert stats["parked_events"] == 0, stats
        auth.stop()
    finally:
        env.sg.cleanup()
        if auth:
            auth.stop(check=False)


# --- (g) many aggregates waiting while others flow --------------------------

def test_many_waiting_while_others_flow(bootstrap, seqgate_bin, tmp_path):
    """50 orders wait for snapshots from a slow authority (500 ms per answer,
    at most 10 requests in flight); 20 other orders flow meanwhile: their
    events reach the output before the snapshots are all resolved, and all
    50 snapshots resolve."""
    waiting = [f"order-w{i:02d}" for i in range(50)]
    flowing = [f"order-f{i:02d}" for i in range(20)]
    states = {a: {"version": 3, "state": "SHIPPED", "data": {"o": a}}
              for a in waiting}
    auth = Authority(tmp_path / "auth", states,
                     ["--http", "127.0.0.1:0", "--prefix", "orders",
                      "--delay-ms", "500"])
    env = Env(bootstrap, seqgate_bin, tmp_path, source="http",
              snapshot={"url": f"http://{auth.http}/orders/{{aggregate}}",
                        "timeout_ms": 10000, "max_in_flight": 10})
    try:
        env.sg.start()
        env.produce([ev(a, 1) for a in waiting] + [ev(a, 3) for a in waiting])
        env.wait_out(50, what="the waiting orders' v1")
        env.wait_stat("snapshot_requests_total", 1)  # refetch under way
        env.produce([ev(a, v) for v in (1, 2, 3) for a in flowing])
        env.wait_out(50 + 60 + 50, timeout_s=60,
                     what="flowing events and 50 snapshot records")
        time.sleep(0.5)
        out = env.out()
        got = per_key(out)
        for a in waiting:
            assert got.get(a) == ["v1", "S3"], (a, got.get(a))
        for a in flowing:
            assert got.get(a) == ["v1", "v2", "v3"], (a, got.get(a))
        assert len(out) == 160
        # output order (one partition): the flowing orders were not held up
        # behind the snapshots still in flight
        last_flow = max(i for i, r in enumerate(out)
                        if r["key"].decode() in flowing)
        last_snap = max(i for i, r in enumerate(out) if hdr(r, H_SNAP))
        assert last_flow < last_snap, \
            f"flowing orders done at #{last_flow}, snapshots at #{last_snap}"
        assert env.dlq() == []
        in_flight = [s["snapshot_in_flight"] for s in env.sg.events("stats")]
        assert max(in_flight) <= 10, in_flight
        stats = env.stop()
        assert stats["snapshot_applied_total"] == 50, stats
        assert stats["snapshot_requests_total"] == 50, stats
        assert stats["snapshot_superseded_total"] == 50, stats
        auth.stop()
        assert len(auth.requests()) == 50
    finally:
        env.sg.cleanup()
        auth.stop(check=False)
