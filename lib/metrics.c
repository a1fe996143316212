/*
 * metrics.c — counters operators watch (semantics §7), their stable names,
 * and their JSON rendering for the stats log line.
 */
#include "metrics.h"

#include <inttypes.h>
#include <stdio.h>

static const char *const reason_names[SG_R__CNT] = {
        [SG_R_NONE] = "",
        [SG_R_MALFORMED] = "malformed",
        [SG_R_IDEMPOTENCY_CONFLICT] = "idempotency_conflict",
        [SG_R_AGGREGATE_QUARANTINED] = "aggregate_quarantined",
        [SG_R_STALE_VERSION] = "stale_version",
        [SG_R_ILLEGAL_TRANSITION] = "illegal_transition",
        [SG_R_UNKNOWN_EVENT_TYPE] = "unknown_event_type",
        [SG_R_VERSION_JUMP] = "version_jump",
        [SG_R_GAP_TIMEOUT] = "gap_timeout",
        [SG_R_PARK_OVERFLOW] = "park_overflow",
        [SG_R_VERSION_CONFLICT] = "version_conflict",
};

const char *sg_reason_name(sg_reason_t r) {
        if ((int)r < 0 || r >= SG_R__CNT)
                return "";
        return reason_names[r];
}

void sg_metrics_add(sg_metrics_t *m, const sg_metrics_t *d) {
        m->records_total += d->records_total;
        m->applied_total += d->applied_total;
        m->dedup_hits_total += d->dedup_hits_total;
        m->idempotency_parameter_conflicts_total +=
            d->idempotency_parameter_conflicts_total;
        m->malformed_total += d->malformed_total;
        m->stale_version_rejections_total += d->stale_version_rejections_total;
        m->illegal_transitions_total += d->illegal_transitions_total;
        m->event_sequence_gaps_total += d->event_sequence_gaps_total;
        m->parked_total += d->parked_total;
        m->gap_timeouts_total += d->gap_timeouts_total;
        m->skipped_versions_total += d->skipped_versions_total;
        m->park_overflow_total += d->park_overflow_total;
        m->dedup_expired_total += d->dedup_expired_total;
        for (int i = 0; i < SG_R__CNT; i++)
                m->dlq_total[i] += d->dlq_total[i];
        m->snapshot_requests_total += d->snapshot_requests_total;
        m->snapshot_applied_total += d->snapshot_applied_total;
        m->snapshot_late_total += d->snapshot_late_total;
        m->snapshot_ignored_total += d->snapshot_ignored_total;
        m->snapshot_timeouts_total += d->snapshot_timeouts_total;
        m->snapshot_failures_total += d->snapshot_failures_total;
        m->snapshot_gave_up_total += d->snapshot_gave_up_total;
        m->snapshot_superseded_total += d->snapshot_superseded_total;
        m->releases_total += d->releases_total;
        m->control_ignored_total += d->control_ignored_total;
        if (d->snapshot_resolve_ms_last) {
                m->snapshot_resolve_ms_last = d->snapshot_resolve_ms_last;
                if (d->snapshot_resolve_ms_max > m->snapshot_resolve_ms_max)
                        m->snapshot_resolve_ms_max = d->snapshot_resolve_ms_max;
        }
        m->snapshot_in_flight = d->snapshot_in_flight;
        m->parked_events = d->parked_events;
        m->parked_bytes = d->parked_bytes;
        m->quarantined_aggregates = d->quarantined_aggregates;
        m->stuck_parked_over_5m = d->stuck_parked_over_5m;
        m->oldest_parked_age_ms = d->oldest_parked_age_ms;
}

int sg_metrics_json(const sg_metrics_t *m, char *buf, size_t size) {
        size_t off = 0;
        int n;
#define APPEND(...)                                                            \
        do {                                                                   \
                n = snprintf(buf ? buf + (off < size ? off : size) : NULL,    \
                             off < size ? size - off : 0, __VA_ARGS__);        \
                if (n < 0)                                                     \
                        return n;                                              \
                off += (size_t)n;                                              \
        } while (0)
        APPEND("\"records_total\":%" PRIu64 ",\"applied_total\":%" PRIu64
               ",\"dedup_hits_total\":%" PRIu64
               ",\"idempotency_parameter_conflicts_total\":%" PRIu64
               ",\"malformed_total\":%" PRIu64
               ",\"stale_version_rejections_total\":%" PRIu64
               ",\"illegal_transitions_total\":%" PRIu64
               ",\"event_sequence_gaps_total\":%" PRIu64
               ",\"parked_total\":%" PRIu64 ",\"gap_timeouts_total\":%" PRIu64
               ",\"skipped_versions_total\":%" PRIu64
               ",\"park_overflow_total\":%" PRIu64
               ",\"dedup_expired_total\":%" PRIu64,
               m->records_total, m->applied_total, m->dedup_hits_total,
               m->idempotency_parameter_conflicts_total, m->malformed_total,
               m->stale_version_rejections_total, m->illegal_transitions_total,
               m->event_sequence_gaps_total, m->parked_total,
               m->gap_timeouts_total, m->skipped_versions_total,
               m->park_overflow_total, m->dedup_expired_total);
        uint64_t dlq = 0;
        for (int i = 1; i < SG_R__CNT; i++)
                dlq += m->dlq_total[i];
        APPEND(",\"dlq_total\":%" PRIu64 ",\"dlq_by_reason\":{", dlq);
        for (int i = 1; i < SG_R__CNT; i++)
                APPEND("%s\"%s\":%" PRIu64, i > 1 ? "," : "", reason_names[i],
                       m->dlq_total[i]);
        APPEND("},\"snapshot_requests_total\":%" PRIu64
               ",\"snapshot_applied_total\":%" PRIu64
               ",\"snapshot_late_total\":%" PRIu64
               ",\"snapshot_ignored_total\":%" PRIu64
               ",\"snapshot_timeouts_total\":%" PRIu64
               ",\"snapshot_failures_total\":%" PRIu64
               ",\"snapshot_gave_up_total\":%" PRIu64
               ",\"snapshot_superseded_total\":%" PRIu64
               ",\"snapshot_resolve_ms_last\":%" PRId64
               ",\"snapshot_resolve_ms_max\":%" PRId64
               ",\"snapshot_in_flight\":%" PRId64
               ",\"releases_total\":%" PRIu64
               ",\"control_ignored_total\":%" PRIu64,
               m->snapshot_requests_total, m->snapshot_applied_total,
               m->snapshot_late_total, m->snapshot_ignored_total,
               m->snapshot_timeouts_total, m->snapshot_failures_total,
               m->snapshot_gave_up_total, m->snapshot_superseded_total,
               m->snapshot_resolve_ms_last, m->snapshot_resolve_ms_max,
               m->snapshot_in_flight, m->releases_total,
               m->control_ignored_total);
        APPEND(",\"parked_events\":%" PRId64 ",\"parked_bytes\":%" PRId64
               ",\"quarantined_aggregates\":%" PRId64
               ",\"stuck_parked_over_5m\":%" PRId64
               ",\"oldest_parked_age_ms\":%" PRId64,
               m->parked_events, m->parked_bytes, m->quarantined_aggregates,
               m->stuck_parked_over_5m, m->oldest_parked_age_ms);
#undef APPEND
        return (int)off;
}
