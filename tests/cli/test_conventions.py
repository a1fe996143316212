#!/usr/bin/env python3
"""seqgatectl's command-line conventions, on every command (docs/seqgatectl.md
"seqgatectl's command line"): each command that `seqgatectl --help` lists
has its own `COMMAND --help` with the common options it takes
(--data-dir where it reads a store, -X where it talks to Kafka), one-line
usage errors naming the command (exit 2), and --data-dir / -X applied on
top of the configuration. Offline: no broker is reached (an -X property
the daemon refuses is refused before any client is made).

Run by meson test:  test_conventions.py SEQGATECTL
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ctlconf  # noqa: E402

CTL = None

# the commands and what they use: (reads a store, talks to Kafka)
COMMANDS = {
    "inspect": (True, False),
    "lookup": (True, False),
    "partitions": (True, False),
    "replay": (False, True),
    "release": (True, True),  # --data-dir with --wait
    "simulate": (False, False),
    "dlq summary": (False, True),
    "dlq tail": (False, True),
    "sizing": (True, False),
    "audit": (False, True),
}


def run(*args):
    return subprocess.run([CTL, *args], capture_output=True, text=True,
                          timeout=60)


class Conventions(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.conf = ctlconf.offline_config(self.tmp.name)

    def assert_usage_error(self, cmd, r, problem):
        self.assertEqual(r.returncode, 2, (cmd, r))
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 2, (cmd, r.stderr))
        self.assertTrue(lines[0].startswith(f"seqgatectl {cmd}: "), r.stderr)
        self.assertIn(problem, lines[0])
        self.assertEqual(lines[1],
                         f"Try 'seqgatectl {cmd} --help' for more information.")
        self.assertEqual(r.stdout, "")

    def test_listed(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        listed = re.findall(r"^  ([a-z]+(?: [a-z]+)?)(?=\s)", r.stdout, re.M)
        for cmd in COMMANDS:
            self.assertIn(cmd, listed, r.stdout)

    def test_command_help(self):
        for cmd, (store, kafka) in COMMANDS.items():
            r = run(*cmd.split(), "--help")
            self.assertEqual(r.returncode, 0, (cmd, r))
            out = r.stdout
            self.assertTrue(out.startswith(f"usage: seqgatectl {cmd} "), out)
            self.assertEqual(out.count("Exit status"), 1, (cmd, out))
            for opt in ("--config", "--log-level", "--json", "--help"):
                self.assertIn(opt, out, (cmd, opt))
            self.assertEqual("--data-dir DIR" in out, store, (cmd, out))
            self.assertEqual("-X NAME=VALUE" in out, kafka, (cmd, out))
            # every option of the usage lines is explained below them
            usage, _, rest = out.partition("\n\n")
            for opt in set(re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", usage)):
                self.assertRegex(rest, rf"(?m)^ +(-\w, )?{re.escape(opt)}\b",
                                 (cmd, opt))

    def test_dlq_help(self):
        r = run("dlq", "--help")
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("summary", r.stdout)
        self.assertIn("tail", r.stdout)
        self.assert_usage_error("dlq", run("dlq"), "summary or tail")
        self.assert_usage_error("dlq", run("dlq", "head"), "'head'")

    def test_usage_errors(self):
        for cmd in COMMANDS:
            self.assert_usage_error(cmd, run(*cmd.split(), "--bogus"),
                                    "unrecognized option '--bogus'")
            self.assert_usage_error(
                cmd, run(*cmd.split(), "--log-level", "loud"),
                "unknown level 'loud'")
            store, kafka = COMMANDS[cmd]
            if not store:
                self.assert_usage_error(
                    cmd, run(*cmd.split(), "--data-dir", "x"),
                    "unrecognized option '--data-dir'")
            if not kafka:
                self.assert_usage_error(cmd, run(*cmd.split(), "-X", "a=b"),
                                        "invalid option '-X'")
            extra = ["in.ndjson", "stray"] if cmd == "simulate" else ["stray"]
            self.assert_usage_error(cmd, run(*cmd.split(), *extra),
                                    "unexpected argument 'stray'")

    def test_usage_error_names_what_is_missing(self):
        """A usage error names the option that is missing, not one that was
        given ("--config and --id are required" after --config)."""
        for cmd, given, missing in (("lookup", ["--id", "e-1"], "--config"),
                                    ("lookup", ["--config", "c.json"], "--id"),
                                    ("release", ["--config", "c.json"],
                                     "--aggregate"),
                                    ("release", ["--aggregate", "a"],
                                     "--config")):
            r = run(cmd, *given)
            self.assert_usage_error(cmd, r, f"{missing} ")
            self.assertNotIn(given[0] + " ", r.stderr.splitlines()[0],
                             (cmd, given))

    def test_x_on_top_of_the_config(self):
        args = {"dlq summary": [], "dlq tail": [],
                "audit": ["--topic", "orders"]}
        for cmd, more in args.items():
            r = run(*cmd.split(), "--config", self.conf, *more,
                    "-X", "enable.auto.commit=true")
            self.assertEqual(r.returncode, 2, (cmd, r))
            self.assertIn("enable.auto.commit", r.stderr)
            self.assertIn("semantics §6", r.stderr)

    def test_inference_needs_one_choice(self):
        # two input topics with their own DLQ topics: nothing to infer,
        # and the usage error names the choices (no broker reached)
        with open(self.conf) as f:
            doc = json.load(f)
        doc["topics"]["payments"] = {"output_topic": "o2", "dlq_topic": "d2"}
        two = os.path.join(self.tmp.name, "two.json")
        with open(two, "w") as f:
            json.dump(doc, f)
        for cmd, more in (("inspect", []), ("lookup", ["--id", "e"]),
                          ("audit", []),
                          ("release", ["--aggregate", "a"])):
            r = run(*cmd.split(), "--config", two, *more)
            self.assert_usage_error(cmd, r, "--topic is required: the config "
                                            "has 2 input topics (orders, "
                                            "payments)")
        r = run("replay", "--config", two, "--all")
        self.assert_usage_error("replay", r, "--dlq is required: the config "
                                             "has 2 DLQ topics (d, d2)")
        # one topic, no store: release cannot find the partition
        r = run("release", "--config", self.conf, "--aggregate", "a")
        self.assert_usage_error("release", r, "--partition is required")

    def test_data_dir_replaces_data_dir(self):
        other = os.path.join(self.tmp.name, "other-store")
        for cmd, more in (("lookup", ["--id", "e-1"]),
                          ("inspect", ["--aggregate", "a-1"])):
            r = run(cmd, "--config", self.conf, "--data-dir", other, *more)
            self.assertNotEqual(r.returncode, 0, (cmd, r))
            self.assertIn("other-store", r.stderr, (cmd, r.stderr))
            self.assertNotIn(os.path.join(self.tmp.name, "none"), r.stderr)
        r = run("sizing", "--config", self.conf, "--data-dir", other,
                "--events-per-day", "10", "--json")
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(json.loads(r.stdout)["data_dir"], other)

    def test_data_dir_given_only_on_the_command_line(self):
        # a config without data_dir is complete when --data-dir names the
        # store; without --data-dir the key is still required
        with open(self.conf) as f:
            doc = json.load(f)
        del doc["data_dir"]
        bare = os.path.join(self.tmp.name, "no-data-dir.json")
        with open(bare, "w") as f:
            json.dump(doc, f)
        other = os.path.join(self.tmp.name, "other-store")
        r = run("sizing", "--config", bare, "--data-dir", other,
                "--events-per-day", "10", "--json")
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(json.loads(r.stdout)["data_dir"], other)
        r = run("lookup", "--config", bare, "--data-dir", other, "--id", "e")
        self.assertNotIn("data_dir: required", r.stderr, r)
        self.assertIn("other-store", r.stderr, r)
        r = run("sizing", "--config", bare, "--events-per-day", "10")
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("data_dir", r.stderr)


if __name__ == "__main__":
    CTL = sys.argv.pop(1)
    unittest.main()
