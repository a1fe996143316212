"""seqgate against a secured broker: SASL over TLS, ACLs enforced.

The module starts its own broker (deploy/kafka/kafka.sh with
KAFKA_SECURITY=sasl_ssl: a CA the script makes, SCRAM-SHA-512 and PLAIN
users written at format time, the StandardAuthorizer denying what no ACL
allows) and grants the user "seqgate" exactly what `kafka.sh grant-seqgate`
lists: Read on its consumer group, Write on its transactional id, Describe
on its restore consumer's group, Read on the input topic, Write,
DescribeConfigs and Read on the output and DLQ topics, Create, Read, Write
and DescribeConfigs on the changelog. The test's own clients log in as the
admin user.

seqgate logs in with PLAIN over SASL_SSL: Debian bookworm's librdkafka
2.0.2 cannot log in with SCRAM to Kafka 4 (test_scram_with_old_librdkafka
pins the error it gives instead).

  - test_secure_scenario_restart_and_seqgatectl: a scenario (versions in
    and out of order, a duplicate, a stale version) through exactly_once,
    a clean restart that restores from the changelog and goes on, and
    seqgatectl's Kafka commands (dlq summary, audit) with the same login;
    the HTTP endpoint serves HTTPS only (the broker's certificate, signed
    by the script's CA) and asks /v1/ for a password (basic_auth_users)
    or a bearer token, not the probes;
  - test_wrong_password_is_one_error: exit 2 within the first metadata
    timeout, one `exiting` line naming the login, no retry loop;
  - test_missing_acl_is_one_error: each of the group's Read, the output
    topic's Write, the transactional id's Write and the changelog's Read
    taken away in turn: exit 2 with the line naming the principal, the
    operation and the resource, no retry loop.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import http.client
import json
import os
import ssl
import urllib.error
import urllib.request
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from kafkautil import (consume_all, create_topics, produce, set_client_config,
                       unique_name)
from seqgate_proc import Seqgate, make_config, wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_SH = REPO_ROOT / "deploy" / "kafka" / "kafka.sh"
SOURCE = "urn:example:secure"

# One worker for the module (conftest.py): its broker is a module-scoped
# fixture (one sasl_ssl broker, not one per worker), and the missing-ACL
# cases share `granted`, each taking one ACL away and putting it back.
pytestmark = pytest.mark.xdist_group("secure_broker")


class SecureBroker:
    def __init__(self, workdir: str):
        self.workdir = Path(workdir)
        self.env = dict(os.environ, KAFKA_WORKDIR=workdir,
                        KAFKA_SECURITY="sasl_ssl")

    def sh(self, *args: str) -> str:
        p = subprocess.run([str(KAFKA_SH), *args], env=self.env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.returncode == 0, f"kafka.sh {' '.join(args)}: {p.stderr}"
        return p.stdout.strip()

    @property
    def bootstrap(self) -> str:
        return (self.workdir / "bootstrap").read_text().strip()

    @property
    def ca(self) -> str:
        return str(self.workdir / "tls" / "ca.crt")

    def password(self, user: str) -> str:
        return self.sh("password", user)

    def login(self, user: str, mechanism: str = "PLAIN",
              password: str | None = None) -> dict:
        return {"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
                "sasl.username": user,
                "sasl.password": password or self.password(user),
                "ssl.ca.location": self.ca}


@pytest.fixture(scope="module")
def broker():
    wd = tempfile.mkdtemp(prefix="seqgate-secure-kafka.")
    b = SecureBroker(wd)
    p = subprocess.run([str(KAFKA_SH), "start"], env=b.env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        shutil.rmtree(wd, ignore_errors=True)
        pytest.fail(f"kafka.sh start (sasl_ssl) failed:\n{p.stderr}",
                    pytrace=False)
    # the test's own clients are the admin (a super user); librdkafka in
    # the Python client is recent enough for SCRAM
    set_client_config(b.bootstrap, b.login("admin", "SCRAM-SHA-512"))
    try:
        yield b
    finally:
        set_client_config(b.bootstrap, None)
        subprocess.run([str(KAFKA_SH), "stop"], env=b.env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(wd, ignore_errors=True)


class Setup:
    """Topics, ACLs and a seqgate configuration of one test."""

    def __init__(self, broker: SecureBroker, tmp_path: Path):
        self.broker = broker
        self.group = unique_name("sg-sec")
        self.instance = "i1"
        self.input = unique_name("sec-in")
        self.output = self.input + ".out"
        self.dlq = self.input + ".dlq"
        self.changelog = f"{self.group}-{self.input}-changelog"
        self.txn = f"{self.group}-{self.instance}"
        create_topics(broker.bootstrap, {self.input: 2, self.output: 2,
                                         self.dlq: 1})
        broker.sh("grant-seqgate", "user=seqgate", f"group={self.group}",
                  f"instance={self.instance}", f"input={self.input}",
                  f"output={self.output}", f"dlq={self.dlq}",
                  f"changelog={self.changelog}")
        cfg = make_config(bootstrap=broker.bootstrap, group=self.group,
                          instance=self.instance,
                          data_dir=str(tmp_path / "data"),
                          input_topic=self.input, output_topic=self.output,
                          dlq_topic=self.dlq, guarantee="exactly_once")
        # the password from the environment, never in the file
        cfg["kafka"].update({"security.protocol": "SASL_SSL",
                             "sasl.mechanisms": "PLAIN",
                             "sasl.username": "seqgate",
                             "sasl.password": "${SG_KAFKA_PASSWORD}",
                             "ssl.ca.location": broker.ca})
        self.config = cfg
        self.tmp = tmp_path


def event(agg: str, v: int, part: int, dup_of: str | None = None) -> dict:
    eid = dup_of or f"{agg}-v{v}"
    return {"key": agg, "partition": part,
            "value": json.dumps({"aggregate": agg, "version": v}),
            "headers": [("ce_specversion", b"1.0"), ("ce_id", eid.encode()),
                        ("ce_source", SOURCE.encode()),
                        ("ce_type", b"thing.updated"),
                        ("ce_sequence", str(v).encode())]}


def versions_out(records: list[dict]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in records:
        v = json.loads(r["value"])
        out.setdefault(v["aggregate"], []).append(v["version"])
    return out


def bcrypt(password: str) -> str:
    """A bcrypt hash (cost 4, the fastest) of `password`, from libxcrypt as
    seqgate checks it (Python's crypt module is gone from 3.13)."""
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong,
                                  ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = lib.crypt_gensalt(b"$2y$", 4, None, 0)
    return lib.crypt(password.encode(), salt).decode()


HTTP_PASSWORD = "correct horse battery staple"
HTTP_TOKEN = "tok-" + "3f9a" * 8


def https_get(sg: Seqgate, ca: str, path: str, auth: str | None = None):
    """(status, body) of GET https://127.0.0.1:PORT<path> (the run's port),
    trusting `ca`."""
    port = sg.wait_for_event("http_listening")["port"]
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}")
    if auth:
        req.add_header("Authorization", auth)
    ctx = ssl.create_default_context(cafile=ca)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def run_ctl(seqgatectl_bin: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([seqgatectl_bin, *args], text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, env=dict(os.environ))


def test_secure_scenario_restart_and_seqgatectl(broker, seqgate_bin,
                                                seqgatectl_bin, tmp_path,
                                                monkeypatch):
    s = Setup(broker, tmp_path)
    monkeypatch.setenv("SG_KAFKA_PASSWORD", broker.password("seqgate"))
    # a: v1 v3 v2 (v3 parks until v2); b: v1 v2, v2 again (a duplicate),
    # then v1 with a new id (stale)
    first = [event("a", 1, 0), event("a", 3, 0), event("a", 2, 0),
             event("b", 1, 1), event("b", 2, 1), event("b", 2, 1),
             event("b", 1, 1, dup_of="b-v1-again")]
    produce(broker.bootstrap, s.input, first)
    # HTTPS with the broker's certificate (127.0.0.1, the script's CA) and
    # credentials for /v1/
    s.config["http"].update({
        "tls_server_config": {
            "cert_file": str(broker.workdir / "tls" / "broker.crt"),
            "key_file": str(broker.workdir / "tls" / "broker.key")},
        "basic_auth_users": {"ops": bcrypt(HTTP_PASSWORD)},
        "bearer_tokens": {"grafana": "sha256:" + hashlib.sha256(
            HTTP_TOKEN.encode()).hexdigest()}})
    sg = Seqgate(seqgate_bin, s.config, tmp_path / "sg")
    t0 = time.monotonic()

    def mark(what):
        print(f"{time.monotonic() - t0:7.1f} s  {what}")
    try:
        sg.start(timeout_s=60)
        mark("assigned")
        out = consume_all(broker.bootstrap, s.output, expect_count=5,
                          timeout_s=60)
        assert versions_out(out) == {"a": [1, 2, 3], "b": [1, 2]}
        dlq = consume_all(broker.bootstrap, s.dlq, expect_count=1,
                          timeout_s=30)
        assert len(dlq) == 1, dlq
        mark("first output")
        # the endpoint: HTTPS, the probes open, /v1/ behind credentials
        assert https_get(sg, broker.ca, "/readyz")[0] == 200
        q = f"/v1/events?source={SOURCE}&id=a-v3"
        assert https_get(sg, broker.ca, q)[0] == 401
        userpass = base64.b64encode(f"ops:{HTTP_PASSWORD}".encode()).decode()
        st, body = https_get(sg, broker.ca, q, "Basic " + userpass)
        assert st == 200 and json.loads(body)["status"] == "applied", body
        st, body = https_get(sg, broker.ca, q, "Bearer " + HTTP_TOKEN)
        assert st == 200, body
        assert https_get(sg, broker.ca, q, "Bearer nope")[0] == 401
        listening = sg.events("http_listening")[0]
        assert listening["tls"] is True, listening
        with pytest.raises((OSError, http.client.HTTPException)):
            urllib.request.urlopen(sg.http_url("/healthz"), timeout=10)
        assert sg.stop() == 0
        mark("stopped")

        # restart: the store is kept; the changelog restore runs and the
        # group goes on from its committed offsets
        second = [event("a", 4, 0), event("b", 3, 1), event("a", 4, 0)]
        produce(broker.bootstrap, s.input, second)
        sg.start(timeout_s=60)
        mark("restarted")
        out = consume_all(broker.bootstrap, s.output, expect_count=7,
                          timeout_s=60)
        assert versions_out(out) == {"a": [1, 2, 3, 4], "b": [1, 2, 3]}
        assert sg.events("restore_done"), sg.log_tail()
        mark("second output")
        assert sg.stop() == 0
        # a restart from an empty data_dir restores everything from the
        # changelog, which the ACLs let seqgate read
        shutil.rmtree(tmp_path / "data")
        produce(broker.bootstrap, s.input, [event("a", 4, 0)])
        sg.start(timeout_s=60)
        wait_until(lambda: (sg.last_stats() or {}).get("records_in_total", 0) >= 1,
                   60, "the duplicate read after the restore",
                   on_timeout=sg.log_tail)
        out = consume_all(broker.bootstrap, s.output, timeout_s=30)
        assert versions_out(out) == {"a": [1, 2, 3, 4], "b": [1, 2, 3]}, \
            "a duplicate re-emitted after a full restore"
        assert sum(e.get("records", 0) for e in sg.events("restore_done")) > 0
        mark("restored from the changelog")
        assert sg.stop() == 0
        # (a kafka_retry is fine: a changelog just created is unknown to
        # DescribeConfigs for a moment)
        assert not [l for l in sg.log_lines(0) + sg.log_lines(1) + sg.log_lines()
                    if l.get("event") in ("fatal", "exiting")]

        # seqgatectl with the same configuration and login
        cfg = str(sg.config_path)
        r = run_ctl(seqgatectl_bin, "dlq", "summary", "-c", cfg, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.splitlines()[-1])["records"] == 1, r.stdout
        r = run_ctl(seqgatectl_bin, "audit", "-c", cfg, "-t", s.input,
                    "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.splitlines()[-1])["records"] == 11
        r = run_ctl(seqgatectl_bin, "lookup", "-c", cfg, "--topic", s.input,
                    "--source", SOURCE, "--id", "a-v3", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["status"] == "applied", r.stdout
        mark("seqgatectl")
    finally:
        sg.cleanup()


def test_wrong_password_is_one_error(broker, granted, seqgate_bin,
                                     seqgatectl_bin, tmp_path, monkeypatch):
    cfg = json.loads(json.dumps(granted.config))
    cfg["data_dir"] = str(tmp_path / "data")
    monkeypatch.setenv("SG_KAFKA_PASSWORD", "not-the-password")
    sg = Seqgate(seqgate_bin, cfg, tmp_path / "sg")
    try:
        t0 = time.monotonic()
        sg.start(wait_assigned=False)
        rc = sg.wait_exit(60)
        took = time.monotonic() - t0
    finally:
        sg.cleanup()
    assert rc == 2, sg.log_tail()
    exiting = sg.events("exiting")
    assert len(exiting) == 1, sg.log_tail()
    detail = exiting[0]["detail"]
    assert "refused seqgate's login" in detail, detail
    assert 'sasl.username "seqgate"' in detail, detail
    assert "not-the-password" not in sg.log_text()
    assert not sg.events("kafka_retry"), sg.log_tail()
    assert took < 40, f"{took:.1f} s to give up"
    # seqgatectl with the same configuration: the login, exit 2
    r = run_ctl(seqgatectl_bin, "dlq", "summary", "-c", str(sg.config_path))
    assert r.returncode == 2, r.stderr
    assert "_AUTHENTICATION" in r.stderr.splitlines()[-1], r.stderr


# (the ACL taken away: resource type, name of the Setup, operation; the
# words the error must hold)
ACLS = {
    "group": ("GROUP", "group", "READ", 'Read on group "{}"'),
    "output": ("TOPIC", "output", "WRITE", 'Write on topic "{}"'),
    "transactional_id": ("TRANSACTIONAL_ID", "txn", "WRITE",
                         'Write on transactional id "{}"'),
    "changelog": ("TOPIC", "changelog", "READ", 'Read on topic "{}"'),
}


@pytest.fixture(scope="module")
def granted(broker, tmp_path_factory):
    """One set of topics and ACLs the missing-ACL cases share: each takes
    one ACL away and puts it back."""
    return Setup(broker, tmp_path_factory.mktemp("granted"))


def acl_binding(s: Setup, which: str, cls=None):
    from confluent_kafka.admin import (AclBinding, AclOperation,
                                       AclPermissionType, ResourcePatternType,
                                       ResourceType)
    rtype, attr, op, _ = ACLS[which]
    return (cls or AclBinding)(
        getattr(ResourceType, rtype), getattr(s, attr),
        ResourcePatternType.LITERAL, "User:seqgate", "*",
        getattr(AclOperation, op), AclPermissionType.ALLOW)


@pytest.mark.parametrize("which", sorted(ACLS))
def test_missing_acl_is_one_error(broker, granted, seqgate_bin, tmp_path,
                                  monkeypatch, which):
    from confluent_kafka.admin import AclBindingFilter, AdminClient
    s = granted
    admin = AdminClient({"bootstrap.servers": broker.bootstrap,
                         **broker.login("admin", "SCRAM-SHA-512")})
    binding = acl_binding(s, which)
    for f in admin.delete_acls([acl_binding(s, which,
                                            AclBindingFilter)]).values():
        assert f.result(), f"no ACL {binding} to take away"
    cfg = json.loads(json.dumps(s.config))
    cfg["data_dir"] = str(tmp_path / "data")
    monkeypatch.setenv("SG_KAFKA_PASSWORD", broker.password("seqgate"))
    produce(broker.bootstrap, s.input, [event("a", 1, 0), event("b", 1, 1)])
    sg = Seqgate(seqgate_bin, cfg, tmp_path / "sg")
    try:
        sg.start(wait_assigned=False)
        rc = sg.wait_exit(60)
    finally:
        sg.cleanup()
        for f in admin.create_acls([binding]).values():
            f.result()
    assert rc == 2, sg.log_tail()
    exiting = sg.events("exiting")
    assert len(exiting) == 1, sg.log_tail()
    detail = exiting[0]["detail"]
    words = ACLS[which][3].format(getattr(s, ACLS[which][1]))
    assert "User:seqgate needs an ACL allowing " + words in detail, detail
    assert len(sg.events("batch_aborted")) <= 1, sg.log_tail()
    # the missing ACL is never retried; a retry of something else may
    # come first (a changelog topic just created is unknown to
    # DescribeConfigs for a moment: UNKNOWN_TOPIC_OR_PART)
    assert not [e for e in sg.events("kafka_retry")
                if "AUTHORIZATION" in e.get("error", "")
                or "authoriz" in e.get("detail", "").lower()], sg.log_tail()


def test_scram_with_old_librdkafka(broker, granted, seqgate_bin, tmp_path,
                                   monkeypatch):
    """SCRAM-SHA-512 with the right password: librdkafka before 2.6.1 is
    refused by Kafka 4 (it sends the client nonce twice); seqgate says so
    in its one error instead of blaming the password alone."""
    v = subprocess.run([seqgate_bin, "--version"], text=True,
                       stdout=subprocess.PIPE).stdout
    lib = next(l.split()[1] for l in v.splitlines()
               if l.startswith("librdkafka "))
    if tuple(int(x) for x in lib.split(".")[:3]) >= (2, 6, 1):
        pytest.skip(f"librdkafka {lib} logs in with SCRAM: the scenario "
                    "test covers it once its config says SCRAM-SHA-512")
    cfg = json.loads(json.dumps(granted.config))
    cfg["data_dir"] = str(tmp_path / "data")
    cfg["kafka"]["sasl.mechanisms"] = "SCRAM-SHA-512"
    monkeypatch.setenv("SG_KAFKA_PASSWORD", broker.password("seqgate"))
    sg = Seqgate(seqgate_bin, cfg, tmp_path / "sg")
    try:
        sg.start(wait_assigned=False)
        rc = sg.wait_exit(60)
    finally:
        sg.cleanup()
    assert rc == 2, sg.log_tail()
    detail = sg.events("exiting")[0]["detail"]
    assert "librdkafka before 2.6.1" in detail, detail
    assert "PLAIN over SASL_SSL" in detail, detail
