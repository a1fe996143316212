#!/usr/bin/env python3
"""seqgatectl sizing without a store: the documented estimates, each term
printed (semantics §8: 1e8 events/day x 7 days = 7e8 live keys, x 55 B in
store format 3 = 38.5 GB; the seed counted ~200 B, 140 GB).

Run by meson test:  test_sizing.py SEQGATECTL
(tests/integration/test_seqgatectl_dlq.py measures a daemon's real store.)
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ctlconf  # noqa: E402

CTL = None


class Sizing(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.conf = ctlconf.offline_config(self.tmp.name)

    def ctl(self, *args):
        return subprocess.run([CTL, "sizing", "--config", self.conf, *args],
                              capture_output=True, text=True, timeout=60)

    def test_estimates_without_a_store(self):
        p = self.ctl("--events-per-day", "100000000", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        z = json.loads(p.stdout)
        self.assertFalse(z["store"])
        self.assertEqual(z["dedup_ttl_ms"], 604800000)
        self.assertEqual(z["dedup"]["records"], 7e8)
        self.assertFalse(z["dedup"]["measured"])
        self.assertEqual(z["dedup"]["bytes_per_record"], 55)
        self.assertEqual(z["dedup"]["bytes"], 38.5e9)
        self.assertEqual(z["aggregates"]["bytes"], 0)
        # a changelog record: key 17 B + value 30 B + framing 36 B
        self.assertEqual(z["changelog"]["bytes_per_dedup_record"], 83)
        self.assertEqual(z["changelog"]["bytes"], 58.1e9)
        self.assertEqual(z["total_bytes"], 96.6e9)
        # the basis is said; the documented estimates need no warning
        self.assertTrue(z["basis"].startswith("the documented estimates"))
        self.assertTrue(z["enough"])
        self.assertIsNone(z["warning"])

    def test_readable_terms(self):
        p = self.ctl("--events-per-day", "100000000", "--aggregates",
                     "1000000")
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout
        self.assertIn("every size below is the documented estimate", out)
        # the TTL by the name the configuration file gives it (a topic's
        # dedup block: dedup.ttl_ms), never a name no file has
        self.assertIn("dedup:      100000000 events/day x 7.00 days "
                      "(dedup.ttl_ms 604800000) x 55 B per record "
                      "(ESTIMATE) = 38.50 GB", out)
        self.assertNotIn("dedup_ttl_ms", out)
        self.assertIn("aggregates: 1000000 aggregates (--aggregates) x "
                      "45 B per record (ESTIMATE) = 45.00 MB", out)
        self.assertIn("total:      96.73 GB", out)

    def old_store(self, path):
        """An LMDB environment at PATH shaped like a store of format 1 (the
        databases, no format number), written with lmdb-utils' mdb_load."""
        os.makedirs(path)
        dump = "".join(
            "VERSION=3\nformat=bytevalue\ndatabase=%s\ntype=btree\n"
            "HEADER=END\n 78\n \nDATA=END\n" % db
            for db in ("dedup", "expiry", "agg", "parked", "since", "meta",
                       "snapreq", "snapdue"))
        subprocess.run(["mdb_load", "-f", "/dev/stdin", path], input=dump,
                       text=True, check=True, capture_output=True)

    def test_old_format_store_says_what_to_do(self):
        # an unconverted store: what it is, start seqgate on it once
        old = os.path.join(self.tmp.name, "old")
        self.old_store(old)
        p = self.ctl("--data-dir", old, "--events-per-day", "10")
        self.assertEqual(p.returncode, 1, p)
        self.assertIn("earlier store format", p.stderr)
        self.assertIn("start seqgate on this data_dir once", p.stderr)
        self.assertIn("--data-dir a directory without one", p.stderr)
        self.assertEqual(p.stderr.count(old + " "), 1, p.stderr)
        # the copy seqgate set aside at the upgrade: not a store to size
        kept = os.path.join(self.tmp.name, "data", "store-format-1-1764620000")
        self.old_store(kept)
        p = self.ctl("--data-dir", kept + "/", "--events-per-day", "10")
        self.assertEqual(p.returncode, 1, p)
        self.assertIn("set aside", p.stderr)
        self.assertIn("the data_dir seqgate runs on", p.stderr)

    def test_usage(self):
        self.assertEqual(self.ctl().returncode, 2)
        self.assertEqual(self.ctl("--events-per-day", "x").returncode, 2)


if __name__ == "__main__":
    CTL = os.path.abspath(sys.argv[1])
    unittest.main(argv=[sys.argv[0], "-v"])
