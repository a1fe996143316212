package io.seqgate.bench.streams;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams peer of bench/run.sh (mode "streams"): the job seqgate
 * does (see {@link Gate}) as a Processor API application with three
 * persistent, changelogged key-value stores, exactly_once_v2, one stream
 * thread.
 *
 * <pre>
 * Peer --bootstrap B --application-id ID --input T --output T --dlq T
 *      --state-dir DIR [--config FILE] [--prop name=value]...
 * </pre>
 *
 * Properties, later wins: the job's fixed settings (below), then FILE, then
 * each --prop. Names starting with "peer." are the peer's own
 * ({@link Settings}, {@link BoundedRocksDBConfig}); the rest are Kafka
 * Streams and client properties, verbatim. The application.id is the
 * consumer group whose committed offsets the benchmark polls. Logs JSON
 * lines on stdout (a "stats" line every peer.stats.interval.ms and a final
 * one at shutdown; a "restore_done" line per store and changelog
 * partition restored, as seqgate logs one per partition: records and ms,
 * for the benchmark's restore rate); Kafka's own logging goes to stderr
 * at WARN. Stops on
 * SIGTERM (closing Kafka Streams cleanly). Exit status 0 after SIGTERM, 1
 * when Kafka Streams stopped by itself (an error), 2 on bad arguments.
 */
public final class Peer {
    private Peer() {}

    private static final PrintStream OUT = System.out;

    /** The topology: source → gate (with its three stores) → output / dlq. */
    static Topology topology(String input, String output, String dlq, Settings s, Stats stats) {
        Topology t = new Topology();
        t.addSource("input", new ByteArrayDeserializer(), new ByteArrayDeserializer(), input);
        t.addProcessor("gate", () -> new Gate(s, stats), "input");
        for (String store : new String[] {Gate.DEDUP, Gate.AGG, Gate.PARKED}) {
            // RocksDB, changelog with Streams' defaults (compacted); the
            // record cache (coalesces a key's writes within a commit
            // interval) where s.cachedStores says.
            StoreBuilder<KeyValueStore<Bytes, byte[]>> b = Stores.keyValueStoreBuilder(
                    Stores.persistentKeyValueStore(store), Serdes.Bytes(), Serdes.ByteArray())
                    .withLoggingEnabled(Map.of());
            t.addStateStore(s.cachedStores.contains(store) ? b.withCachingEnabled()
                    : b.withCachingDisabled(), "gate");
        }
        t.addSink(Gate.OUTPUT, output, new ByteArraySerializer(), new ByteArraySerializer(),
                new InputPartition(), "gate");
        t.addSink(Gate.DLQ, dlq, new ByteArraySerializer(), new ByteArraySerializer(), "gate");
        return t;
    }

    /** Logs "restore_done" per store and changelog partition: records
     *  restored and the ms from its start to its end (Kafka Streams may
     *  restore several at once: the benchmark takes the span of them). */
    static final class RestoreLog implements StateRestoreListener {
        private final Map<String, Long> started = new ConcurrentHashMap<>();

        private static String key(TopicPartition tp, String store) {
            return store + "/" + tp;
        }

        @Override
        public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
            started.put(key(tp, store), System.currentTimeMillis());
        }

        @Override
        public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {}

        @Override
        public void onRestoreEnd(TopicPartition tp, String store, long total) {
            Long t0 = started.remove(key(tp, store));
            long ms = t0 == null ? -1 : System.currentTimeMillis() - t0;
            Stats.log(OUT, "info", "restore_done", ",\"store\":" + Stats.json(store)
                    + ",\"changelog\":" + Stats.json(tp.topic()) + ",\"partition\":"
                    + tp.partition() + ",\"records\":" + total + ",\"ms\":" + ms);
        }
    }

    private static void usage(String msg) {
        System.err.println("streams-peer: " + msg);
        System.err.println("usage: Peer --bootstrap B --application-id ID --input T --output T"
                + " --dlq T --state-dir DIR [--config FILE] [--prop name=value]...");
        System.exit(2);
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new TreeMap<>();
        List<String> props = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--") || i + 1 >= args.length) {
                usage("bad argument '" + a + "'");
            }
            String v = args[++i];
            if (a.equals("--prop")) {
                props.add(v);
            } else {
                opt.put(a.substring(2), v);
            }
        }
        for (String req : new String[] {"bootstrap", "application-id", "input", "output", "dlq",
                "state-dir"}) {
            if (!opt.containsKey(req)) {
                usage("--" + req + " missing");
            }
        }

        Properties p = new Properties();
        // The job's fixed settings (what makes it the peer of seqgate
        // exactly_once, see README.md); a FILE or --prop may still override
        // them for an experiment.
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        String file = opt.remove("config");
        if (file != null) {
            try (InputStream in = new FileInputStream(file)) {
                p.load(in);
            } catch (IOException e) {
                usage("--config " + file + ": " + e.getMessage());
            }
        }
        for (String kv : props) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                usage("--prop '" + kv + "' is not name=value");
            }
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opt.remove("bootstrap"));
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, opt.remove("application-id"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, opt.remove("state-dir"));
        String input = opt.remove("input");
        String output = opt.remove("output");
        String dlq = opt.remove("dlq");
        if (!opt.isEmpty()) {
            usage("unknown option --" + opt.keySet().iterator().next());
        }
        Settings s;
        try {
            s = Settings.from(p);
        } catch (IllegalArgumentException e) {
            usage(e.getMessage());
            return;
        }
        // peer.* are ours: Kafka Streams would hand unknown names to every
        // client ("supplied but not used" warnings).
        p.keySet().removeIf(k -> k.toString().startsWith("peer."));
        BoundedRocksDBConfig.size(s.rocksdbTotalBytes, s.rocksdbMemtableBytes);

        StringBuilder cfg = new StringBuilder();
        for (Object k : new TreeMap<>(p).keySet()) {
            cfg.append(cfg.length() == 0 ? "" : ",").append(Stats.json(k.toString())).append(':')
                    .append(Stats.json(p.getProperty(k.toString())));
        }
        Stats.log(OUT, "info", "start", ",\"input\":" + Stats.json(input) + ",\"output\":"
                + Stats.json(output) + ",\"dlq\":" + Stats.json(dlq) + ",\"peer\":" + s.json()
                + ",\"properties\":{" + cfg + "}");

        Stats stats = new Stats();
        long jvmStart = ManagementFactory.getRuntimeMXBean().getStartTime();
        AtomicLong runningMs = new AtomicLong(-1);
        KafkaStreams streams = new KafkaStreams(topology(input, output, dlq, s, stats), p);
        CountDownLatch stopped = new CountDownLatch(1);
        AtomicBoolean terminating = new AtomicBoolean(false);
        AtomicBoolean failed = new AtomicBoolean(false);
        AtomicInteger exitStatus = new AtomicInteger(0);
        streams.setUncaughtExceptionHandler(e -> {
            failed.set(true);
            Stats.log(OUT, "error", "fatal", ",\"error\":" + Stats.json(String.valueOf(e)));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setGlobalStateRestoreListener(new RestoreLog());
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING && runningMs.compareAndSet(-1,
                    System.currentTimeMillis() - jvmStart)) {
                Stats.log(OUT, "info", "running", ",\"start_to_running_ms\":" + runningMs.get());
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        ScheduledExecutorService ticker = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "stats");
            t.setDaemon(true);
            return t;
        });
        ticker.scheduleAtFixedRate(() -> Stats.log(OUT, "info", "stats",
                stats.members(runningMs.get())), s.statsIntervalMs, s.statsIntervalMs,
                TimeUnit.MILLISECONDS);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            terminating.set(true);
            streams.close(java.time.Duration.ofSeconds(60));
            ticker.shutdownNow();
            Stats.log(OUT, "info", "stats", stats.members(runningMs.get()));
            Stats.log(OUT, "info", "stopped", "");
            // 0 after SIGTERM (not the JVM's 143), 1 after an error
            Runtime.getRuntime().halt(exitStatus.get());
        }, "shutdown"));

        streams.start();
        stopped.await();
        if (!terminating.get()) {
            // Kafka Streams stopped on its own: an error. The shutdown hook
            // closes it and logs the final stats.
            Stats.log(OUT, "error", "stopped_by_itself", ",\"state\":"
                    + Stats.json(streams.state().name()) + ",\"uncaught_exception\":" + failed.get());
            exitStatus.set(1);
            System.exit(1);
        }
    }
}
