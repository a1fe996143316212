package io.seqgate.bench.streams;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The job, as seqgate does it on the benchmark's input (semantics §3), one
 * record at a time, with state in three persistent key-value stores
 * (RocksDB, changelogged):
 *
 * <ol>
 * <li>envelope: headers ce_id, ce_source, ce_type, ce_sequence and a record
 *     key (the aggregate) must be there, ce_sequence a decimal unsigned
 *     64-bit integer; else DLQ {@code malformed};</li>
 * <li>idempotency key (input topic + ce_source + ce_id) seen and not expired:
 *     same digest (SHA-256 of the value) → duplicate, dropped; other digest →
 *     DLQ {@code idempotency_conflict};</li>
 * <li>{@code v <= L} → DLQ {@code stale_version}; {@code v > L + max jump} →
 *     DLQ {@code version_jump};</li>
 * <li>{@code v == L+1}: the state machine (NEW -order.created-> OPEN
 *     -order.updated-> OPEN -order.closed-> CLOSED) legal → apply (output =
 *     the input record + {@code __seqgate.source: topic/partition/offset}),
 *     else DLQ {@code illegal_transition} / {@code unknown_event_type}; L = v
 *     either way; then drain parked L+1, L+2, … through the same step;</li>
 * <li>{@code v > L+1} → park (another event already parked at v → DLQ
 *     {@code version_conflict}).</li>
 * </ol>
 *
 * With peer.commit.every.records = N > 0 it requests a commit every N
 * records its stream thread processed, so that a transaction covers N
 * records as a seqgate batch of batch.max_records does; commit.interval.ms
 * still bounds the time between commits.
 *
 * Every verdict but malformed and conflict records the idempotency key with
 * its digest and first-seen time (a duplicate of a parked event is a
 * duplicate). TTL (semantics §8: expiry incremental, never a full scan at
 * once): a key older than the TTL counts as unseen on lookup (exact), and a
 * wall-clock punctuator deletes expired keys, walking the store from a cursor
 * a bounded number of entries per punctuation.
 *
 * Not implemented (never triggered by the benchmark's input, which only
 * swaps adjacent versions): gap timeouts and quarantine, park caps,
 * snapshots, release, replay, latest_wins/none ordering.
 *
 * One instance per task; Kafka Streams calls it from one thread.
 */
final class Gate implements Processor<byte[], byte[], byte[], byte[]> {
    static final String DEDUP = "dedup";
    static final String AGG = "agg";
    static final String PARKED = "parked";
    static final String OUTPUT = "output";
    static final String DLQ = "dlq";

    static final String[] STATES = {"NEW", "OPEN", "CLOSED"};
    private static final byte NEW = 0;
    private static final byte OPEN = 1;
    private static final byte CLOSED = 2;
    private static final byte ILLEGAL = -1;
    private static final byte UNKNOWN = -2;
    private static final byte[] T_CREATED = ascii("order.created");
    private static final byte[] T_UPDATED = ascii("order.updated");
    private static final byte[] T_CLOSED = ascii("order.closed");

    private static final String H_SOURCE = "__seqgate.source";
    private static final String H_ERR = "__seqgate.errors.";

    /** Records this stream thread processed since it last requested a
     *  commit (its tasks share one transaction under exactly_once_v2). */
    private static final ThreadLocal<long[]> SINCE_COMMIT = ThreadLocal.withInitial(() -> new long[1]);

    private final Settings settings;
    private final Stats stats;
    private final MessageDigest md = Codec.sha256();
    private final long[] version = new long[1];

    private ProcessorContext<byte[], byte[]> ctx;
    private KeyValueStore<Bytes, byte[]> dedup;
    private KeyValueStore<Bytes, byte[]> aggs;
    private KeyValueStore<Bytes, byte[]> parked;
    private Bytes sweepCursor;       // last key the TTL sweep examined, null = from the start
    private byte[] topicBytes;       // of the current input topic
    private String topicName;

    Gate(Settings settings, Stats stats) {
        this.settings = settings;
        this.stats = stats;
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    @Override
    public void init(ProcessorContext<byte[], byte[]> context) {
        ctx = context;
        dedup = context.getStateStore(DEDUP);
        aggs = context.getStateStore(AGG);
        parked = context.getStateStore(PARKED);
        context.schedule(Duration.ofMillis(settings.sweepIntervalMs),
                PunctuationType.WALL_CLOCK_TIME, this::sweep);
    }

    /** The state machine of the benchmark's seqgate configuration:
     *  the next state, or ILLEGAL / UNKNOWN. */
    static byte transition(byte state, byte[] type) {
        if (java.util.Arrays.equals(type, T_UPDATED)) {
            return state == OPEN ? OPEN : ILLEGAL;
        }
        if (java.util.Arrays.equals(type, T_CREATED)) {
            return state == NEW ? OPEN : ILLEGAL;
        }
        if (java.util.Arrays.equals(type, T_CLOSED)) {
            return state == OPEN ? CLOSED : ILLEGAL;
        }
        return UNKNOWN;
    }

    private static byte[] header(Headers hs, String name) {
        Header h = hs.lastHeader(name);
        return h == null ? null : h.value();
    }

    @Override
    public void process(Record<byte[], byte[]> r) {
        stats.records.increment();
        if (settings.commitEveryRecords > 0) {
            long[] n = SINCE_COMMIT.get();
            if (++n[0] >= settings.commitEveryRecords) {
                // seqgate-sized transactions: commit after this record
                n[0] = 0;
                ctx.commit();
            }
        }
        RecordMetadata m = ctx.recordMetadata().orElseThrow();
        if (!m.topic().equals(topicName)) {
            topicName = m.topic();
            topicBytes = topicName.getBytes(StandardCharsets.UTF_8);
        }
        Headers hs = r.headers();
        byte[] id = header(hs, "ce_id");
        byte[] source = header(hs, "ce_source");
        byte[] type = header(hs, "ce_type");
        byte[] seq = header(hs, "ce_sequence");
        String missing = r.key() == null ? "record key (aggregate)"
                : id == null ? "ce_id" : source == null ? "ce_source"
                : type == null ? "ce_type" : seq == null ? "ce_sequence" : null;
        if (missing != null || !Codec.parseVersion(seq, version)) {
            stats.malformed.increment();
            dlq(r, m, "malformed", missing != null ? missing + " missing"
                    : "ce_sequence is not a decimal unsigned 64-bit integer", null, null);
            return;
        }
        long v = version[0];
        long now = ctx.currentSystemTimeMs();

        Bytes ik = Bytes.wrap(Codec.idempotencyKey(md, topicBytes, source, id));
        byte[] digest = Codec.digest(md, r.value());
        byte[] seen = dedup.get(ik);
        if (seen != null && !expired(seen, now)) {
            if (Codec.dedupSameDigest(seen, digest)) {
                stats.dedupHits.increment();
            } else {
                stats.conflicts.increment();
                dlq(r, m, "idempotency_conflict",
                        "idempotency key seen with another payload digest", null, null);
            }
            return;
        }

        Bytes ak = Bytes.wrap(r.key());
        Codec.Agg a = Codec.Agg.decode(aggs.get(ak));
        byte verdict;
        if (Long.compareUnsigned(v, a.last) <= 0) {
            stats.stale.increment();
            dlq(r, m, "stale_version", a.hasLast
                    ? "version " + Long.toUnsignedString(v) + " <= last applied version "
                            + Long.toUnsignedString(a.last)
                    : "version " + Long.toUnsignedString(v) + " < first_version 1", a, v);
            verdict = Codec.VERDICT_DLQ;
        } else if (Long.compareUnsigned(v - a.last, settings.maxVersionJump) > 0) {
            dlq(r, m, "version_jump", "version " + Long.toUnsignedString(v) + " > "
                    + Long.toUnsignedString(a.last) + " + max_version_jump "
                    + settings.maxVersionJump, a, v);
            verdict = Codec.VERDICT_DLQ;
        } else if (v == a.last + 1) {
            verdict = applyOne(r.key(), r.value(), r.timestamp(), hs, m.topic(), m.partition(),
                    m.offset(), type, a, v) ? Codec.VERDICT_APPLIED : Codec.VERDICT_DLQ;
            drain(ak, a);
            aggs.put(ak, a.encode());
        } else {
            Bytes pk = Bytes.wrap(Codec.parkedKey(r.key(), v));
            if (parked.get(pk) != null) {
                dlq(r, m, "version_conflict", "another event is parked at version "
                        + Long.toUnsignedString(v), a, v);
                verdict = Codec.VERDICT_DLQ;
            } else {
                parked.put(pk, Codec.encodeParked(m.topic(), m.partition(), m.offset(),
                        r.timestamp(), now, r.value(), hs));
                if (a.parked == 0) {
                    stats.gaps.increment();
                }
                a.parked++;
                stats.parked.increment();
                stats.parkedTotal.increment();
                aggs.put(ak, a.encode());
                verdict = Codec.VERDICT_PARKED;
            }
        }
        dedup.put(ik, Codec.dedupValue(digest, now, verdict));
    }

    private boolean expired(byte[] dedupValue, long now) {
        return Codec.dedupFirstSeen(dedupValue) + settings.dedupTtlMs <= now;
    }

    /** Rows 6–7 for the event at L+1: applies it (forward to the output) or
     *  dead-letters it; L = v either way. Returns true when applied. */
    private boolean applyOne(byte[] key, byte[] value, long timestamp, Headers hs, String topic,
                             int partition, long offset, byte[] type, Codec.Agg a, long v) {
        byte next = transition(a.state, type);
        boolean ok = next >= 0;
        if (ok) {
            Record<byte[], byte[]> out = new Record<>(key, value, timestamp, hs);
            out.headers().add(H_SOURCE, (topic + "/" + partition + "/" + offset)
                    .getBytes(StandardCharsets.UTF_8));
            InputPartition.set(partition);
            ctx.forward(out, OUTPUT);
            a.state = next;
            stats.applied.increment();
        } else {
            stats.illegal.increment();
            String t = new String(type, StandardCharsets.UTF_8);
            Record<byte[], byte[]> bad = new Record<>(key, value, timestamp, hs);
            dlqRecord(bad, topic, partition, offset, timestamp,
                    next == UNKNOWN ? "unknown_event_type" : "illegal_transition",
                    next == UNKNOWN ? "event type " + t + " unknown to the state machine"
                            : "no transition for " + t + " from " + STATES[a.state], a, v);
        }
        a.last = v;
        a.hasLast = true;
        return ok;
    }

    /** Drains parked L+1, L+2, … (row 6's "then drain"). */
    private void drain(Bytes ak, Codec.Agg a) {
        while (a.parked > 0 && a.last != -1L) {
            long v = a.last + 1;
            Bytes pk = Bytes.wrap(Codec.parkedKey(ak.get(), v));
            byte[] pv = parked.get(pk);
            if (pv == null) {
                return;
            }
            parked.delete(pk);
            a.parked--;
            stats.parked.decrement();
            Codec.Parked p = Codec.decodeParked(pv);
            byte[] type = header(p.headers, "ce_type");
            applyOne(ak.get(), p.value, p.timestamp, p.headers, p.topic, p.partition, p.offset,
                    type == null ? new byte[0] : type, a, v);
        }
    }

    private void dlq(Record<byte[], byte[]> r, RecordMetadata m, String reason, String detail,
                     Codec.Agg a, Long v) {
        dlqRecord(r, m.topic(), m.partition(), m.offset(), r.timestamp(), reason, detail, a, v);
    }

    /** A DLQ record: the input record unchanged plus __seqgate.errors.*
     *  headers (docs/dlq.md "DLQ headers"); partitioned by the producer's
     *  default (murmur2 on the key). */
    private void dlqRecord(Record<byte[], byte[]> r, String topic, int partition, long offset,
                           long timestamp, String reason, String detail, Codec.Agg a, Long v) {
        Record<byte[], byte[]> out = r.withHeaders(r.headers());
        Headers h = out.headers();
        h.add(H_ERR + "reason", utf8(reason));
        h.add(H_ERR + "detail", utf8(detail));
        h.add(H_ERR + "topic", utf8(topic));
        h.add(H_ERR + "partition", utf8(Integer.toString(partition)));
        h.add(H_ERR + "offset", utf8(Long.toString(offset)));
        h.add(H_ERR + "timestamp", utf8(Long.toString(timestamp)));
        h.add(H_ERR + "group", utf8(settings.group));
        if (r.key() != null) {
            h.add(H_ERR + "aggregate", r.key());
        }
        if (a != null) {
            h.add(H_ERR + "expected_version", utf8(Long.toUnsignedString(a.last + 1)));
            h.add(H_ERR + "state", utf8(STATES[a.state]));
        }
        if (v != null) {
            h.add(H_ERR + "actual_version", utf8(Long.toUnsignedString(v)));
        }
        h.add(H_ERR + "instance", utf8(settings.instance));
        stats.dlq.increment();
        ctx.forward(out, DLQ);
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * The TTL sweep (a wall-clock punctuation): examines at most
     * settings.sweepMax dedup entries from where the last sweep stopped,
     * deletes the expired ones, and starts again from the first key after
     * the last one.
     */
    void sweep(long now) {
        int budget = settings.sweepMax;
        List<Bytes> expiredKeys = new ArrayList<>();
        Bytes last = null;
        boolean atEnd = false;
        try (KeyValueIterator<Bytes, byte[]> it = sweepCursor == null ? dedup.all()
                : dedup.range(sweepCursor, null)) {
            while (budget > 0) {
                if (!it.hasNext()) {
                    atEnd = true;
                    break;
                }
                KeyValue<Bytes, byte[]> kv = it.next();
                if (kv.key.equals(sweepCursor)) {
                    continue; // examined by the previous sweep
                }
                budget--;
                stats.dedupSwept.increment();
                if (expired(kv.value, now)) {
                    expiredKeys.add(kv.key);
                }
                last = kv.key;
            }
        }
        for (Bytes k : expiredKeys) {
            dedup.delete(k);
        }
        stats.dedupExpired.add(expiredKeys.size());
        sweepCursor = atEnd ? null : (last != null ? last : sweepCursor);
    }
}
