package io.seqgate.bench.streams;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.processor.StateStore;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.test.TestRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The peer's decisions on small inputs (TopologyTestDriver: the real
 * topology, RocksDB stores, mocked Kafka): the rows of semantics §3 that the
 * peer implements, its output and DLQ records, and the dedup TTL.
 */
class GateTest {
    private static final Instant T0 = Instant.parse("2026-12-01T00:00:00Z");

    private TopologyTestDriver driver;
    private TestInputTopic<byte[], byte[]> in;
    private TestOutputTopic<byte[], byte[]> out;
    private TestOutputTopic<byte[], byte[]> dlq;
    private Stats stats;
    private Path stateDir;

    private void start(String... peerProps) throws Exception {
        Path parent = Path.of("target", "test-state");
        Files.createDirectories(parent);
        stateDir = Files.createTempDirectory(parent, "streams-peer-test");
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, "peer-test");
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        for (String kv : peerProps) {
            int eq = kv.indexOf('=');
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        stats = new Stats();
        driver = new TopologyTestDriver(Peer.topology("in", "out", "dlq", Settings.from(p), stats),
                p, T0);
        in = driver.createInputTopic("in", new ByteArraySerializer(), new ByteArraySerializer());
        out = driver.createOutputTopic("out", new ByteArrayDeserializer(), new ByteArrayDeserializer());
        dlq = driver.createOutputTopic("dlq", new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @AfterEach
    void stop() throws Exception {
        if (driver != null) {
            driver.close();
        }
        if (stateDir != null) {
            try (var walk = Files.walk(stateDir)) {
                walk.sorted((a, b) -> b.compareTo(a)).forEach(f -> f.toFile().delete());
            }
        }
    }

    private static byte[] b(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    private static String s(byte[] v) {
        return v == null ? null : new String(v, StandardCharsets.UTF_8);
    }

    /** A CloudEvent in binary mode; a null argument leaves its header out. */
    private void send(String agg, String id, String type, String seq, String value) {
        Headers h = new RecordHeaders();
        h.add("ce_specversion", b("1.0"));
        if (id != null) {
            h.add("ce_id", b(id));
        }
        h.add("ce_source", b("/test"));
        if (type != null) {
            h.add("ce_type", b(type));
        }
        if (seq != null) {
            h.add("ce_sequence", b(seq));
        }
        in.pipeInput(new TestRecord<>(b(agg), b(value), h, T0));
    }

    /** Version v of aggregate agg with the type the benchmark gives it in an
     *  aggregate of n versions. */
    private void ev(String agg, int v, int n) {
        String type = v == 1 ? "order.created" : v == n ? "order.closed" : "order.updated";
        send(agg, agg + "-" + v, type, Integer.toString(v), "{\"v\":" + v + "}");
    }

    private static String header(TestRecord<byte[], byte[]> r, String name) {
        Header h = r.headers().lastHeader(name);
        return h == null ? null : s(h.value());
    }

    private List<String> outVersions() {
        List<String> vs = new ArrayList<>();
        for (TestRecord<byte[], byte[]> r : out.readRecordsToList()) {
            vs.add(s(r.key()) + ":" + header(r, "ce_sequence"));
        }
        return vs;
    }

    private List<String> dlqReasons() {
        List<String> rs = new ArrayList<>();
        for (TestRecord<byte[], byte[]> r : dlq.readRecordsToList()) {
            rs.add(s(r.key()) + ":" + header(r, "ce_sequence") + ":"
                    + header(r, "__seqgate.errors.reason"));
        }
        return rs;
    }

    private long entries(String store) {
        KeyValueStore<Bytes, byte[]> kv = driver.getKeyValueStore(store);
        long n = 0;
        try (KeyValueIterator<Bytes, byte[]> it = kv.all()) {
            while (it.hasNext()) {
                it.next();
                n++;
            }
        }
        return n;
    }

    @Test
    void storesArePersistentAndChangelogged() throws Exception {
        start();
        for (String name : new String[] {Gate.DEDUP, Gate.AGG, Gate.PARKED}) {
            StateStore st = driver.getAllStateStores().get(name);
            assertTrue(st.persistent(), name + " persistent (RocksDB)");
        }
        ev("A", 2, 2);
        ev("A", 1, 2);
        for (String name : new String[] {Gate.DEDUP, Gate.AGG, Gate.PARKED}) {
            assertTrue(driver.producedTopicNames().contains("peer-test-" + name + "-changelog"),
                    name + " changelog written: " + driver.producedTopicNames());
        }
        String desc = Peer.topology("in", "out", "dlq", new Settings(), new Stats()).describe().toString();
        for (String name : new String[] {Gate.DEDUP, Gate.AGG, Gate.PARKED}) {
            assertTrue(desc.matches("(?s).*Processor: gate \\(stores: \\[[^]]*\\b" + name + "\\b.*"),
                    desc);
        }
    }

    @Test
    void inOrderEventsAreAppliedWithProvenance() throws Exception {
        start();
        ev("A", 1, 3);
        ev("A", 2, 3);
        ev("A", 3, 3);
        List<TestRecord<byte[], byte[]>> rs = out.readRecordsToList();
        assertEquals(3, rs.size());
        for (int i = 0; i < 3; i++) {
            TestRecord<byte[], byte[]> r = rs.get(i);
            assertEquals("A", s(r.key()));
            assertEquals(Integer.toString(i + 1), header(r, "ce_sequence"));
            assertEquals("{\"v\":" + (i + 1) + "}", s(r.value()));
            assertEquals("in/0/" + i, header(r, "__seqgate.source"));
            assertEquals("A-" + (i + 1), header(r, "ce_id"), "input headers kept");
        }
        assertTrue(dlq.isEmpty());
        assertEquals(3, stats.applied.sum());
    }

    @Test
    void duplicatesAreDroppedIncludingDuplicatesOfParkedEvents() throws Exception {
        start();
        ev("A", 1, 3);
        ev("A", 1, 3);      // redelivery of an applied event
        ev("A", 3, 3);      // parked
        ev("A", 3, 3);      // redelivery of a parked event
        ev("A", 2, 3);      // fills the gap: 2, 3
        ev("A", 3, 3);      // redelivery of a drained event
        assertEquals(List.of("A:1", "A:2", "A:3"), outVersions());
        assertTrue(dlq.isEmpty());
        assertEquals(3, stats.dedupHits.sum());
        assertEquals(0, entries(Gate.PARKED));
    }

    @Test
    void sameKeyOtherPayloadIsAConflict() throws Exception {
        start();
        send("A", "x", "order.created", "1", "first");
        send("A", "x", "order.created", "1", "second");
        assertEquals(List.of("A:1"), outVersions());
        List<TestRecord<byte[], byte[]>> d = dlq.readRecordsToList();
        assertEquals(1, d.size());
        assertEquals("idempotency_conflict", header(d.get(0), "__seqgate.errors.reason"));
        assertEquals("second", s(d.get(0).value()), "DLQ record = the input record");
        assertEquals("1", header(d.get(0), "__seqgate.errors.offset"));
        assertEquals("peer-test", header(d.get(0), "__seqgate.errors.group"));
        assertEquals(1, stats.conflicts.sum());
    }

    @Test
    void swappedVersionsAreParkedAndDrainedInOrder() throws Exception {
        start();
        ev("A", 2, 3);
        ev("A", 1, 3);
        ev("A", 3, 3);
        List<TestRecord<byte[], byte[]>> rs = out.readRecordsToList();
        assertEquals(3, rs.size());
        assertEquals("1", header(rs.get(0), "ce_sequence"));
        assertEquals("in/0/1", header(rs.get(0), "__seqgate.source"));
        assertEquals("2", header(rs.get(1), "ce_sequence"));
        assertEquals("in/0/0", header(rs.get(1), "__seqgate.source"), "origin of the parked one");
        assertEquals("{\"v\":2}", s(rs.get(1).value()));
        assertEquals("A-2", header(rs.get(1), "ce_id"));
        assertEquals("3", header(rs.get(2), "ce_sequence"));
        assertTrue(dlq.isEmpty());
        assertEquals(1, stats.gaps.sum());
        assertEquals(0, stats.parked.sum());
        assertEquals(0, entries(Gate.PARKED));
    }

    @Test
    void outputOrderIsVersionOrderWhatEverTheArrival() throws Exception {
        start();
        ev("A", 3, 5);
        ev("B", 2, 2);
        ev("A", 1, 5);
        ev("A", 2, 5);
        ev("A", 4, 5);
        ev("B", 1, 2);
        ev("A", 5, 5);
        assertEquals(List.of("A:1", "A:2", "A:3", "A:4", "B:1", "B:2", "A:5"), outVersions());
        assertTrue(dlq.isEmpty());
    }

    @Test
    void staleVersionsGoToTheDlq() throws Exception {
        start();
        ev("A", 1, 3);
        ev("A", 2, 3);
        send("A", "other-id", "order.updated", "1", "late");
        send("B", "b0", "order.created", "0", "below first_version");
        List<TestRecord<byte[], byte[]>> d = dlq.readRecordsToList();
        assertEquals(2, d.size());
        assertEquals("stale_version", header(d.get(0), "__seqgate.errors.reason"));
        assertEquals("3", header(d.get(0), "__seqgate.errors.expected_version"));
        assertEquals("1", header(d.get(0), "__seqgate.errors.actual_version"));
        assertEquals("OPEN", header(d.get(0), "__seqgate.errors.state"));
        assertEquals("stale_version", header(d.get(1), "__seqgate.errors.reason"));
        send("A", "other-id", "order.updated", "1", "late");   // its key was recorded
        assertTrue(dlq.isEmpty(), "a redelivered DLQ'd record is a duplicate");
        assertEquals(2, stats.stale.sum());
        assertEquals(1, stats.dedupHits.sum());
    }

    @Test
    void illegalTransitionsGoToTheDlqAndAdvanceL() throws Exception {
        start();
        send("A", "a1", "order.closed", "1", "x");     // NEW -closed-> illegal
        send("A", "a2", "order.updated", "2", "x");    // still NEW: illegal, not parked
        send("A", "a3", "order.shipped", "3", "x");    // unknown type
        send("B", "b1", "order.created", "1", "x");
        send("B", "b2", "order.closed", "2", "x");
        send("B", "b3", "order.updated", "3", "x");    // CLOSED -updated-> illegal
        assertEquals(List.of("A:1:illegal_transition", "A:2:illegal_transition",
                "A:3:unknown_event_type", "B:3:illegal_transition"), dlqReasons());
        assertEquals(List.of("B:1", "B:2"), outVersions());
        assertEquals(0, entries(Gate.PARKED));
        assertEquals(4, stats.illegal.sum());
    }

    @Test
    void malformedEnvelopesGoToTheDlq() throws Exception {
        start();
        send("A", null, "order.created", "1", "no id");
        send("A", "a", "order.created", null, "no sequence");
        send("A", "a", "order.created", "+1", "signed");
        send("A", "a", "order.created", " 1", "space");
        send("A", "a", "order.created", "18446744073709551616", "2^64");
        send("A", "a", null, "1", "no type");
        send(null, "a", "order.created", "1", "no key");
        List<TestRecord<byte[], byte[]>> d = dlq.readRecordsToList();
        assertEquals(7, d.size());
        for (TestRecord<byte[], byte[]> r : d) {
            assertEquals("malformed", header(r, "__seqgate.errors.reason"), s(r.value()));
        }
        assertTrue(out.isEmpty());
        assertEquals(0, entries(Gate.DEDUP), "malformed records record no key");
        send("A", "a", "order.created", "1", "fine");
        assertEquals(List.of("A:1"), outVersions());
    }

    @Test
    void versionsAreUnsigned64Bit() {
        long[] v = new long[1];
        assertTrue(Codec.parseVersion(b("18446744073709551615"), v));
        assertEquals(-1L, v[0]);
        assertTrue(Codec.parseVersion(b("00042"), v));
        assertEquals(42L, v[0]);
        assertFalse(Codec.parseVersion(b("18446744073709551616"), v));
        assertFalse(Codec.parseVersion(b("99999999999999999999"), v));
        assertFalse(Codec.parseVersion(b("-1"), v));
        assertFalse(Codec.parseVersion(b(""), v));
    }

    @Test
    void aSecondEventParkedAtTheSameVersionIsAConflict() throws Exception {
        start();
        send("A", "p", "order.updated", "3", "parked first");
        send("A", "q", "order.updated", "3", "same version, other key");
        assertEquals(List.of("A:3:version_conflict"), dlqReasons());
        ev("A", 1, 4);
        ev("A", 2, 4);
        List<TestRecord<byte[], byte[]>> rs = out.readRecordsToList();
        assertEquals(3, rs.size());
        assertEquals("parked first", s(rs.get(2).value()));
    }

    @Test
    void hugeVersionJumpsAreNotParked() throws Exception {
        start();
        ev("A", 1, 3);
        send("A", "far", "order.updated", "100002", "x");
        send("A", "near", "order.updated", "100001", "x");
        assertEquals(List.of("A:100002:version_jump"), dlqReasons());
        assertEquals(1, entries(Gate.PARKED), "100001 = L + 100000 is parked");
    }

    @Test
    void idempotencyKeysExpireAfterTheTtl() throws Exception {
        start("peer.dedup.ttl.ms=1000", "peer.dedup.sweep.interval.ms=3600000");
        send("A", "x", "order.created", "1", "one");
        driver.advanceWallClockTime(Duration.ofMillis(999));
        send("B", "x", "order.created", "1", "two");   // within the TTL: conflict
        assertEquals(List.of("B:1:idempotency_conflict"), dlqReasons());
        driver.advanceWallClockTime(Duration.ofMillis(1));
        send("C", "x", "order.created", "1", "three"); // expired: a new key
        assertEquals(List.of("A:1", "C:1"), outVersions());
        assertTrue(dlq.isEmpty());
        // C's first-seen time restarted the TTL
        driver.advanceWallClockTime(Duration.ofMillis(500));
        send("C", "x", "order.created", "1", "three");
        assertEquals(1, stats.dedupHits.sum());
    }

    @Test
    void theSweepDeletesExpiredKeysAFewAtATime() throws Exception {
        start("peer.dedup.ttl.ms=1000", "peer.dedup.sweep.interval.ms=100",
                "peer.dedup.sweep.max=2");
        for (int i = 1; i <= 5; i++) {
            ev("A", i, 5);
        }
        assertEquals(5, entries(Gate.DEDUP));
        for (int i = 0; i < 9; i++) {   // 900 ms: nothing expired yet
            driver.advanceWallClockTime(Duration.ofMillis(100));
        }
        assertEquals(5, entries(Gate.DEDUP));
        assertEquals(0, stats.dedupExpired.sum());
        // 2, 2, 1 (the end of the store), 2, 2, 1, ...: 9 sweeps, 15 entries
        assertEquals(15, stats.dedupSwept.sum());
        driver.advanceWallClockTime(Duration.ofMillis(100));   // 1000 ms: expired
        assertEquals(3, entries(Gate.DEDUP), "one sweep deletes at most 2");
        for (int i = 0; i < 3; i++) {
            driver.advanceWallClockTime(Duration.ofMillis(100));
        }
        assertEquals(0, entries(Gate.DEDUP));
        assertEquals(5, stats.dedupExpired.sum());
    }

    /** Gate alone on a MockProcessorContext (which records commit requests)
     *  with in-memory stores; run on a fresh thread, as the commit count is
     *  per stream thread. Returns after which records a commit was requested. */
    private static List<Integer> commitRequests(String setting, int records) throws Exception {
        List<Integer> at = new ArrayList<>();
        Throwable[] failure = new Throwable[1];
        Thread t = new Thread(() -> {
            try {
                Properties p = new Properties();
                p.put(StreamsConfig.APPLICATION_ID_CONFIG, "peer-test");
                p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
                if (setting != null) {
                    p.put("peer.commit.every.records", setting);
                }
                var ctx = new org.apache.kafka.streams.processor.api.MockProcessorContext<byte[], byte[]>(p);
                for (String name : new String[] {Gate.DEDUP, Gate.AGG, Gate.PARKED}) {
                    KeyValueStore<Bytes, byte[]> st = org.apache.kafka.streams.state.Stores
                            .keyValueStoreBuilder(org.apache.kafka.streams.state.Stores.inMemoryKeyValueStore(name),
                                    org.apache.kafka.common.serialization.Serdes.Bytes(),
                                    org.apache.kafka.common.serialization.Serdes.ByteArray())
                            .withLoggingDisabled().build();
                    st.init(ctx.getStateStoreContext(), st);
                    ctx.addStateStore(st);
                }
                ctx.setCurrentSystemTimeMs(T0.toEpochMilli());
                Gate g = new Gate(Settings.from(p), new Stats());
                g.init(ctx);
                for (int i = 1; i <= records; i++) {
                    Headers h = new RecordHeaders();
                    h.add("ce_id", b("e" + i));
                    h.add("ce_source", b("/test"));
                    h.add("ce_type", b(i == 1 ? "order.created" : "order.updated"));
                    h.add("ce_sequence", b(Integer.toString(i)));
                    ctx.setRecordMetadata("in", 0, i - 1);
                    g.process(new org.apache.kafka.streams.processor.api.Record<>(b("A"), b("v"), 0L, h));
                    if (ctx.committed()) {
                        at.add(i);
                        ctx.resetCommit();
                    }
                }
            } catch (Throwable e) {
                failure[0] = e;
            }
        });
        t.start();
        t.join();
        if (failure[0] != null) {
            throw new AssertionError(failure[0]);
        }
        return at;
    }

    @Test
    void aCommitIsRequestedEveryNRecordsWhenConfigured() throws Exception {
        assertEquals(List.of(3, 6), commitRequests("3", 7));
        assertEquals(List.of(), commitRequests(null, 7), "default: commit.interval.ms only");
    }

    @Test
    void cachedStoresAreConfigurable() {
        Properties p = new Properties();
        assertEquals(java.util.Set.of(Gate.AGG, Gate.PARKED), Settings.from(p).cachedStores);
        p.put("peer.cached.stores", "dedup, agg");
        assertEquals(java.util.Set.of(Gate.DEDUP, Gate.AGG), Settings.from(p).cachedStores);
        p.put("peer.cached.stores", "");
        assertTrue(Settings.from(p).cachedStores.isEmpty());
        p.put("peer.cached.stores", "agg,nosuch");
        try {
            Settings.from(p);
            throw new AssertionError("unknown store accepted");
        } catch (IllegalArgumentException expected) {
            assertTrue(expected.getMessage().contains("nosuch"));
        }
    }

    @Test
    void parkedRecordsRoundTrip() {
        Headers h = new RecordHeaders();
        h.add("a", b("1"));
        h.add("n", null);
        h.add("a", b("2"));
        byte[] enc = Codec.encodeParked("topic-x", 7, 1234567890123L, 42L, 99L, null, h);
        Codec.Parked p = Codec.decodeParked(enc);
        assertEquals("topic-x", p.topic);
        assertEquals(7, p.partition);
        assertEquals(1234567890123L, p.offset);
        assertEquals(42L, p.timestamp);
        assertEquals(99L, p.parkedAtMs);
        assertNull(p.value);
        Header[] hs = p.headers.toArray();
        assertEquals(3, hs.length);
        assertEquals("a", hs[0].key());
        assertArrayEquals(b("1"), hs[0].value());
        assertNull(hs[1].value());
        assertArrayEquals(b("2"), hs[2].value());
        assertArrayEquals(Codec.parkedKey(b("ab"), 1), Codec.parkedKey(b("ab"), 1));
        assertFalse(java.util.Arrays.equals(Codec.parkedKey(b("a"), 0x6200000000000000L),
                Codec.parkedKey(b("ab"), 0)));
    }

    @Test
    void idempotencyKeyPartsAreLengthPrefixed() {
        var md = Codec.sha256();
        byte[] k1 = Codec.idempotencyKey(md, b("t"), b("a:b"), b("c"));
        byte[] k2 = Codec.idempotencyKey(md, b("t"), b("a"), b("b:c"));
        assertFalse(java.util.Arrays.equals(k1, k2));
        assertEquals(32, k1.length);
    }
}
