package io.seqgate.bench.streams;

import java.io.PrintStream;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.concurrent.atomic.LongAdder;

/**
 * The peer's counters, named like seqgate's (docs/metrics.md "Counters") so
 * that bench/measure.py reads both the same way, and its JSON log lines
 * ({"ts":…,"level":…,"event":…}, one per line on stdout, like seqgate's log).
 *
 * Counters count decisions as they are made, in the process: a transaction
 * that Kafka Streams aborts and re-processes (none in a clean benchmark run)
 * counts its records twice. Thread-safe.
 */
final class Stats {
    final LongAdder records = new LongAdder();
    final LongAdder applied = new LongAdder();
    final LongAdder dedupHits = new LongAdder();
    final LongAdder conflicts = new LongAdder();
    final LongAdder stale = new LongAdder();
    final LongAdder illegal = new LongAdder();
    final LongAdder malformed = new LongAdder();
    final LongAdder gaps = new LongAdder();
    final LongAdder parked = new LongAdder();      // gauge: parked now
    final LongAdder parkedTotal = new LongAdder();
    final LongAdder dlq = new LongAdder();
    final LongAdder dedupExpired = new LongAdder();
    final LongAdder dedupSwept = new LongAdder();  // entries the TTL sweep examined

    private static final DateTimeFormatter TS =
            DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

    static String ts() {
        return TS.format(Instant.now());
    }

    /** Escapes a string for a JSON string literal. */
    static String json(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    /** Prints one log line: {"ts":…,"level":level,"event":event<rest>};
     *  rest is "" or starts with ",". */
    static void log(PrintStream out, String level, String event, String rest) {
        synchronized (out) {
            out.println("{\"ts\":\"" + ts() + "\",\"level\":\"" + level + "\",\"event\":\""
                    + event + "\"" + rest + "}");
            out.flush();
        }
    }

    /** The members of a "stats" line (after "event"). */
    String members(long startToRunningMs) {
        return ",\"records_total\":" + records.sum()
                + ",\"applied_total\":" + applied.sum()
                + ",\"dedup_hits_total\":" + dedupHits.sum()
                + ",\"idempotency_parameter_conflicts_total\":" + conflicts.sum()
                + ",\"stale_version_rejections_total\":" + stale.sum()
                + ",\"illegal_transitions_total\":" + illegal.sum()
                + ",\"malformed_total\":" + malformed.sum()
                + ",\"event_sequence_gaps_total\":" + gaps.sum()
                + ",\"parked_total\":" + parkedTotal.sum()
                + ",\"parked_events\":" + parked.sum()
                + ",\"dlq_total\":" + dlq.sum()
                + ",\"dedup_expired_total\":" + dedupExpired.sum()
                + ",\"dedup_sweep_examined_total\":" + dedupSwept.sum()
                + ",\"start_to_running_ms\":" + startToRunningMs;
    }
}
