#!/usr/bin/env python3
"""seqgatectl simulate: the engine run offline over an NDJSON stream.

Run by meson test with the seqgatectl binary and the source root:
    test_simulate.py SEQGATECTL SOURCE_ROOT
Standard library only.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

CTL = None
ROOT = None

CONFIG = {
    "data_dir": "/nonexistent/seqgate-simulate-test",
    "kafka": {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"},
    "topics": {
        "orders": {
            "output_topic": "orders.clean",
            "dlq_topic": "orders.dlq",
            "ordering": {"mode": "strict", "gap_timeout_ms": 1000,
                         "gap_policy": "dlq"},
            "state_machine": {
                "initial": "NEW",
                "states": ["NEW", "CREATED", "PAID", "SHIPPED"],
                "transitions": [
                    {"type": "order.created", "from": ["NEW"],
                     "to": "CREATED"},
                    {"type": "order.paid", "from": ["CREATED"],
                     "to": "PAID"},
                    {"type": "order.shipped", "from": ["PAID"],
                     "to": "SHIPPED"},
                ],
            },
        }
    },
}


def read(path):
    with open(path) as f:
        return f.read()


def ev(agg, eid, typ, seq, data=None):
    """A CloudEvents binary-mode record."""
    return {
        "key": agg,
        "headers": {"ce_specversion": "1.0", "ce_id": eid,
                    "ce_source": "/shop", "ce_type": typ,
                    "ce_sequence": str(seq)},
        "value": data if data is not None else {"id": eid},
    }


class Sim(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.simtmp = os.path.join(self.tmp.name, "simtmp")
        os.mkdir(self.simtmp)
        self.conf = self.write("config.json", json.dumps(CONFIG))

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def stream(self, lines, name="in.ndjson"):
        return self.write(name, "".join(json.dumps(l) + "\n" for l in lines))

    def run_ctl(self, *args):
        env = dict(os.environ, TMPDIR=self.simtmp)
        return subprocess.run([CTL, "simulate", *args], capture_output=True,
                              text=True, env=env, timeout=120)

    def verdicts(self, lines, conf=None):
        p = self.run_ctl("--config", conf or self.conf, "--json",
                         self.stream(lines))
        self.assertEqual(p.returncode, 0, p.stderr)
        # the temporary store is removed at exit
        self.assertEqual(os.listdir(self.simtmp), [])
        return [json.loads(l) for l in p.stdout.splitlines()]

    def test_each_verdict_kind(self):
        out = self.verdicts([
            ev("o-1", "e1", "order.created", 1),           # applied
            ev("o-1", "e1", "order.created", 1),           # duplicate
            ev("o-1", "e1", "order.created", 1, {"x": 2}),  # conflict
            ev("o-1", "e3", "order.shipped", 3),           # parked
            ev("o-1", "e2", "order.paid", 2),              # applied + drain
            ev("o-1", "e9", "order.paid", 2),              # stale
            ev("o-2", "e4", "order.shipped", 1),           # illegal
            {"key": "o-3", "headers": {"ce_specversion": "1.0",
                                       "ce_id": "e5", "ce_source": "/shop",
                                       "ce_type": "order.created",
                                       "ce_sequence": "x1"},
             "value": "raw bytes"},                         # malformed
        ])
        got = [(o["kind"], o["verdict"], o.get("aggregate"),
                o.get("version"), o.get("reason")) for o in out]
        self.assertEqual(got, [
            ("record", "applied", "o-1", 1, None),
            ("record", "duplicate", "o-1", 1, None),
            ("record", "dlq", "o-1", 1, "idempotency_conflict"),
            ("record", "parked", "o-1", 3, None),
            ("record", "applied", "o-1", 2, None),
            ("effect", "released", "o-1", 3, None),
            ("record", "dlq", "o-1", 2, "stale_version"),
            ("record", "dlq", "o-2", 1, "illegal_transition"),
            # the aggregate parsed (the record key): the DLQ record names
            # it (semantics §3 row 1)
            ("record", "dlq", "o-3", None, "malformed"),
        ])
        self.assertEqual(out[3]["waiting_for"], 2)
        self.assertEqual([o["offset"] for o in out],
                         [0, 1, 2, 3, 4, 3, 5, 6, 7])
        self.assertEqual(out[5]["line"], 5)  # drained by line 5's record

    def test_readable_output(self):
        p = self.run_ctl("--config", self.conf, self.stream([
            ev("o-1", "e1", "order.created", 1),
            ev("o-1", "e3", "order.shipped", 3),
            ev("o-1", "e2", "order.paid", 2),
            ev("o-1", "e9", "order.paid", 2),
        ]))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0], "offset 0  v1 o-1  applied")
        self.assertEqual(lines[1], "offset 1  v3 o-1  parked (waiting for v2)")
        self.assertEqual(lines[2], "offset 2  v2 o-1  applied")
        self.assertEqual(lines[3],
                         "        v3 o-1  applied (released from park)")
        self.assertTrue(lines[4].startswith("offset 3  v2 o-1  dlq "
                                            "stale_version ("), lines[4])

    def test_advance_fires_gap_timeout(self):
        out = self.verdicts([
            {"clock": "2026-01-01T00:00:00Z"},
            ev("o-1", "e1", "order.created", 1),
            ev("o-1", "e3", "order.shipped", 3),
            {"advance_ms": 999},
            {"advance_ms": 1},
        ])
        self.assertEqual([o["kind"] for o in out],
                         ["clock", "record", "record", "clock", "clock",
                          "effect"])
        self.assertEqual(out[3]["time"], "2026-01-01T00:00:00.999Z")
        eff = out[5]
        self.assertEqual((eff["verdict"], eff["reason"], eff["aggregate"],
                          eff["version"], eff["offset"], eff["line"]),
                         ("dlq", "gap_timeout", "o-1", 3, 1, 5))

    def test_expect_equal_and_different(self):
        lines = [ev("o-1", "e1", "order.created", 1),
                 ev("o-1", "e2", "order.paid", 2)]
        inp = self.stream(lines)
        p = self.run_ctl("--config", self.conf, "--json", inp)
        self.assertEqual(p.returncode, 0, p.stderr)
        good = self.write("good.ndjson", p.stdout)
        p = self.run_ctl("--config", self.conf, "--expect", good, inp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("OK: 2 verdicts match", p.stdout)
        # member order does not count
        reordered = "".join(
            json.dumps(dict(reversed(list(json.loads(l).items())))) + "\n"
            for l in read(good).splitlines())
        p = self.run_ctl("--config", self.conf, "--expect",
                         self.write("reordered.ndjson", reordered), inp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        bad = read(good).replace('"verdict":"applied"',
                                        '"verdict":"parked"', 1)
        bad_path = self.write("bad.ndjson", bad)
        p = self.run_ctl("--config", self.conf, "--expect", bad_path, inp)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("verdict 1 differs", p.stdout)
        self.assertIn('- expected {"kind":"record","line":1,'
                      '"verdict":"parked"', p.stdout)
        self.assertIn('+ actual   {"kind":"record","line":1,'
                      '"verdict":"applied"', p.stdout)
        self.assertIn("FAIL: 1 of the verdicts differ", p.stdout)
        # a verdict missing from the file is a difference too
        short = self.write("short.ndjson", read(good).splitlines()[0]
                           + "\n")
        p = self.run_ctl("--config", self.conf, "--expect", short, inp)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("verdict 2 not expected", p.stdout)

    def test_kafka_snapshot_source(self):
        """A request record of a kafka snapshot source is an effect with
        its request_id; a snapshot step answers it on the reply topic."""
        conf = json.loads(json.dumps(CONFIG))
        topic = conf["topics"]["orders"]
        del topic["state_machine"]
        topic["snapshot"] = {"source": "kafka", "request_topic": "snap.req",
                             "reply_topic": "snap.rep", "timeout_ms": 5000}
        out = self.verdicts([
            ev("o-1", "e1", "t", 1),
            ev("o-1", "e3", "t", 3),
            ev("o-1", "e4", "t", 4),
            {"advance_ms": 1000},
            {"snapshot": {"aggregate": "o-1",
                          "body": {"version": 3, "data": {"a": 3}}}},
            ev("o-1", "e5", "t", 5),
        ], conf=self.write("kafka.json", json.dumps(conf)))
        got = [(o["kind"], o.get("verdict"), o.get("version"), o.get("detail"))
               for o in out]
        self.assertEqual(got, [
            ("record", "applied", 1, None),
            ("record", "parked", 3, None),
            ("record", "parked", 4, None),
            ("clock", None, None, None),
            ("effect", "snapshot_request", None, None),
            ("record", "snapshot_reply", None, "applied"),
            ("effect", "snapshot", 3, None),
            ("effect", "released", 4, None),
            ("record", "applied", 5, None),
        ])
        req, reply = out[4], out[5]
        self.assertEqual(req["aggregate"], "o-1")
        self.assertTrue(req["request_id"].startswith("orders/0/"))
        self.assertEqual(reply["request_id"], req["request_id"])
        self.assertEqual((reply["topic"], reply["offset"]), ("snap.rep", 0))

    def test_full_map_grows_as_the_loop_does(self):
        """A store that outgrows its map is grown and the batch judged
        again as often as the Kafka loop does (lib/drive.c): the verdicts
        are those of a map that never filled, state kept across the
        growths (the parked events are released)."""
        conf = json.loads(json.dumps(CONFIG))
        del conf["topics"]["orders"]["state_machine"]
        big = self.write("big.json", json.dumps(conf))
        conf["store"] = {"map_size_bytes": 1048576,
                         "map_growth_bytes": 1048576}
        small = self.write("small.json", json.dumps(conf))
        pad = "x" * 600
        lines = [ev("a-%d" % i, "e%d-2" % i, "t", 2, {"pad": pad})
                 for i in range(3000)]
        lines += [ev("a-%d" % i, "e%d-1" % i, "t", 1) for i in range(0, 3000,
                                                                     300)]
        lines += [ev("a-0", "e0-2", "t", 2, {"pad": pad})]
        inp = self.stream(lines)
        want = self.verdicts(lines, conf=big)
        p = self.run_ctl("--config", small, "--json", inp)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertEqual(os.listdir(self.simtmp), [])
        got = [json.loads(l) for l in p.stdout.splitlines()]
        self.assertEqual(len(got), len(want))
        self.assertEqual(got, want)
        verdicts = [o["verdict"] for o in got]
        self.assertEqual(verdicts.count("parked"), 3000)
        self.assertEqual(verdicts.count("released"), 10)
        self.assertEqual(verdicts[-1], "duplicate")

    def test_paused_record_judged_after_pause_retry(self):
        """A record a park cap pauses is kept and judged again
        pause_retry_ms later, as the loop re-reads it; meanwhile a gap
        deadline that passes frees the park."""
        conf = json.loads(json.dumps(CONFIG))
        topic = conf["topics"]["orders"]
        del topic["state_machine"]
        topic["ordering"]["max_parked_total"] = 1
        topic["ordering"]["max_parked_per_aggregate"] = 1
        topic["ordering"]["on_park_overflow"] = "pause"
        conf["pause_retry_ms"] = 600
        path = self.write("pause.json", json.dumps(conf))
        out = self.verdicts([
            {"clock": "2026-01-01T00:00:00Z"},
            ev("o-1", "e1", "t", 1),
            ev("o-1", "e3", "t", 3),   # parked: the cap is full
            ev("o-2", "f2", "t", 2),   # paused at the cap
        ], conf=path)
        got = [(o["kind"], o.get("verdict"), o.get("aggregate"),
                o.get("reason")) for o in out]
        self.assertEqual(got[:4], [
            ("clock", None, None, None),
            ("record", "applied", "o-1", None),
            ("record", "parked", "o-1", None),
            ("record", "paused", "o-2", None),
        ])
        self.assertIn(("effect", "dlq", "o-1", "gap_timeout"), got[4:])
        self.assertEqual(got[-1], ("record", "parked", "o-2", None))

    def test_malformed_line_exits_2_naming_it(self):
        inp = self.write("in.ndjson",
                         json.dumps(ev("o-1", "e1", "order.created", 1))
                         + "\n\n{\"key\": \"o-1\", \"valu\": 1}\n")
        p = self.run_ctl("--config", self.conf, inp)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(inp + ":3: unknown member \"valu\"", p.stderr)
        inp = self.write("in2.ndjson", "{\"key\": \"o-1\"\n")
        p = self.run_ctl("--config", self.conf, inp)
        self.assertEqual(p.returncode, 2)
        self.assertIn(inp + ":1: not a JSON object", p.stderr)
        inp = self.stream([{"advance_ms": -5}])
        p = self.run_ctl("--config", self.conf, inp)
        self.assertEqual(p.returncode, 2)
        self.assertIn(":1: \"advance_ms\" is not", p.stderr)
        inp = self.stream([{"snapshot": {"aggregate": "o-9"}}])
        p = self.run_ctl("--config", self.conf, inp)
        self.assertEqual(p.returncode, 2)
        self.assertIn(":1: no snapshot request for aggregate o-9", p.stderr)
        p = self.run_ctl("--config", self.conf)
        self.assertEqual(p.returncode, 2)


def demo_section(text, name):
    out, on = [], False
    for line in text.splitlines():
        if line.startswith("["):
            on = line == "[" + name + "]"
        elif on and line.strip() and not line.startswith("#"):
            out.append(line)
    return out


class Demo(unittest.TestCase):
    """simulate on the demo's stream gives the demo's verdicts
    (deploy/demo/expected.txt, which ./deploy/demo.sh checks against
    the real run)."""

    def test_demo_stream(self):
        demo = os.path.join(ROOT, "deploy", "demo")
        p = subprocess.run(
            [CTL, "simulate", "--config", os.path.join(demo, "config.json"),
             "--json", os.path.join(demo, "stream.ndjson")],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        clean, dlq = [], []
        for o in map(json.loads, p.stdout.splitlines()):
            v = o.get("verdict")
            if v in ("applied", "released"):
                clean.append("%s v%d %s" % (o["aggregate"], o["version"],
                                            o["type"]))
            elif v == "snapshot":
                clean.append("%s S%d snapshot %s" % (o["aggregate"],
                                                     o["version"],
                                                     o["state"]))
            elif v == "dlq":
                dlq.append("%s v%d %s %s" % (o["aggregate"], o["version"],
                                             o["type"], o["reason"]))
        with open(os.path.join(demo, "expected.txt")) as f:
            exp = f.read()
        self.assertEqual(clean, demo_section(exp, "clean"))
        self.assertEqual(dlq, demo_section(exp, "dlq"))


if __name__ == "__main__":
    CTL, ROOT = os.path.abspath(sys.argv[1]), sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])
