#!/usr/bin/env python3
"""seqgate's configuration file as a user writes it: YAML beside JSON, and
the effective configuration (`seqgate --print-config`). Offline: no broker.

- A YAML file with comments passes --check-config; one with an unquoted
  `on` or `0755` fails naming the key, the line and the column.
- --print-config prints every default filled in, the changelog topic named,
  --data-dir and --instance-id applied, secrets and values from the
  environment as "***"; its output is a configuration that --check-config
  accepts and --print-config prints again the same.

Run by meson test:  test_config_file.py SEQGATE
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

SEQGATE = None

# group.id of this test process's own: --check-config probes this host's
# (group.id, instance_id) claim, and instance_id defaults to the host name,
# so a seqgate with a fixed group running on the host (a deployment, a
# demo, another test run) would make the checks fail
GROUP = "orders-seqgate-%d" % os.getpid()

YAML = """\
# the orders topic, deduplicated and ordered
data_dir: /var/lib/seqgate
kafka:
  bootstrap.servers: broker:9092   # the cluster
  group.id: %s
  security.protocol: sasl_ssl
  sasl.mechanisms: PLAIN
  sasl.username: seqgate
  sasl.password: ${SGT_PASSWORD}
topics:
  orders:
    output_topic: orders.clean
    dlq_topic: orders.dlq
    ordering:
      gap_timeout_ms: 60000        # a minute
""" % GROUP


def closed_bootstrap():
    """bootstrap.servers of a loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def run(*args, env=None):
    return subprocess.run([SEQGATE, *args], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, **(env or {})))


class ConfigFile(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.env = {"SGT_PASSWORD": "pw-from-env-Zq9"}

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_yaml_with_comments_checks(self):
        path = self.write("seqgate.yaml", YAML)
        r = run("--check-config", path, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("config ok: 1 topic(s)", r.stdout)

    def test_help_lists_every_exit_status_whole(self):
        """--help's "Exit status" section holds each status's whole text,
        as docs/operating.md's generated table has it (the help printed
        each row through a 1024-byte buffer and cut status 2's text
        mid-sentence)."""
        import re
        r = run("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        helptext = " ".join(r.stdout.partition("Exit status:")[2].split())
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "..", "..")
        with open(os.path.join(root, "docs", "operating.md"),
                  encoding="utf-8") as f:
            page = f.read()
        table = page.partition("BEGIN GENERATED: exit-statuses")[2]
        table = table.partition("END GENERATED: exit-statuses")[0]
        rows = re.findall(r"^\| (\d+) \| \*\*(.+?)\*\*: (.*) \|$", table,
                          re.M)
        self.assertGreaterEqual(len(rows), 3, table)
        for status, name, doc in rows:
            doc = doc.replace("\\|", "|").replace("`", "")
            want = " ".join(f"{status} {name}: {doc}".split())
            self.assertIn(want, helptext, "status %s" % status)

    def test_yaml_pitfalls_name_key_line_column(self):
        path = self.write("seqgate.yml", YAML + "instance_id: on\n"
                          "store: {map_size_bytes: 0755}\n")
        r = run("--check-config", path, env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("instance_id: YAML line 16, column 14: an unquoted yes,"
                      " no, on, off", r.stderr)
        quoted = self.write("quoted.yml", YAML + 'instance_id: "on"\n')
        r = run("--check-config", quoted, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_print_config(self):
        path = self.write("seqgate.yaml", YAML)
        r = run("--print-config", path, "--data-dir", "/srv/sg",
                "--instance-id", "pod-7", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("pw-from-env-Zq9", r.stdout)
        eff = json.loads(r.stdout)
        self.assertEqual(eff["kafka"]["sasl.password"], "***")
        self.assertEqual(eff["kafka"]["sasl.username"], "seqgate")
        self.assertEqual(eff["data_dir"], "/srv/sg")
        self.assertEqual(eff["instance_id"], "pod-7")
        t = eff["topics"]["orders"]
        self.assertEqual(t["ordering"]["gap_timeout_ms"], 60000)
        # defaults filled in
        self.assertEqual(t["ordering"]["gap_policy"], "dlq")
        self.assertEqual(t["dedup"]["ttl_ms"], 604800000)
        self.assertEqual(t["changelog_topic"], GROUP + "-orders-changelog")
        self.assertEqual(eff["batch"]["max_ms"], 100)
        self.assertEqual(eff["log_level"], "info")
        # a configuration of its own, printed again the same
        again = self.write("effective.json", r.stdout)
        self.assertEqual(run("--check-config", again).returncode, 0)
        r2 = run("--print-config", again)
        self.assertEqual(r2.returncode, 0, r2.stderr)
        self.assertEqual(r2.stdout, r.stdout)

    def test_data_dir_that_cannot_be_made(self):
        """A data_dir under a file: --check-config fails naming the path in
        the way and the errno (exit 2); so does the start, before any broker
        (exit 2: a configuration error, not a runtime one)."""
        blocker = self.write("a-file", "")
        data_dir = os.path.join(blocker, "store")
        path = self.write("seqgate.json", json.dumps({
            "data_dir": data_dir, "http": {"address": "off"},
            "kafka": {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"},
            "topics": {"t": {"output_topic": "o", "dlq_topic": "d"}}}))
        want = (f"data_dir {data_dir} cannot be created: {blocker} is not a "
                f"directory (ENOTDIR)")
        r = run("--check-config", path)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(f"seqgate: config error: {want}", r.stderr)
        self.assertNotIn("config ok", r.stdout)
        r = run("--config", path)
        self.assertEqual(r.returncode, 2, r.stderr)
        exiting = [json.loads(l) for l in r.stderr.splitlines()
                   if '"event":"exiting"' in l]
        self.assertEqual(len(exiting), 1, r.stderr)
        self.assertEqual(exiting[0]["error"], "SG_ERR_CONFIG")
        self.assertEqual(exiting[0]["detail"], want)
        self.assertEqual(exiting[0]["exit_class"], "operator action needed")

    def test_check_cluster_unreachable(self):
        """--check-config --cluster with no broker listening: a line saying
        what it connects to and how long it waits at most comes first, while
        it waits (not after); then the error names bootstrap.servers and what
        failed (connection refused), exit 2."""
        bs = closed_bootstrap()
        path = self.write("seqgate.json", json.dumps({
            "data_dir": os.path.join(self.tmp.name, "data"),
            "broker_retry_timeout_ms": 8000,
            "kafka": {"bootstrap.servers": bs, "group.id": "g"},
            "topics": {"t": {"output_topic": "o", "dlq_topic": "d"}}}))
        p = subprocess.Popen([SEQGATE, "--check-config", path, "--cluster"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            first = p.stderr.readline()
            waiting = p.poll() is None
            rest = p.stderr.read()
            rc = p.wait(timeout=60)
        finally:
            p.kill()
            p.wait()
            p.stdout.close()
            p.stderr.close()
        self.assertEqual(first, f"seqgate: cluster: connecting to "
                         f"bootstrap.servers {bs} (waiting at most 8.0 s: "
                         f"broker_retry_timeout_ms)\n", first + rest)
        self.assertTrue(waiting, "the first line came only at the end:\n"
                        + first + rest)
        self.assertEqual(rc, 2, first + rest)
        err = [l for l in rest.splitlines()
               if l.startswith("seqgate: cluster error: ")]
        self.assertEqual(len(err), 1, rest)
        self.assertIn(f"no broker of bootstrap.servers {bs} answered within",
                      err[0])
        self.assertIn("(broker_retry_timeout_ms)", err[0])
        self.assertIn("Connection refused", err[0])

    def test_daemon_unreachable_names_bootstrap(self):
        """The daemon with no broker listening retries for
        broker_retry_timeout_ms, then exits 1 (retriable: a supervisor
        starts it again); its last lines name bootstrap.servers and its
        value, so that a typo in the port is found from the log alone."""
        bs = closed_bootstrap()
        path = self.write("seqgate.json", json.dumps({
            "data_dir": os.path.join(self.tmp.name, "data"),
            "broker_retry_timeout_ms": 3000,
            "http": {"address": "127.0.0.1:0"},
            "kafka": {"bootstrap.servers": bs, "group.id": "g"},
            "topics": {"t": {"output_topic": "o", "dlq_topic": "d"}}}))
        r = subprocess.run([SEQGATE, "--config", path], capture_output=True,
                           text=True, timeout=90)
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 1, out)
        lines = [json.loads(l) for l in out.splitlines()
                 if l.startswith("{")]
        last = [l for l in lines if l.get("event") in ("exiting",
                                                       "cluster_problem")]
        self.assertTrue(last, out)
        for l in last:
            self.assertIn(f"bootstrap.servers {bs}", json.dumps(l), l)

    def test_http_port_in_use_names_the_key(self):
        """A second instance on one host with the same HTTP port exits 2
        (operator action needed) naming the address, why, and the key to
        change (http.address)."""
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            addr = "127.0.0.1:%d" % busy.getsockname()[1]
            path = self.write("seqgate.json", json.dumps({
                "data_dir": os.path.join(self.tmp.name, "data"),
                "http": {"address": addr},
                "kafka": {"bootstrap.servers": "127.0.0.1:1",
                          "group.id": "g"},
                "topics": {"t": {"output_topic": "o", "dlq_topic": "d"}}}))
            r = subprocess.run([SEQGATE, "--config", path],
                               capture_output=True, text=True, timeout=60)
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 2, out)
        exiting = [json.loads(l) for l in out.splitlines()
                   if l.startswith("{") and '"exiting"' in l]
        self.assertTrue(exiting, out)
        text = json.dumps(exiting[-1])
        self.assertIn(addr, text)
        self.assertIn("http.address", text)

    def test_check_config_port_in_use_and_data_dir_locked(self):
        """What stops the start must show in --check-config. An
        http.address another process listens on while no seqgate holds
        the data_dir is an error naming the key, exit 2 as at start. A
        data_dir a running seqgate holds (its seqgate.lock flocked) is the
        check before a reload or restart (`nginx -t` beside nginx): a
        warning naming the holder, and the port then a warning too (most
        likely that seqgate's), exit 0. The check probes and lets go: the
        port and the lock stay with their holders, and a free port and an
        unheld data_dir pass (nothing is created there)."""
        import fcntl
        data_dir = os.path.join(self.tmp.name, "data")
        os.makedirs(data_dir)
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        addr = "127.0.0.1:%d" % busy.getsockname()[1]
        conf = {"data_dir": data_dir, "http": {"address": addr},
                "kafka": {"bootstrap.servers": "127.0.0.1:1",
                          "group.id": "g"},
                "topics": {"t": {"output_topic": "o", "dlq_topic": "d"}}}
        path = self.write("seqgate.json", json.dumps(conf))
        lock = None
        try:
            # another process's port, no seqgate on the data_dir: an error
            r = run("--check-config", path)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertNotIn("config ok", r.stdout)
            errs = [l for l in r.stderr.splitlines()
                    if l.startswith("seqgate: config error: ")]
            self.assertEqual(len(errs), 1, r.stderr)
            self.assertIn("http.address", errs[0])
            self.assertIn(addr, errs[0])
            self.assertIn("in use", errs[0])
            self.assertIn("seqgate: 1 configuration error in", r.stderr)
            # a seqgate holds the data_dir: both are warnings, exit 0
            lock = open(os.path.join(data_dir, "seqgate.lock"), "w")
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            r = run("--check-config", path)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("config ok", r.stdout)
            self.assertNotIn("config error", r.stderr)
            warns = [l for l in r.stderr.splitlines()
                     if l.startswith("seqgate: config warning: ")]
            self.assertEqual(len(warns), 2, r.stderr)
            held = [l for l in warns if f"data_dir {data_dir}" in l]
            self.assertTrue(held, r.stderr)
            self.assertIn("in use by another seqgate process", held[0])
            self.assertIn("pid %d" % os.getpid(), held[0])
            port = [l for l in warns if "http.address" in l]
            self.assertTrue(port, r.stderr)
            self.assertIn(addr, port[0])
            # the holders keep what they hold
            with self.assertRaises(BlockingIOError):
                with open(os.path.join(data_dir, "seqgate.lock")) as f:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with socket.socket() as again:
                with self.assertRaises(OSError):
                    again.bind(("127.0.0.1", busy.getsockname()[1]))
        finally:
            busy.close()
            if lock:
                lock.close()
        # released: a free port and an unheld, not yet created data_dir
        conf["data_dir"] = os.path.join(self.tmp.name, "fresh")
        path = self.write("seqgate.json", json.dumps(conf))
        r = run("--check-config", path)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("config ok", r.stdout)
        self.assertFalse(os.path.exists(conf["data_dir"]))

    def test_one_instance_id_per_group_on_one_host(self):
        """Two seqgate processes on one host with one group.id and one
        instance_id (each its own data_dir and port, as the README allows)
        share a transactional id and would fence each other forever (exit
        1, restarted). The second is refused at start instead: exit 2, one
        line naming instance_id, group.id, the transactional id, the
        holder's pid and the fix, while the first keeps running.
        --check-config says the same: an error for a config whose data_dir
        no seqgate holds, a warning for the running instance's own config
        (the check before its reload). kill -9 of the first releases the
        claim: a new start passes it. No broker: the claim is taken before
        the first connection, and an unreachable broker is retried."""
        import signal
        import time

        def free_port():
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return s.getsockname()[1]

        def conf(name):
            return self.write(name + ".json", json.dumps({
                "data_dir": os.path.join(self.tmp.name, "data-" + name),
                "instance_id": "vm",
                "http": {"address": "127.0.0.1:%d" % free_port()},
                "kafka": {"bootstrap.servers": "127.0.0.1:1",
                          "group.id": "g-iid-%d" % os.getpid()},
                "topics": {"t": {"output_topic": "o", "dlq_topic": "d"}}}))

        def start(path):
            return subprocess.Popen([SEQGATE, "--config", path],
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)

        group = "g-iid-%d" % os.getpid()
        a_path, b_path = conf("a"), conf("b")
        a = start(a_path)
        procs = [a]
        try:
            # a holds the claim (and its data_dir) once its store is open
            deadline = time.monotonic() + 30
            lock = os.path.join(self.tmp.name, "data-a", "seqgate.lock")
            # (the claim is taken before the store opens; no probe before
            # that, which could refuse a itself)
            while time.monotonic() < deadline and a.poll() is None and \
                    not os.path.exists(lock):
                time.sleep(0.1)
            if a.poll() is not None:
                self.fail("the first exited: " + a.stdout.read())
            # the second start: refused at once, exit 2, the first runs on
            b = start(b_path)
            procs.append(b)
            try:
                out, _ = b.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                b.kill()
                self.fail("b runs: " + b.communicate()[0][:3000])
            self.assertEqual(b.returncode, 2, out)
            exiting = [json.loads(l) for l in out.splitlines()
                       if l.startswith("{") and '"exiting"' in l]
            self.assertEqual(len(exiting), 1, out)
            line = exiting[0]
            self.assertEqual(line["error"], "SG_ERR_CONFIG", line)
            self.assertEqual(line["exit_class"], "operator action needed")
            self.assertIn('instance_id "vm" in group.id "%s"' % group,
                          line["detail"])
            self.assertIn('transactional.id "%s-vm"' % group, line["detail"])
            self.assertIn("pid %d" % a.pid, line["detail"])
            self.assertIn("give each instance on a host its own instance_id"
                          " (or --instance-id)", line["detail"])
            self.assertFalse(os.path.exists(
                os.path.join(self.tmp.name, "data-b")), "opened nothing")
            self.assertIsNone(a.poll(), "the first keeps running")
            # --check-config: b's config (no seqgate on its data_dir): error
            r = run("--check-config", b_path)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            errs = [l for l in r.stderr.splitlines()
                    if l.startswith("seqgate: config error: ")]
            self.assertEqual(len(errs), 1, r.stderr)
            self.assertIn('instance_id "vm"', errs[0])
            self.assertIn("pid %d" % a.pid, errs[0])
            # a's own config beside it (a check before a reload): warnings
            r = run("--check-config", a_path)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("config ok", r.stdout)
            warns = [l for l in r.stderr.splitlines()
                     if l.startswith("seqgate: config warning: ")
                     and 'instance_id "vm"' in l]
            self.assertEqual(len(warns), 1, r.stderr)
            # kill -9: the kernel releases the claim, a new start passes it
            a.kill()
            a.wait(timeout=30)
            r = run("--check-config", b_path)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            b2 = start(b_path)
            procs.append(b2)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and b2.poll() is None and \
                    not os.path.exists(os.path.join(self.tmp.name, "data-b",
                                                    "seqgate.lock")):
                time.sleep(0.2)
            if b2.poll() is not None:
                self.fail("the new start exited: " + b2.stdout.read())
            r = run("--check-config", a_path)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("pid %d" % b2.pid, r.stderr)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    p.wait(timeout=30)
                if p.stdout:
                    p.stdout.close()

    def test_print_config_errors_as_check_config(self):
        path = self.write("bad.json", '{"data_dir": "/x", "topics": {}}')
        r = run("--print-config", path)
        self.assertEqual(r.returncode, 2)
        self.assertIn("seqgate: config error: kafka: required key is missing",
                      r.stderr)
        self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    SEQGATE = sys.argv.pop(1)
    unittest.main()
