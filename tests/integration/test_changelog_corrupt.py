"""A changelog record seqgate did not write stops the restore (exactly_once).

The changelog topic is input from the network: a restore decodes every
record in full before it writes anything (docs/guarantees.md "Corrupt changelog
records"). test_eos_corrupt_changelog_record_stops_restore: instance A parks
an event and stops; a parked-event record whose header block claims
2^32-1 headers is then appended to the changelog; instance B, with an empty
data_dir, restores the whole changelog: it must log `fatal` naming the
changelog topic, partition and offset of that record, log `exiting` with
SG_ERR_CORRUPT, exit 2 (operator action needed: the record stays in the
changelog, so a restart cannot help) and produce nothing.
"""

from __future__ import annotations

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name
from seqgate_proc import Seqgate, make_config, wait_until
from test_exactly_once import Probe, ce, changelog_of, public

SG_DB_PARKED = 3


def header_block_offset(value: bytes) -> int:
    """Offset of a parked value's header block: the tag byte 0x03 (store
    format 3), 3 × i64, the 16-byte key hash, then type, key and value, each
    a u32 length (0xffffffff: null) and bytes."""
    assert value[0] == 0x03, value[:8]
    off = 1 + 24 + 16
    for _ in range(3):
        n = int.from_bytes(value[off:off + 4], "big")
        off += 4 + (0 if n == 0xFFFFFFFF else n)
    return off + 4


def test_eos_corrupt_changelog_record_stops_restore(bootstrap, seqgate_bin,
                                                     tmp_path):
    t_in, t_out, t_dlq = (unique_name("eosbad-in"), unique_name("eosbad-out"),
                          unique_name("eosbad-dlq"))
    group = unique_name("sg-eosbad")
    create_topics(bootstrap, {t_in: 1, t_out: 1, t_dlq: 1})
    produce(bootstrap, t_in, [public(ce("agg-1", 1)), public(ce("agg-1", 3))])

    def conf(instance, data):
        return make_config(bootstrap=bootstrap, group=group, instance=instance,
                           data_dir=str(tmp_path / data), input_topic=t_in,
                           output_topic=t_out, dlq_topic=t_dlq,
                           gap_timeout_ms=600000, guarantee="exactly_once")

    probe = Probe(bootstrap, group)
    a = Seqgate(seqgate_bin, conf("eos-bad-a", "data-a"), tmp_path / "run-a")
    try:
        a.start()
        end = end_offsets(bootstrap, t_in)
        wait_until(lambda: probe.committed(t_in, 1) == end, 60,
                   "instance A's commit", 0.25,
                   on_timeout=lambda: "\n" + a.log_tail())
        assert a.stop() == 0, a.log_tail()
    finally:
        a.cleanup()
        probe.close()
    out_before = len(consume_all(bootstrap, t_out, timeout_s=30))
    assert out_before == 1

    cl = changelog_of(group, t_in)
    parked = [r for r in consume_all(bootstrap, cl, timeout_s=30)
              if r["key"] and r["key"][0] == SG_DB_PARKED and r["value"]]
    assert len(parked) == 1, parked
    bad = bytearray(parked[0]["value"])
    hb = header_block_offset(bad)
    bad[hb:hb + 4] = b"\xff\xff\xff\xff"
    [(_, bad_offset)] = produce(bootstrap, cl, [{"key": parked[0]["key"],
                                                 "value": bytes(bad),
                                                 "partition": 0}])

    b = Seqgate(seqgate_bin, conf("eos-bad-b", "data-b"), tmp_path / "run-b")
    try:
        b.start(wait_assigned=False)
        rc = b.wait_exit(90)
    finally:
        b.cleanup()
    assert rc == 2, b.log_tail()
    fatal = b.events("fatal")
    assert fatal, b.log_tail()
    detail = fatal[0]["detail"]
    assert f"restore: changelog {cl} [0] offset {bad_offset}: " in detail, detail
    assert "header block" in detail, detail
    exiting = b.events("exiting")
    assert exiting and exiting[-1]["error"] == "SG_ERR_CORRUPT", b.log_tail()
    assert exiting[-1]["exit_status"] == 2, b.log_tail()
    assert not b.events("restore_done"), b.log_tail()
    assert len(consume_all(bootstrap, t_out, timeout_s=20)) == out_before
