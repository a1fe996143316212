"""The cluster preflight: every problem at once (lib/kafka_preflight.c).

A new user found cluster prerequisites one start at a time, each after
`--check-config` said "config ok": four starts for three missing topics and
a partition-count mismatch, and an ssl.ca.location naming a missing file
passed the check. `seqgate --check-config FILE --cluster` connects and
reports every problem, one line each, exit 2; the daemon's own start-up
reports them all at once too (one cluster_problem line each, exit 2).

test_check_config_cluster_every_problem: two input topics: missing output
  and DLQ topics, a missing input topic, an output topic with fewer
  partitions than its input, an existing changelog with the wrong partition
  count and cleanup.policy=delete, a DLQ topic whose min.insync.replicas is
  above its replication factor — each its own line, and a warning for a
  dedup TTL shorter than the input topic's retention.ms.
test_daemon_start_every_problem: the same configuration started: exit 2,
  every problem in a cluster_problem line, the exiting line counting them.
test_ttl_warning_only: a TTL below retention alone is a warning: exit 0,
  "cluster ok: 1 warning".
test_session_timeout_refused_exits: session.timeout.ms outside the broker's
  group.min/max.session.timeout.ms (here 500 ms, the test broker's minimum
  being 1000): the coordinator refuses every JoinGroup
  (INVALID_SESSION_TIMEOUT), which no retry changes; the daemon exits 2
  naming the property, instead of logging consume_error every few
  seconds forever (found by a user who wrote "6s", which librdkafka reads
  as 6 ms).
test_tls_files_every_problem: security.protocol ssl with ssl.ca.location,
  ssl.certificate.location and ssl.key.location naming missing files:
  plain --check-config names all three (exit 2); so does the daemon's
  start, before any client exists.
test_acl_for_the_takeover[literal|prefixed]: exactly_once with WRITE
  allowed on this instance's transactional id by a literal ACL: a note that
  a failover cannot end a dead instance's transaction (the other instances'
  ids); by the prefixed <group.id>- pattern: no such note.
test_acls_every_problem: a broker of its own with an authorizer
  (StandardAuthorizer, allow.everyone.if.no.acl.found=true) and ACLs that
  deny the principal WRITE on the transactional id and READ on the group,
  and name the output topic for another principal only: each a line.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from kafkautil import create_topics, unique_name
from seqgate_proc import wait_until

KAFKA_SH = Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "kafka.sh"


def _topic(out: str, dlq: str, **extra) -> dict:
    t = {"output_topic": out, "dlq_topic": dlq}
    t.update(extra)
    return t


def _conf(tmp_path, bootstrap, group, topics, kafka=None) -> str:
    conf = {"data_dir": str(tmp_path / "data"),
            "kafka": {"bootstrap.servers": bootstrap, "group.id": group,
                      **(kafka or {})},
            "broker_retry_timeout_ms": 5000,
            "http": {"address": "off"},
            "topics": topics}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(conf))
    return str(p)


def _check(seqgate_bin, path, *extra):
    return subprocess.run([seqgate_bin, "--check-config", path, *extra],
                          capture_output=True, text=True, timeout=120)


def _lines(stderr: str, kind: str) -> list[str]:
    pre = f"seqgate: cluster {kind}: "
    return [l[len(pre):] for l in stderr.splitlines() if l.startswith(pre)]


@pytest.fixture
def broken_cluster(bootstrap, tmp_path):
    """Two input topics and everything wrong around them (see above)."""
    orders, pay = unique_name("pf-orders"), unique_name("pf-pay")
    group = unique_name("pf-g")
    create_topics(bootstrap, {orders: 2}, config={"retention.ms": "2592000000"})
    create_topics(bootstrap, {pay + "-out": 1})  # fewer than pay's 3
    create_topics(bootstrap, {pay: 3})
    create_topics(bootstrap, {pay + "-dlq": 1}, config={"min.insync.replicas": "2"})
    # the orders changelog: 1 partition (input has 2), not compacted
    create_topics(bootstrap, {f"{group}-{orders}-changelog": 1},
                  config={"cleanup.policy": "delete"})
    topics = {
        orders: _topic(orders + "-out", orders + "-dlq"),      # both missing
        pay: _topic(pay + "-out", pay + "-dlq"),               # 1 < 3; min.isr
        unique_name("pf-missing"): _topic("pf-x-out", "pf-x-dlq"),
    }
    path = _conf(tmp_path, bootstrap, group, topics)
    return path, orders, pay, group, topics


def _expected(orders, pay, group, topics):
    missing = [t for t in topics if t.startswith("pf-missing")][0]
    return [
        f'output topic "{orders}-out" (of input topic "{orders}") does not exist',
        f'DLQ topic "{orders}-dlq" (of input topic "{orders}") does not exist',
        f'changelog topic "{group}-{orders}-changelog" has 1 partition(s), '
        f'input topic "{orders}" has 2',
        f'changelog topic "{group}-{orders}-changelog" has '
        f'cleanup.policy=delete; it must contain compact',
        f'output topic "{pay}-out" has 1 partition(s), fewer than input '
        f'topic "{pay}" (3)',
        f'DLQ topic "{pay}-dlq": min.insync.replicas 2 is above its '
        f'replication factor 1',
        f'input topic "{missing}" does not exist',
        f'output topic "pf-x-out" (of input topic "{missing}") does not exist',
        f'DLQ topic "pf-x-dlq" (of input topic "{missing}") does not exist',
    ]


def test_check_config_cluster_every_problem(seqgate_bin, broken_cluster):
    path, orders, pay, group, topics = broken_cluster
    r = _check(seqgate_bin, path, "--cluster")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    errors = _lines(r.stderr, "error")
    want = _expected(orders, pay, group, topics)
    for w in want:
        assert any(w in e for e in errors), (w, r.stderr)
    assert len(errors) == len(want), r.stderr
    assert f"seqgate: {len(want)} cluster problems for {path}" in r.stderr
    warnings = _lines(r.stderr, "warning")
    assert any(f"topics.{orders}.dedup.ttl_ms (7 d) is shorter than input "
               f'topic "{orders}"\'s retention.ms (30 d)' in w
               for w in warnings), r.stderr
    # nothing was created or changed by the check
    md = AdminClient({"bootstrap.servers": json.load(open(path))["kafka"]
                      ["bootstrap.servers"]}).list_topics(timeout=10)
    assert orders + "-out" not in md.topics
    assert f"{group}-{pay}-changelog" not in md.topics


def test_daemon_start_every_problem(seqgate_bin, broken_cluster):
    path, orders, pay, group, topics = broken_cluster
    r = subprocess.run([seqgate_bin, "--config", path], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    log = [json.loads(l) for l in r.stderr.splitlines() if l.startswith("{")]
    problems = [l["problem"] for l in log if l["event"] == "cluster_problem"]
    want = _expected(orders, pay, group, topics)
    for w in want:
        assert any(w in p for p in problems), (w, r.stderr[-3000:])
    exiting = [l for l in log if l["event"] == "exiting"]
    assert exiting and exiting[0]["detail"].startswith(
        f"{len(want)} problems with the cluster"), exiting


def test_ttl_warning_only(seqgate_bin, bootstrap, tmp_path):
    t = unique_name("pf-ttl")
    create_topics(bootstrap, {t: 1}, config={"retention.ms": "864000000"})
    create_topics(bootstrap, {t + "-out": 1, t + "-dlq": 1})
    topic = _topic(t + "-out", t + "-dlq", dedup={"ttl_ms": 86400000})
    path = _conf(tmp_path, bootstrap, unique_name("pf-g"), {t: topic})
    r = _check(seqgate_bin, path, "--cluster")
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert "cluster ok: 1 warning" in r.stdout, r.stdout
    assert any(f"topics.{t}.dedup.ttl_ms (1 d) is shorter than input topic "
               f'"{t}"\'s retention.ms (10 d)' in w
               for w in _lines(r.stderr, "warning")), r.stderr


def test_session_timeout_refused_exits(seqgate_bin, bootstrap, tmp_path):
    t = unique_name("pf-sto")
    create_topics(bootstrap, {t: 1, t + "-out": 1, t + "-dlq": 1})
    path = _conf(tmp_path, bootstrap, unique_name("pf-g"),
                 {t: _topic(t + "-out", t + "-dlq")},
                 kafka={"session.timeout.ms": "500",
                        "heartbeat.interval.ms": "100"})
    r = subprocess.run([seqgate_bin, "--config", path], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    log = [json.loads(l) for l in r.stderr.splitlines() if l.startswith("{")]
    exiting = [l for l in log if l["event"] == "exiting"]
    assert exiting, r.stderr[-3000:]
    assert "session.timeout.ms 500" in exiting[0]["detail"], exiting
    assert "group.min.session.timeout.ms" in exiting[0]["detail"], exiting


def test_tls_files_every_problem(seqgate_bin, tmp_path):
    gone = tmp_path / "no-such-dir"
    kafka = {"security.protocol": "ssl",
             "ssl.ca.location": str(gone / "ca.pem"),
             "ssl.certificate.location": str(gone / "client.pem"),
             "ssl.key.location": str(gone / "client.key")}
    path = _conf(tmp_path, "127.0.0.1:9", "g",
                 {"in": _topic("out", "dlq")}, kafka=kafka)
    r = _check(seqgate_bin, path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    for prop in kafka:
        if prop == "security.protocol":
            continue
        assert (f'seqgate: config error: kafka.{prop}: "{kafka[prop]}": '
                f"No such file or directory") in r.stderr, (prop, r.stderr)
    assert "seqgate: 3 configuration errors in" in r.stderr, r.stderr
    # the daemon's start names all three too, before any client exists
    run = subprocess.run([seqgate_bin, "--config", path], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    log = [json.loads(l) for l in run.stderr.splitlines() if l.startswith("{")]
    named = [l["problem"] for l in log if l["event"] == "kafka_file_problem"]
    assert len(named) == 3, run.stderr
    exiting = [l for l in log if l["event"] == "exiting"]
    assert exiting and exiting[0]["error"] == "SG_ERR_CONFIG", exiting


@pytest.fixture(scope="module")
def acl_bootstrap():
    """A broker of its own with an authorizer (its ACLs would disturb the
    shared one); stopped after the module. $KAFKA_ACL_BOOTSTRAP: one that
    runs already (started with the same KAFKA_EXTRA_PROPS)."""
    addr = os.environ.get("KAFKA_ACL_BOOTSTRAP")
    if addr:
        yield addr
        return
    workdir = tempfile.mkdtemp(prefix="seqgate-pytest-kafka-acl.")
    env = dict(os.environ, KAFKA_WORKDIR=workdir, KAFKA_EXTRA_PROPS=(
        "authorizer.class.name="
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "allow.everyone.if.no.acl.found=true"))
    env.pop("KAFKA_BOOTSTRAP", None)
    proc = subprocess.run([str(KAFKA_SH), "start"], env=env, text=True,
                          capture_output=True)
    if proc.returncode != 0:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.fail(f"kafka.sh start (authorizer) failed:\n{proc.stderr}")
    try:
        yield proc.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(KAFKA_SH), "stop"], env=env, check=False,
                       capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_described(admin: AdminClient, acls: list) -> None:
    """CreateAcls is answered once the controller committed the ACLs; the
    broker's authorizer, which answers DescribeAcls, applies them from the
    metadata log a little later (on a loaded machine, after seqgate's
    check had already found "no ACL described"). Waits until it shows
    them."""
    every = AclBindingFilter(ResourceType.ANY, None,
                             ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    wait_until(lambda: set(acls) <= set(
                   admin.describe_acls(every).result(timeout=30)),
               30, "the broker's authorizer to describe the new ACLs")


def test_acls_every_problem(seqgate_bin, acl_bootstrap, tmp_path):
    t, group = unique_name("pf-acl"), unique_name("pf-acl-g")
    create_topics(acl_bootstrap, {t: 1, t + "-out": 1, t + "-dlq": 1})
    # <group.id>-<instance_id>, exactly_once; instance_id's default is the
    # host name
    txn = f"{group}-{socket.gethostname()}"
    me = "User:ANONYMOUS"     # PLAINTEXT
    admin = AdminClient({"bootstrap.servers": acl_bootstrap})
    acls = [
        AclBinding(ResourceType.TRANSACTIONAL_ID, txn,
                   ResourcePatternType.LITERAL, me, "*", AclOperation.WRITE,
                   AclPermissionType.DENY),
        AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, me,
                   "*", AclOperation.READ, AclPermissionType.DENY),
        AclBinding(ResourceType.TOPIC, t + "-dlq",
                   ResourcePatternType.LITERAL, "User:someone-else", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
    ]
    for f in admin.create_acls(acls).values():
        f.result(timeout=30)
    _wait_described(admin, acls)
    path = _conf(tmp_path, acl_bootstrap, group,
                 {t: _topic(t + "-out", t + "-dlq")})
    r = _check(seqgate_bin, path, "--cluster")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    errors = _lines(r.stderr, "error")
    for w in (f'transactional id "{txn}": an ACL denies {me} WRITE',
              # the ACL check names the group; the group's own check
              # (OffsetFetch) may only time out on a denied group
              f'consumer group "{group}": an ACL denies {me} READ',
              f'DLQ topic "{t}-dlq": no ACL allows {me} WRITE'):
        assert any(w in e for e in errors), (w, r.stderr)


@pytest.mark.parametrize("pattern", ["literal", "prefixed"])
def test_acl_for_the_takeover(seqgate_bin, acl_bootstrap, tmp_path, pattern):
    """exactly_once: a failover ends a dead instance's open transaction by
    writing under that instance's transactional id (semantics §6 "Taking
    over from a dead owner"). ACLs that allow this instance's own id only
    (literal) pass the check, with a note that the takeover cannot work;
    the prefixed <group.id>- pattern the docs advise gets no such note."""
    t, group = unique_name("pf-tko"), unique_name("pf-tko-g")
    create_topics(acl_bootstrap, {t: 1, t + "-out": 1, t + "-dlq": 1})
    txn = f"{group}-{socket.gethostname()}"
    me = "User:ANONYMOUS"
    name, ptype = ((txn, ResourcePatternType.LITERAL) if pattern == "literal"
                   else (f"{group}-", ResourcePatternType.PREFIXED))
    admin = AdminClient({"bootstrap.servers": acl_bootstrap})
    acls = [AclBinding(ResourceType.TRANSACTIONAL_ID, name, ptype, me, "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)]
    for f in admin.create_acls(acls).values():
        f.result(timeout=30)
    _wait_described(admin, acls)
    path = _conf(tmp_path, acl_bootstrap, group,
                 {t: _topic(t + "-out", t + "-dlq")})
    r = _check(seqgate_bin, path, "--cluster")
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    notes = [l for l in _lines(r.stderr, "note")
             if f'transactional ids "{group}-*"' in l]
    if pattern == "literal":
        assert notes, r.stderr
        assert "failover" in notes[0] and "prefix" in notes[0], notes
    else:
        assert not notes, notes
    assert not _lines(r.stderr, "error"), r.stderr
