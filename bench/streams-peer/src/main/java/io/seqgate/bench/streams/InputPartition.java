package io.seqgate.bench.streams;

import java.util.Collections;
import java.util.Optional;
import java.util.Set;

import org.apache.kafka.streams.processor.StreamPartitioner;

/**
 * Output partition = input partition (seqgate's output_partitioning
 * "input", semantics §5), for the output sink. A StreamPartitioner does not
 * see the record's origin, so {@link Gate} sets the partition of the record
 * it is about to forward in a thread-local: Kafka Streams calls the
 * partitioner synchronously inside {@code forward}, on the same stream
 * thread. A partition the output topic does not have falls back to the
 * default partitioner (murmur2 on the key).
 */
public final class InputPartition implements StreamPartitioner<byte[], byte[]> {
    private static final ThreadLocal<int[]> CURRENT = ThreadLocal.withInitial(() -> new int[] {-1});

    static void set(int partition) {
        CURRENT.get()[0] = partition;
    }

    @Override
    public Optional<Set<Integer>> partitions(String topic, byte[] key, byte[] value, int numPartitions) {
        int p = CURRENT.get()[0];
        if (p < 0 || p >= numPartitions) {
            return Optional.empty();
        }
        return Optional.of(Collections.singleton(p));
    }
}
