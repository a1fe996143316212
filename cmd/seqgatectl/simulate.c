/*
 * simulate.c — seqgatectl simulate: tries a config offline. Runs the real
 * engine (simrun.h) over an NDJSON file of records and steps, with a store
 * in a fresh temporary directory, and prints each verdict with its reason
 * (docs/seqgatectl.md "seqgatectl simulate"); --expect compares the verdicts
 * with a file that --json wrote.
 */
#include "cli.h"

#include "config.h"
#include "json.h"
#include "processor.h"
#include "seqgate.h"
#include "simrun.h"
#include "timeparse.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The clock a simulation starts at, unless a {"clock"} step moves it:
 * 2026-01-01T00:00:00Z. */
#define SIM_START_MS 1767225600000LL

/* Back-pressure pauses a record may meet before simulate gives up. */
#define SIM_MAX_PAUSES 1000

static const char simulate_help[] =
        "usage: seqgatectl simulate --config FILE INPUT [--expect EXPECTED] "
        "[--topic T]\n"
        "                           [--partition P] [--json]\n"
        "\n"
        "Run seqgate's engine offline over INPUT (NDJSON; '-' is stdin), "
        "with a\n"
        "store in a temporary directory, and print each verdict. A line is "
        "a\n"
        "record {\"key\", \"headers\", \"value\", \"timestamp\", "
        "\"topic\", \"partition\",\n"
        "\"offset\"} or a step: {\"advance_ms\": N}, {\"clock\": TIME}, "
        "{\"snapshot\":\n"
        "{\"aggregate\", \"status\", \"body\"}}. Exit 2: usage, config or "
        "input error\n"
        "(the input line named).\n"
        "\n"
        "  -e, --expect EXPECTED  compare the --json verdicts with EXPECTED: "
        "exit 0\n"
        "                         equal, 1 different (the differences "
        "printed)\n"
        "  -t, --topic T          the topic of records that name none "
        "(default:\n"
        "                         the config's first input topic)\n"
        "  -p, --partition P      the partition of records that name none "
        "(default 0)\n";

/* One input line, read whole before the run (the lag needs what
 * follows). */
typedef struct line {
        size_t no; /* 1-based line number */
        cJSON *j;
        char *text;
        bool step;
        const char *topic; /* records */
        int32_t partition;
} line_t;

typedef struct sim_cli {
        const char *input;
        const char *def_topic;
        int32_t def_partition;
        bool json;
        bool collect; /* --expect: keep the JSON lines */
        line_t *lines;
        size_t line_cnt;
        size_t cur; /* index of the line being run */
        char **out; /* collected JSON lines */
        size_t out_cnt, out_cap;
        bool nomem;
} sim_cli_t;

/* ---- output ------------------------------------------------------------- */

static cJSON *verdict_json(const sim_cli_t *c, const sg_sim_verdict_t *v) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", v->kind);
        j_u64(o, "line", c->lines[c->cur].no);
        cJSON_AddStringToObject(o, "verdict", v->verdict);
        if (v->topic)
                cJSON_AddStringToObject(o, "topic", v->topic);
        if (v->partition >= 0)
                j_i64(o, "partition", v->partition);
        if (v->offset >= 0)
                j_i64(o, "offset", v->offset);
        if (v->aggregate)
                cJSON_AddStringToObject(o, "aggregate", v->aggregate);
        if (v->has_version)
                j_u64(o, "version", v->version);
        if (v->type)
                cJSON_AddStringToObject(o, "type", v->type);
        if (v->reason)
                cJSON_AddStringToObject(o, "reason", v->reason);
        if (v->detail)
                cJSON_AddStringToObject(o, "detail", v->detail);
        if (v->has_waiting_for)
                j_u64(o, "waiting_for", v->waiting_for);
        if (v->state)
                cJSON_AddStringToObject(o, "state", v->state);
        if (v->request_id)
                cJSON_AddStringToObject(o, "request_id", v->request_id);
        if (v->url)
                cJSON_AddStringToObject(o, "url", v->url);
        return o;
}

/* The readable line of a verdict (docs/seqgatectl.md "seqgatectl simulate"). */
static void verdict_text(const sim_cli_t *c, const sg_sim_verdict_t *v) {
        char what[1024] = "";
        size_t n = 0;
#define ADD(...)                                                               \
        do {                                                                   \
                int k_ = snprintf(what + n, sizeof(what) - n, __VA_ARGS__);    \
                if (k_ > 0)                                                    \
                        n = n + (size_t)k_ < sizeof(what) ? n + (size_t)k_     \
                                                          : sizeof(what) - 1;  \
        } while (0)
        if (!strcmp(v->kind, "record")) {
                if (!strcmp(v->verdict, "snapshot_reply"))
                        ADD("snapshot reply  ");
                else if (v->topic && (strcmp(v->topic, c->def_topic) ||
                                      v->partition != c->def_partition))
                        ADD("%s [%" PRId32 "] offset %" PRId64 "  ", v->topic,
                            v->partition, v->offset);
                else
                        ADD("offset %" PRId64 "  ", v->offset);
        } else {
                ADD("        ");
        }
        if (!strcmp(v->verdict, "snapshot") && v->has_version)
                ADD("S%" PRIu64 " ", v->version);
        else if (v->has_version)
                ADD("v%" PRIu64 " ", v->version);
        if (v->aggregate)
                ADD("%s  ", v->aggregate);
        const char *vd = v->verdict;
        if (!strcmp(vd, "applied")) {
                ADD("applied");
                if (v->detail)
                        ADD(" (gap %s)", v->detail);
        } else if (!strcmp(vd, "released")) {
                ADD("applied (released from park)");
        } else if (!strcmp(vd, "duplicate")) {
                ADD("duplicate (dropped)");
        } else if (!strcmp(vd, "parked")) {
                if (v->has_waiting_for)
                        ADD("parked (waiting for v%" PRIu64 ")",
                            v->waiting_for);
                else
                        ADD("parked");
        } else if (!strcmp(vd, "dlq")) {
                ADD("dlq %s", v->reason ? v->reason : "?");
                if (v->detail)
                        ADD(" (%s)", v->detail);
        } else if (!strcmp(vd, "snapshot")) {
                ADD("snapshot record%s%s%s", v->state ? " (state " : "",
                    v->state ? v->state : "", v->state ? ")" : "");
        } else if (!strcmp(vd, "snapshot_request")) {
                ADD("snapshot request sent");
                if (v->url)
                        ADD(" (GET %s)", v->url);
        } else if (!strcmp(vd, "snapshot_reply")) {
                ADD("%s", v->detail ? v->detail : "");
        } else if (!strcmp(vd, "stale_dropped")) {
                ADD("stale (dropped)");
        } else if (!strcmp(vd, "none")) {
                ADD("no effect");
        } else {
                ADD("%s", vd);
        }
#undef ADD
        printf("%s\n", what);
}

/* Prints JSON object @p o (--json), or keeps its text for --expect.
 * Takes @p o. */
static void json_out(sim_cli_t *c, cJSON *o) {
        if (!c->collect) {
                print_json_line(o);
                cJSON_Delete(o);
                return;
        }
        char *t = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (t && c->out_cnt == c->out_cap) {
                size_t cap = c->out_cap ? 2 * c->out_cap : 64;
                char **n = realloc(c->out, cap * sizeof(*n));
                if (!n) {
                        free(t);
                        t = NULL;
                } else {
                        c->out = n;
                        c->out_cap = cap;
                }
        }
        if (!t)
                c->nomem = true;
        else
                c->out[c->out_cnt++] = t;
}

static void on_verdict(void *opaque, const sg_sim_verdict_t *v) {
        sim_cli_t *c = opaque;
        if (!c->json && !c->collect)
                verdict_text(c, v);
        else
                json_out(c, verdict_json(c, v));
}

static void step_print(sim_cli_t *c, int64_t now) {
        char b[48];
        sg_iso_time(now, b, sizeof(b));
        if (!c->json && !c->collect) {
                printf("-- clock %s\n", b);
                return;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", "clock");
        j_u64(o, "line", c->lines[c->cur].no);
        cJSON_AddStringToObject(o, "time", b);
        json_out(c, o);
}

/* ---- input ------------------------------------------------------------- */

/* A time member: RFC 3339 text or integer milliseconds. */
static bool time_member(const cJSON *j, int64_t *out) {
        if (cJSON_IsString(j))
                return parse_rfc3339(j->valuestring, out);
        if (cJSON_IsNumber(j) && j->valuedouble >= 0 &&
            j->valuedouble < 9.0e15 &&
            j->valuedouble == (double)(int64_t)j->valuedouble) {
                *out = (int64_t)j->valuedouble;
                return true;
        }
        return false;
}

static bool int_member(const cJSON *j, int64_t min, int64_t max, int64_t *out) {
        if (!cJSON_IsNumber(j) || j->valuedouble < (double)min ||
            j->valuedouble > (double)max ||
            j->valuedouble != (double)(int64_t)j->valuedouble)
                return false;
        *out = (int64_t)j->valuedouble;
        return true;
}

/* Prints "FILE:LINE: message" and returns EXIT_USAGE. */
static int input_error(const sim_cli_t *c, size_t no, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int input_error(const sim_cli_t *c, size_t no, const char *fmt, ...) {
        char msg[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        errf("%s:%zu: %s", c->input, no, msg);
        return EXIT_USAGE;
}

static const char *const record_members[] = {
        "key",   "headers",   "value",  "timestamp",
        "topic", "partition", "offset", NULL};

/* Reads INPUT into c->lines, checking each line's shape. */
static int input_read(sim_cli_t *c, const sg_config_t *conf) {
        FILE *f = strcmp(c->input, "-") ? fopen(c->input, "r") : stdin;
        if (!f) {
                errf("%s: %s", c->input, strerror(errno));
                return EXIT_USAGE;
        }
        char *buf = NULL;
        size_t cap = 0, no = 0;
        ssize_t len;
        int rc = 0;
        while (!rc && (len = getline(&buf, &cap, f)) >= 0) {
                no++;
                while (len > 0 &&
                       (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
                        buf[--len] = '\0';
                size_t sp = strspn(buf, " \t");
                if (buf[sp] == '\0')
                        continue; /* blank */
                cJSON *j = cJSON_ParseWithLength(buf, (size_t)len);
                if (!j || !cJSON_IsObject(j)) {
                        cJSON_Delete(j);
                        rc = input_error(c, no, "not a JSON object");
                        break;
                }
                line_t *n = realloc(c->lines, (c->line_cnt + 1) * sizeof(*n));
                char *t = strdup(buf);
                if (!n || !t) {
                        free(t);
                        if (n)
                                c->lines = n;
                        cJSON_Delete(j);
                        errf("out of memory");
                        rc = EXIT_RUNTIME;
                        break;
                }
                c->lines = n;
                line_t *l = &c->lines[c->line_cnt++];
                *l = (line_t){.no = no, .j = j, .text = t};
                bool adv = cJSON_HasObjectItem(j, "advance_ms"),
                     clk = cJSON_HasObjectItem(j, "clock"),
                     snap = cJSON_HasObjectItem(j, "snapshot");
                l->step = adv || clk || snap;
                if (l->step) {
                        if (cJSON_GetArraySize(j) != 1) {
                                rc = input_error(c, no,
                                                 "a step has exactly one "
                                                 "member: advance_ms, clock "
                                                 "or snapshot");
                                break;
                        }
                        continue;
                }
                for (const cJSON *m = j->child; m; m = m->next) {
                        bool known = false;
                        for (size_t i = 0; record_members[i] && !known; i++)
                                known = !strcmp(m->string, record_members[i]);
                        if (!known) {
                                rc = input_error(c, no,
                                                 "unknown member \"%s\" (a "
                                                 "record has key, headers, "
                                                 "value, timestamp, topic, "
                                                 "partition, offset)",
                                                 m->string);
                                break;
                        }
                }
                const cJSON *jt = cJSON_GetObjectItemCaseSensitive(j, "topic");
                const cJSON *jp =
                        cJSON_GetObjectItemCaseSensitive(j, "partition");
                int64_t p = c->def_partition;
                if (!rc && jt && !cJSON_IsString(jt))
                        rc = input_error(c, no, "\"topic\" is not a string");
                if (!rc && jp && !int_member(jp, 0, INT32_MAX, &p))
                        rc = input_error(c, no,
                                         "\"partition\" is not a partition "
                                         "number");
                l->topic = jt && cJSON_IsString(jt) ? jt->valuestring
                                                    : c->def_topic;
                l->partition = (int32_t)p;
                if (!rc && !sg_config_topic(conf, l->topic) &&
                    strcmp(l->topic, SG_SNAPSHOT_HTTP_TOPIC)) {
                        bool reply = false;
                        for (size_t i = 0; i < conf->topic_cnt; i++)
                                reply = reply ||
                                        (conf->topics[i].snapshot.reply_topic &&
                                         !strcmp(conf->topics[i]
                                                         .snapshot.reply_topic,
                                                 l->topic));
                        if (!reply)
                                rc = input_error(c, no,
                                                 "topic \"%s\" is neither an "
                                                 "input topic nor a snapshot "
                                                 "reply topic of the config",
                                                 l->topic);
                }
        }
        free(buf);
        if (f != stdin)
                fclose(f);
        return rc;
}

/* Records of @p topic [@p partition] after the current line, before the
 * next step: what the loop would see as lag (the file is the log; a step
 * is time passing with everything before it read). */
static int64_t lag_of(void *opaque, const char *topic, int32_t partition) {
        const sim_cli_t *c = opaque;
        int64_t lag = 0;
        for (size_t i = c->cur + 1; i < c->line_cnt && !c->lines[i].step; i++)
                if (c->lines[i].partition == partition &&
                    !strcmp(c->lines[i].topic, topic))
                        lag++;
        return lag;
}

/* Offsets given to records without an "offset": one past the previous
 * record's of the partition. */
typedef struct next_off {
        const char *topic;
        int32_t partition;
        int64_t next;
} next_off_t;

static int run_record(sim_cli_t *c, sg_sim_t *sim, const sg_config_t *conf,
                      const line_t *l, next_off_t **nop, size_t *no_cnt) {
        const cJSON *j = l->j;
        const cJSON *jk = cJSON_GetObjectItemCaseSensitive(j, "key");
        const cJSON *jh = cJSON_GetObjectItemCaseSensitive(j, "headers");
        const cJSON *jv = cJSON_GetObjectItemCaseSensitive(j, "value");
        const cJSON *jts = cJSON_GetObjectItemCaseSensitive(j, "timestamp");
        const cJSON *jo = cJSON_GetObjectItemCaseSensitive(j, "offset");
        if (jk && !cJSON_IsString(jk) && !cJSON_IsNull(jk))
                return input_error(c, l->no, "\"key\" is not a string or null");
        if (jh && !cJSON_IsObject(jh))
                return input_error(c, l->no, "\"headers\" is not an object");
        int64_t ts = sg_sim_clock(sim);
        if (jts && !time_member(jts, &ts))
                return input_error(c, l->no,
                                   "\"timestamp\" is neither RFC 3339 text "
                                   "nor milliseconds");
        next_off_t *no = NULL;
        for (size_t i = 0; i < *no_cnt && !no; i++)
                if ((*nop)[i].partition == l->partition &&
                    !strcmp((*nop)[i].topic, l->topic))
                        no = &(*nop)[i];
        if (!no) {
                next_off_t *n = realloc(*nop, (*no_cnt + 1) * sizeof(*n));
                if (!n) {
                        errf("out of memory");
                        return EXIT_RUNTIME;
                }
                *nop = n;
                no = &n[(*no_cnt)++];
                *no = (next_off_t){l->topic, l->partition, 0};
        }
        int64_t off = no->next;
        if (jo && !int_member(jo, 0, INT64_MAX / 2, &off))
                return input_error(c, l->no, "\"offset\" is not an offset");
        if (off < no->next)
                return input_error(c, l->no,
                                   "offset %" PRId64 " is below the next "
                                   "offset %" PRId64 " of %s [%" PRId32 "]",
                                   off, no->next, l->topic, l->partition);
        int hc = jh ? cJSON_GetArraySize(jh) : 0;
        sg_header_t *hd = calloc((size_t)hc + 1, sizeof(*hd));
        if (!hd) {
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        int i = 0, rc = 0;
        for (const cJSON *m = jh ? jh->child : NULL; m; m = m->next, i++) {
                if (!cJSON_IsString(m) && !cJSON_IsNull(m)) {
                        rc = input_error(c, l->no,
                                         "header \"%s\" is not a string or "
                                         "null",
                                         m->string);
                        break;
                }
                hd[i].name = m->string;
                hd[i].value = cJSON_IsString(m) ? m->valuestring : NULL;
                hd[i].value_len =
                        cJSON_IsString(m) ? strlen(m->valuestring) : 0;
        }
        /* value: a string is its bytes; null or absent a tombstone; any
         * other JSON its canonical text (json.h: number text kept) */
        char *canon = NULL;
        size_t canon_len = 0;
        const void *val = NULL;
        size_t val_len = 0;
        char es[512];
        if (!rc && cJSON_IsString(jv)) {
                val = jv->valuestring;
                val_len = strlen(jv->valuestring);
        } else if (!rc && jv && !cJSON_IsNull(jv)) {
                if (sg_json_canonicalize(l->text, strlen(l->text), "/value",
                                         &canon, &canon_len, es,
                                         sizeof(es)) != SG_OK)
                        rc = input_error(c, l->no, "\"value\": %s", es);
                val = canon;
                val_len = canon_len;
        }
        const char *key = cJSON_GetStringValue(jk); /* NULL: no key */
        const sg_record_t rec = {
                .topic = l->topic,
                .partition = l->partition,
                .offset = off,
                .timestamp_ms = ts,
                .key = key,
                .key_len = key ? strlen(key) : 0,
                .value = val,
                .value_len = val_len,
                .headers = hd,
                .header_cnt = (size_t)hc,
        };
        bool paused = false;
        sg_err_t err =
                rc ? SG_OK : sg_sim_record(sim, &rec, &paused, es, sizeof(es));
        if (err == SG_ERR_INVALID || err == SG_ERR_CONFIG) {
                rc = input_error(c, l->no, "%s", es);
        } else if (err) {
                errf("%s:%zu: %s", c->input, l->no, es);
                rc = EXIT_RUNTIME;
        }
        /* the runner keeps a paused record and offers it again once the
         * loop would re-read it, pause_retry_ms later */
        for (int pauses = 1; !rc && paused; pauses++) {
                if (pauses > SIM_MAX_PAUSES) {
                        errf("%s:%zu: the partition stayed paused "
                             "(back-pressure) for %d retries",
                             c->input, l->no, pauses - 1);
                        rc = EXIT_RUNTIME;
                        break;
                }
                err = sg_sim_clock_set(sim,
                                       sg_sim_clock(sim) + conf->pause_retry_ms,
                                       es, sizeof(es));
                if (err) {
                        errf("%s:%zu: %s", c->input, l->no, es);
                        rc = EXIT_RUNTIME;
                }
                paused = sg_sim_pending(sim) > 0;
        }
        if (!rc)
                no->next = off + 1;
        free(canon);
        free(hd);
        return rc;
}

static int run_step(sim_cli_t *c, sg_sim_t *sim, const line_t *l) {
        const cJSON *j = l->j->child;
        char es[512];
        sg_err_t err;
        if (!strcmp(j->string, "advance_ms") || !strcmp(j->string, "clock")) {
                int64_t now;
                if (!strcmp(j->string, "advance_ms")) {
                        int64_t d;
                        if (!int_member(j, 0, INT64_MAX / 4, &d))
                                return input_error(c, l->no,
                                                   "\"advance_ms\" is not a "
                                                   "number of milliseconds");
                        now = sg_sim_clock(sim) + d;
                } else if (!time_member(j, &now)) {
                        return input_error(c, l->no,
                                           "\"clock\" is neither RFC 3339 "
                                           "text nor milliseconds");
                }
                step_print(c, now);
                err = sg_sim_clock_set(sim, now, es, sizeof(es));
        } else {
                const cJSON *ja =
                        cJSON_GetObjectItemCaseSensitive(j, "aggregate");
                const cJSON *jr =
                        cJSON_GetObjectItemCaseSensitive(j, "request_id");
                const cJSON *js = cJSON_GetObjectItemCaseSensitive(j, "status");
                const cJSON *jb = cJSON_GetObjectItemCaseSensitive(j, "body");
                int64_t status = 200;
                if (!cJSON_IsObject(j) ||
                    !(cJSON_IsString(ja) || cJSON_IsString(jr)))
                        return input_error(c, l->no,
                                           "\"snapshot\" needs \"aggregate\" "
                                           "or \"request_id\"");
                if (js && !int_member(js, 0, 999, &status))
                        return input_error(c, l->no,
                                           "\"status\" is not an HTTP status");
                char *body = NULL;
                size_t body_len = 0;
                if (cJSON_IsString(jb)) {
                        body = strdup(jb->valuestring);
                        body_len = body ? strlen(body) : 0;
                } else if (jb && !cJSON_IsNull(jb) &&
                           sg_json_canonicalize(
                                   l->text, strlen(l->text), "/snapshot/body",
                                   &body, &body_len, es, sizeof(es)) != SG_OK) {
                        return input_error(c, l->no, "\"body\": %s", es);
                }
                err = sg_sim_snapshot_reply(
                        sim, cJSON_IsString(ja) ? ja->valuestring : NULL,
                        cJSON_IsString(jr) ? jr->valuestring : NULL,
                        (int)status, body, body_len, es, sizeof(es));
                free(body);
                if (err == SG_ERR_NOT_FOUND || err == SG_ERR_INVALID)
                        return input_error(c, l->no, "%s", es);
        }
        if (err == SG_ERR_INVALID)
                return input_error(c, l->no, "%s", es);
        if (err) {
                errf("%s:%zu: %s", c->input, l->no, es);
                return EXIT_RUNTIME;
        }
        return 0;
}

/* ---- --expect ------------------------------------------------------------ */

/* The canonical form of one JSON line (member order and spacing do not
 * count), NULL when it is not JSON. */
static char *canon_line(const char *t) {
        char *out = NULL, es[128];
        size_t n;
        if (sg_json_canonicalize(t, strlen(t), "", &out, &n, es, sizeof(es)))
                return NULL;
        return out;
}

/* Compares the collected verdicts with EXPECTED; prints the first
 * differences. Returns 0 equal, 1 different, EXIT_USAGE (EXPECTED). */
static int expect_compare(const sim_cli_t *c, const char *path) {
        FILE *f = fopen(path, "r");
        if (!f) {
                errf("%s: %s", path, strerror(errno));
                return EXIT_USAGE;
        }
        char *buf = NULL;
        size_t cap = 0, no = 0, k = 0, shown = 0, diffs = 0;
        ssize_t len;
        int rc = 0;
        while ((len = getline(&buf, &cap, f)) >= 0) {
                no++;
                while (len > 0 &&
                       (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
                        buf[--len] = '\0';
                if (buf[strspn(buf, " \t")] == '\0')
                        continue;
                char *e = canon_line(buf);
                if (!e) {
                        errf("%s:%zu: not a JSON line", path, no);
                        rc = EXIT_USAGE;
                        break;
                }
                char *a = k < c->out_cnt ? canon_line(c->out[k]) : NULL;
                if (!a || strcmp(a, e)) {
                        diffs++;
                        if (shown++ < 10) {
                                printf("%s:%zu: verdict %zu differs\n"
                                       "  - expected %s\n"
                                       "  + actual   %s\n",
                                       path, no, k + 1, buf,
                                       k < c->out_cnt ? c->out[k]
                                                      : "(none: the run "
                                                        "ended)");
                        }
                }
                free(a);
                free(e);
                k++;
        }
        free(buf);
        fclose(f);
        if (rc)
                return rc;
        for (; k < c->out_cnt; k++) {
                diffs++;
                if (shown++ < 10)
                        printf("%s: verdict %zu not expected\n"
                               "  + actual   %s\n",
                               path, k + 1, c->out[k]);
        }
        if (diffs) {
                printf("FAIL: %zu of the verdicts differ from %s\n", diffs,
                       path);
                return 1;
        }
        printf("OK: %zu verdicts match %s\n", c->out_cnt, path);
        return 0;
}

/* ---- the command --------------------------------------------------------- */

static int simulate_run(sim_cli_t *c, const sg_config_t *conf,
                        const char *expect) {
        char es[512];
        sg_sim_t *sim = NULL;
        next_off_t *nos = NULL;
        size_t no_cnt = 0;
        sg_err_t err = sg_sim_new(conf, SIM_START_MS, on_verdict, lag_of, c,
                                  &sim, es, sizeof(es));
        if (err) {
                errf("simulate: %s", es);
                return EXIT_RUNTIME;
        }
        int rc = 0;
        for (c->cur = 0; !rc && c->cur < c->line_cnt; c->cur++) {
                const line_t *l = &c->lines[c->cur];
                rc = l->step ? run_step(c, sim, l)
                             : run_record(c, sim, conf, l, &nos, &no_cnt);
                if (!rc && c->nomem) {
                        errf("out of memory");
                        rc = EXIT_RUNTIME;
                }
        }
        if (c->cur)
                c->cur--;
        sg_sim_destroy(sim);
        free(nos);
        if (!rc && expect)
                rc = expect_compare(c, expect);
        return rc;
}

int cmd_simulate(int argc, char **argv) {
        static const struct option opts[] = {
                {"expect", required_argument, NULL, 'e'},
                {"topic", required_argument, NULL, 't'},
                {"partition", required_argument, NULL, 'p'},
                {NULL, 0, NULL, 0}};
        cli_common_t cc = {.help = simulate_help, .operands = 1};
        const char *expect = NULL;
        sim_cli_t c = {0};
        int64_t part = 0;
        int ch, rc = 0;
        while (!rc && (ch = cli_getopt(&cc, argc, argv, "e:t:p:", opts)) >= 0) {
                switch (ch) {
                case 'e':
                        expect = optarg;
                        break;
                case 't':
                        c.def_topic = optarg;
                        break;
                case 'p':
                        if (!parse_i64(optarg, 0, INT32_MAX, &part))
                                rc = usage_error("--partition: '%s' is not a "
                                                 "partition number",
                                                 optarg);
                        break;
                }
        }
        if (!rc && ch == CLI_STOP)
                return cc.rc;
        const char *config = cc.config;
        c.json = cc.json;
        if (!rc && !config)
                rc = usage_error("--config FILE is required");
        if (!rc && optind == argc)
                rc = usage_error("an INPUT file is required");
        if (rc)
                return rc;
        c.input = argv[optind];
        c.def_partition = (int32_t)part;
        c.collect = expect != NULL;
        sg_config_t *conf = NULL;
        if ((rc = cli_config_load(&cc, &conf)))
                return rc;
        /* the simulation's store has no changelog to restore a lost
         * checkpoint from (semantics §6): every batch is committed */
        conf->checkpoint_interval_ms = 0;
        if (!c.def_topic)
                c.def_topic = conf->topics[0].name;
        else if (!sg_config_topic(conf, c.def_topic))
                rc = usage_error("--topic: '%s' is not an input topic of %s",
                                 c.def_topic, config);
        if (!rc)
                rc = input_read(&c, conf);
        if (!rc)
                rc = simulate_run(&c, conf, expect);
        for (size_t i = 0; i < c.line_cnt; i++) {
                cJSON_Delete(c.lines[i].j);
                free(c.lines[i].text);
        }
        free(c.lines);
        for (size_t i = 0; i < c.out_cnt; i++)
                free(c.out[i]);
        free(c.out);
        sg_config_destroy(conf);
        return rc;
}
