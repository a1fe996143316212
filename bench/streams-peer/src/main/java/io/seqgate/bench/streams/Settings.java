package io.seqgate.bench.streams;

import java.util.Map;

/**
 * The peer's own settings (properties named {@code peer.*}; everything else
 * is a Kafka Streams or client property). Defaults = the benchmark's seqgate
 * configuration (bench/run.sh write_config).
 */
final class Settings {
    /** Dedup TTL from first-seen, processing time (seqgate dedup.ttl_ms). */
    long dedupTtlMs = 604_800_000L;
    /** Wall-clock period of the TTL sweep punctuator, per task. */
    long sweepIntervalMs = 1000;
    /** Dedup entries the sweep examines per punctuation, per task. */
    int sweepMax = 1000;
    /** v > L + this: DLQ version_jump, not parked (semantics §3). */
    long maxVersionJump = 100_000;
    /** Request a commit (one transaction under EOS) after this many records
     *  processed by a stream thread since its last requested commit; 0 =
     *  only commit.interval.ms commits. */
    long commitEveryRecords = 0;
    /** Stores with the record cache in front (the others write through to
     *  RocksDB and the changelog at once). */
    java.util.Set<String> cachedStores = java.util.Set.of(Gate.AGG, Gate.PARKED);
    /** Period of the "stats" log line. */
    long statsIntervalMs = 10_000;
    /** __seqgate.errors.instance of DLQ records. */
    String instance = "streams-peer";
    /** __seqgate.errors.group of DLQ records (= application.id). */
    String group = "";
    /** RocksDB block cache of the process, memtables included
     *  ({@link BoundedRocksDBConfig}). */
    long rocksdbTotalBytes = 256L << 20;
    /** RocksDB memtables of the process (charged to the block cache). */
    long rocksdbMemtableBytes = 128L << 20;

    static Settings from(Map<?, ?> props) {
        Settings s = new Settings();
        s.dedupTtlMs = num(props, "peer.dedup.ttl.ms", s.dedupTtlMs);
        s.sweepIntervalMs = num(props, "peer.dedup.sweep.interval.ms", s.sweepIntervalMs);
        s.sweepMax = (int) num(props, "peer.dedup.sweep.max", s.sweepMax);
        s.maxVersionJump = num(props, "peer.max.version.jump", s.maxVersionJump);
        s.statsIntervalMs = num(props, "peer.stats.interval.ms", s.statsIntervalMs);
        s.commitEveryRecords = num(props, "peer.commit.every.records", s.commitEveryRecords);
        s.rocksdbTotalBytes = num(props, "peer.rocksdb.total.bytes", s.rocksdbTotalBytes);
        s.rocksdbMemtableBytes = num(props, "peer.rocksdb.memtable.bytes", s.rocksdbMemtableBytes);
        Object cached = props.get("peer.cached.stores");
        if (cached != null) {
            java.util.Set<String> set = new java.util.TreeSet<>();
            for (String n : cached.toString().split(",")) {
                n = n.trim();
                if (n.isEmpty()) {
                    continue;
                }
                if (!n.equals(Gate.DEDUP) && !n.equals(Gate.AGG) && !n.equals(Gate.PARKED)) {
                    throw new IllegalArgumentException("peer.cached.stores: unknown store " + n);
                }
                set.add(n);
            }
            s.cachedStores = set;
        }
        Object inst = props.get("peer.instance.id");
        if (inst != null) {
            s.instance = inst.toString();
        }
        Object g = props.get("application.id");
        if (g != null) {
            s.group = g.toString();
        }
        if (s.dedupTtlMs <= 0 || s.sweepIntervalMs <= 0 || s.sweepMax <= 0
                || s.maxVersionJump <= 0 || s.statsIntervalMs <= 0 || s.commitEveryRecords < 0
                || s.rocksdbMemtableBytes <= 0 || s.rocksdbTotalBytes < s.rocksdbMemtableBytes) {
            throw new IllegalArgumentException("peer.* settings must be > 0 (and"
                    + " peer.commit.every.records >= 0,"
                    + " peer.rocksdb.total.bytes >= peer.rocksdb.memtable.bytes)");
        }
        return s;
    }

    /** The settings as a JSON object (for the "start" log line). */
    String json() {
        return "{\"dedup_ttl_ms\":" + dedupTtlMs + ",\"dedup_sweep_interval_ms\":" + sweepIntervalMs
                + ",\"dedup_sweep_max\":" + sweepMax + ",\"max_version_jump\":" + maxVersionJump
                + ",\"stats_interval_ms\":" + statsIntervalMs
                + ",\"commit_every_records\":" + commitEveryRecords
                + ",\"cached_stores\":" + Stats.json(String.join(",", new java.util.TreeSet<>(cachedStores))) + ",\"instance\":" + Stats.json(instance)
                + ",\"rocksdb_total_bytes\":" + rocksdbTotalBytes
                + ",\"rocksdb_memtable_bytes\":" + rocksdbMemtableBytes + "}";
    }

    static long num(Map<?, ?> props, String name, long def) {
        Object v = props.get(name);
        if (v == null) {
            return def;
        }
        try {
            return Long.parseLong(v.toString().trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + ": not an integer: " + v, e);
        }
    }
}
