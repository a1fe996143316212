package io.seqgate.bench.streams;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * The byte layouts of the three state stores and the two hashes, kept
 * compact and fixed so that the stores hold about what seqgate's LMDB
 * databases hold (docs/semantics.md §1):
 *
 * <pre>
 * dedup  key   SHA-256(len|input topic, len|ce_source, len|ce_id)    32 B
 *        value digest (SHA-256 of the record value) 32 B | first_seen_ms 8 B | verdict 1 B
 * agg    key   the record key (the aggregate id)
 *        value flags 1 B (bit 0: a version was applied) | L 8 B | state 1 B | parked 4 B
 * parked key   aggregate id | version 8 B big-endian (unique: the suffix has a fixed length)
 *        value timestamp 8 B | partition 4 B | offset 8 B | parked_at_ms 8 B |
 *              topic (len 2 B + bytes) | value (len 4 B, -1 = null, + bytes) |
 *              header count 4 B | per header: key (len 4 B + UTF-8) | value (len 4 B, -1 = null, + bytes)
 * </pre>
 *
 * Versions are unsigned 64-bit integers (semantics §2) held in a Java long
 * and compared with {@link Long#compareUnsigned}.
 */
final class Codec {
    private Codec() {}

    static final int DIGEST_LEN = 32;
    static final byte VERDICT_APPLIED = 1;
    static final byte VERDICT_PARKED = 2;
    static final byte VERDICT_DLQ = 3;

    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("no SHA-256 in this JVM", e);
        }
    }

    private static void lenPrefixed(MessageDigest md, byte[] part) {
        int n = part.length;
        md.update((byte) (n >>> 24));
        md.update((byte) (n >>> 16));
        md.update((byte) (n >>> 8));
        md.update((byte) n);
        md.update(part);
    }

    /** The idempotency key: input topic + scope (ce_source) + ce_id, each
     *  length-prefixed so ("a:b","c") and ("a","b:c") never collide. */
    static byte[] idempotencyKey(MessageDigest md, byte[] topic, byte[] source, byte[] id) {
        md.reset();
        lenPrefixed(md, topic);
        lenPrefixed(md, source);
        lenPrefixed(md, id);
        return md.digest();
    }

    /** The payload digest: SHA-256 of the record value (null = empty). */
    static byte[] digest(MessageDigest md, byte[] value) {
        md.reset();
        if (value != null) {
            md.update(value);
        }
        return md.digest();
    }

    /**
     * Parses a version: decimal digits only (no sign, no spaces), 1..20 of
     * them, at most 2^64-1 (semantics §2). Returns false when malformed.
     */
    static boolean parseVersion(byte[] text, long[] out) {
        if (text == null || text.length == 0 || text.length > 20) {
            return false;
        }
        long v = 0;
        for (byte c : text) {
            if (c < '0' || c > '9') {
                return false;
            }
            int d = c - '0';
            // v * 10 + d must stay <= 2^64-1 (unsigned): 1844674407370955161 * 10 + 5
            if (Long.compareUnsigned(v, 1844674407370955161L) > 0
                    || (v == 1844674407370955161L && d > 5)) {
                return false;
            }
            v = v * 10 + d;
        }
        out[0] = v;
        return true;
    }

    // ---- dedup value --------------------------------------------------------

    static byte[] dedupValue(byte[] digest, long firstSeenMs, byte verdict) {
        ByteBuffer b = ByteBuffer.allocate(DIGEST_LEN + 8 + 1);
        b.put(digest).putLong(firstSeenMs).put(verdict);
        return b.array();
    }

    static long dedupFirstSeen(byte[] v) {
        return ByteBuffer.wrap(v, DIGEST_LEN, 8).getLong();
    }

    static boolean dedupSameDigest(byte[] v, byte[] digest) {
        for (int i = 0; i < DIGEST_LEN; i++) {
            if (v[i] != digest[i]) {
                return false;
            }
        }
        return true;
    }

    // ---- aggregate value ----------------------------------------------------

    /** An aggregate's state: L, the state machine's state, parked events. */
    static final class Agg {
        boolean hasLast;
        long last;      // L (unsigned); 0 (= first_version - 1) while !hasLast
        byte state;     // index into Gate.STATES
        int parked;     // events parked for this aggregate

        static Agg decode(byte[] v) {
            Agg a = new Agg();
            if (v == null) {
                return a;
            }
            ByteBuffer b = ByteBuffer.wrap(v);
            a.hasLast = (b.get() & 1) != 0;
            a.last = b.getLong();
            a.state = b.get();
            a.parked = b.getInt();
            return a;
        }

        byte[] encode() {
            ByteBuffer b = ByteBuffer.allocate(14);
            b.put((byte) (hasLast ? 1 : 0)).putLong(last).put(state).putInt(parked);
            return b.array();
        }
    }

    // ---- parked key and value -------------------------------------------------

    static byte[] parkedKey(byte[] aggregate, long version) {
        ByteBuffer b = ByteBuffer.allocate(aggregate.length + 8);
        b.put(aggregate).putLong(version);
        return b.array();
    }

    /** A parked record: everything needed to emit it later as if it had just
     *  been read (key = the aggregate, from the parked key). */
    static final class Parked {
        long timestamp;
        int partition;
        long offset;
        long parkedAtMs;
        String topic;
        byte[] value;
        Headers headers;
    }

    static byte[] encodeParked(String topic, int partition, long offset, long timestamp,
                               long parkedAtMs, byte[] value, Headers headers) {
        byte[] t = topic.getBytes(StandardCharsets.UTF_8);
        Header[] hs = headers.toArray();
        int size = 8 + 4 + 8 + 8 + 2 + t.length + 4 + (value == null ? 0 : value.length) + 4;
        byte[][] hk = new byte[hs.length][];
        for (int i = 0; i < hs.length; i++) {
            hk[i] = hs[i].key().getBytes(StandardCharsets.UTF_8);
            size += 4 + hk[i].length + 4 + (hs[i].value() == null ? 0 : hs[i].value().length);
        }
        ByteBuffer b = ByteBuffer.allocate(size);
        b.putLong(timestamp).putInt(partition).putLong(offset).putLong(parkedAtMs);
        b.putShort((short) t.length).put(t);
        putBytes(b, value);
        b.putInt(hs.length);
        for (int i = 0; i < hs.length; i++) {
            b.putInt(hk[i].length).put(hk[i]);
            putBytes(b, hs[i].value());
        }
        return b.array();
    }

    static Parked decodeParked(byte[] v) {
        ByteBuffer b = ByteBuffer.wrap(v);
        Parked p = new Parked();
        p.timestamp = b.getLong();
        p.partition = b.getInt();
        p.offset = b.getLong();
        p.parkedAtMs = b.getLong();
        byte[] t = new byte[b.getShort() & 0xffff];
        b.get(t);
        p.topic = new String(t, StandardCharsets.UTF_8);
        p.value = getBytes(b);
        int n = b.getInt();
        RecordHeaders hs = new RecordHeaders();
        for (int i = 0; i < n; i++) {
            byte[] k = new byte[b.getInt()];
            b.get(k);
            hs.add(new String(k, StandardCharsets.UTF_8), getBytes(b));
        }
        p.headers = hs;
        return p;
    }

    private static void putBytes(ByteBuffer b, byte[] v) {
        if (v == null) {
            b.putInt(-1);
        } else {
            b.putInt(v.length).put(v);
        }
    }

    private static byte[] getBytes(ByteBuffer b) {
        int n = b.getInt();
        if (n < 0) {
            return null;
        }
        byte[] v = new byte[n];
        b.get(v);
        return v;
    }
}
