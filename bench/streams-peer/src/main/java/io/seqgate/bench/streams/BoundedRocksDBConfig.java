package io.seqgate.bench.streams;

import java.util.Map;

import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.Cache;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.WriteBufferManager;

/**
 * RocksDB memory bounded for the whole process, as the Kafka Streams
 * documentation recommends (Developer Guide, Memory Management, "RocksDB"):
 * one LRU block cache shared by every store instance, index and filter
 * blocks cached in it (high priority), and the memtables of all instances
 * charged to the same cache through one WriteBufferManager. Without it every
 * store instance (3 stores x 3 tasks here) would get its own 50 MiB block
 * cache and up to 3 x 16 MiB of memtables.
 *
 * Sizes (bytes): {@code peer.rocksdb.total.bytes} (block cache, memtables
 * included) and {@code peer.rocksdb.memtable.bytes} ({@link Settings}), set
 * with {@link #size} before Kafka Streams starts. The shared objects live as
 * long as the process; close() leaves them open (every store instance uses
 * them).
 */
public final class BoundedRocksDBConfig implements RocksDBConfigSetter {
    private static long totalBytes = 256L << 20;
    private static long memtableBytes = 128L << 20;
    private static Cache cache;
    private static WriteBufferManager writeBufferManager;

    /** Sets the process-wide sizes; effective for stores opened after it. */
    static synchronized void size(long total, long memtables) {
        totalBytes = total;
        memtableBytes = memtables;
    }

    private static synchronized void init() {
        if (cache != null) {
            return;
        }
        long total = totalBytes;
        long memtables = memtableBytes;
        // -1: default shard bits; false: no strict limit (a read never fails
        // for want of cache); 0.1: share reserved for index and filter blocks.
        cache = new LRUCache(total, -1, false, 0.1);
        writeBufferManager = new WriteBufferManager(memtables, cache);
    }

    @Override
    public void setConfig(String storeName, Options options, Map<String, Object> configs) {
        init();
        // Keep Streams' table config (its bloom filter, 4 KiB blocks).
        BlockBasedTableConfig table = (BlockBasedTableConfig) options.tableFormatConfig();
        table.setBlockCache(cache);
        table.setCacheIndexAndFilterBlocks(true);
        table.setCacheIndexAndFilterBlocksWithHighPriority(true);
        options.setWriteBufferManager(writeBufferManager);
        options.setTableFormatConfig(table);
    }

    @Override
    public void close(String storeName, Options options) {
        // shared by all store instances: not closed here
    }
}
