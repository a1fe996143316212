/*
 * sg_tables.c — prints, as one JSON object on stdout, the tables in code
 * that the reference pages of docs/ are generated from (docs/gen/gen_docs.py
 * renders them; the test doc_generated fails when a committed page is not
 * what they give):
 *
 *   config_rows   every scalar configuration key (sg_config_key(),
 *                 lib/config_keys.c cfg_rows[]): block, name, type, flags
 *                 (required, nullable, reload), default, bounds,
 *                 spellings, doc;
 *   metric_rows   every row of lib/metrics_list.h: list, name, kind,
 *                 Prometheus name, help;
 *   stats_members the members of the stats log line in the order it
 *                 writes them (sg_loop_stats_json, then sg_metrics_json, as
 *                 cmd/seqgate/main.c joins them);
 *   prometheus    the /metrics exposition (sg_metrics_prom()) of a
 *                 snapshot with the engine, one input topic and one
 *                 partition: its # HELP,
 *                 # TYPE and label names are what the table shows;
 *   dlq_headers   SG_DLQ_HEADERS (lib/engine.h): name and doc;
 *   dlq_reasons   sg_reason_name() of every reason code;
 *   exit_statuses the daemon's exit statuses (sg_exit_status(), lib/common.c):
 *                 status, name, doc and the error codes each takes.
 *
 * Reads no file, needs no broker. Exit 0, or 1 when out of memory.
 */
#include "config.h"
#include "engine.h"
#include "kafka.h"
#include "metrics.h"
#include "metrics_pub.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_name(sg_config_type_t t) {
        switch (t) {
        case SG_CONF_BOOL:
                return "bool";
        case SG_CONF_INT:
        case SG_CONF_I64:
                return "integer";
        case SG_CONF_U64:
                return "unsigned";
        case SG_CONF_SIZE:
                return "size";
        case SG_CONF_ENUM:
        case SG_CONF_ENUM_BOOL:
                return "enum";
        case SG_CONF_STRING:
                return "string";
        case SG_CONF_SRC:
                return "source";
        }
        return "?";
}

static cJSON *config_rows(void) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; a && sg_config_key(i); i++) {
                const sg_config_key_t *k = sg_config_key(i);
                cJSON *o = cJSON_CreateObject();
                if (!o)
                        return cJSON_Delete(a), NULL;
                cJSON_AddItemToArray(a, o);
                cJSON_AddStringToObject(o, "block", k->block);
                cJSON_AddStringToObject(o, "name", k->name);
                cJSON_AddStringToObject(o, "type", type_name(k->type));
                cJSON_AddBoolToObject(o, "required",
                                      (k->flags & SG_CONF_REQUIRED) != 0);
                cJSON_AddBoolToObject(o, "nullable",
                                      (k->flags & SG_CONF_NULLABLE) != 0);
                cJSON_AddBoolToObject(o, "reload",
                                      (k->flags & SG_CONF_RELOAD) != 0);
                /* an integer as text: JSON numbers lose int64 above 2^53 */
                char num[32];
                snprintf(num, sizeof(num), "%lld", (long long)k->def);
                cJSON_AddStringToObject(o, "def", num);
                if (k->def_text)
                        cJSON_AddStringToObject(o, "def_text", k->def_text);
                snprintf(num, sizeof(num), "%lld", (long long)k->min);
                cJSON_AddStringToObject(o, "min", num);
                snprintf(num, sizeof(num), "%lld", (long long)k->max);
                cJSON_AddStringToObject(o, "max", num);
                if (k->names) {
                        cJSON *n = cJSON_AddArrayToObject(o, "names");
                        for (size_t j = 0; n && k->names[j]; j++)
                                cJSON_AddItemToArray(
                                        n, cJSON_CreateString(k->names[j]));
                }
                cJSON_AddStringToObject(o, "doc", k->doc ? k->doc : "");
        }
        return a;
}

static void metric_row(cJSON *a, const char *list, const char *name,
                       const char *kind, const char *prom, const char *help) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return;
        cJSON_AddItemToArray(a, o);
        cJSON_AddStringToObject(o, "list", list);
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddStringToObject(o, "kind", kind);
        cJSON_AddStringToObject(o, "prom", prom);
        cJSON_AddStringToObject(o, "help", help);
}

static cJSON *metric_rows(void) {
        cJSON *a = cJSON_CreateArray();
        if (!a)
                return NULL;
#define ROW_ENGINE_HEAD(name, kind, prom, help)                                \
        metric_row(a, "SG_ENGINE_METRICS_HEAD", #name, #kind, prom, help);
#define ROW_ENGINE_TAIL(name, kind, prom, help)                                \
        metric_row(a, "SG_ENGINE_METRICS_TAIL", #name, #kind, prom, help);
#define ROW_LOOP(name, kind, prom, help)                                       \
        metric_row(a, "SG_LOOP_STATS", #name, #kind, prom, help);
#define ROW_PART(name, kind, prom, help)                                       \
        metric_row(a, "SG_PART_METRICS", #name, #kind, prom, help);
#define ROW_PROC(name, kind, prom, help)                                       \
        metric_row(a, "SG_PROCESS_METRICS", #name, #kind, prom, help);
        SG_ENGINE_METRICS_HEAD(ROW_ENGINE_HEAD)
        SG_ENGINE_METRICS_TAIL(ROW_ENGINE_TAIL)
        SG_LOOP_STATS(ROW_LOOP)
        SG_PART_METRICS(ROW_PART)
        SG_PROCESS_METRICS(ROW_PROC)
        return a;
}

/** The member names of "{" @p members "}", in order, into @p a. */
static int add_members(cJSON *a, const char *members) {
        size_t n = strlen(members);
        char *obj = malloc(n + 3);
        if (!obj)
                return -1;
        obj[0] = '{';
        memcpy(obj + 1, members, n);
        obj[n + 1] = '}';
        obj[n + 2] = '\0';
        cJSON *o = cJSON_Parse(obj);
        free(obj);
        if (!o)
                return -1;
        for (cJSON *m = o->child; m; m = m->next)
                cJSON_AddItemToArray(a, cJSON_CreateString(m->string));
        cJSON_Delete(o);
        return 0;
}

static cJSON *stats_members(void) {
        static sg_loop_stats_t loop;
        static sg_metrics_t eng;
        static char buf[65536];
        cJSON *a = cJSON_CreateArray();
        if (!a)
                return NULL;
        int n = sg_loop_stats_json(&loop, buf, sizeof(buf));
        if (n < 0 || (size_t)n >= sizeof(buf) || add_members(a, buf))
                return cJSON_Delete(a), NULL;
        n = sg_metrics_json(&eng, buf, sizeof(buf));
        if (n < 0 || (size_t)n >= sizeof(buf) || add_members(a, buf))
                return cJSON_Delete(a), NULL;
        return a;
}

static cJSON *prometheus(void) {
        sg_metrics_snap_t snap;
        char *text = NULL;
        size_t len = 0;
        memset(&snap, 0, sizeof(snap));
        snap.has_engine = true;
        if (sg_metrics_snap_reserve(&snap, 1) != SG_OK)
                return NULL;
        /* every value 0: a negative one (an unknown lag) has no sample */
        memset(&snap.parts[0], 0, sizeof(snap.parts[0]));
        snprintf(snap.parts[0].topic, sizeof(snap.parts[0].topic), "T");
        snap.part_cnt = 1;
        /* and one input topic's engine metrics (label topic) */
        static const sg_metrics_t zero;
        if (sg_metrics_snap_topic_add(&snap, "T", &zero) != SG_OK) {
                sg_metrics_snap_free(&snap);
                return NULL;
        }
        sg_err_t err = sg_metrics_prom(&snap, "V", &text, &len);
        sg_metrics_snap_free(&snap);
        if (err != SG_OK)
                return NULL;
        cJSON *s = cJSON_CreateString(text);
        free(text);
        return s;
}

static cJSON *dlq_headers(void) {
        cJSON *a = cJSON_CreateArray();
#define DLQ_ROW(name, doc)                                                     \
        do {                                                                   \
                cJSON *o_ = cJSON_CreateObject();                              \
                if (o_) {                                                      \
                        cJSON_AddItemToArray(a, o_);                           \
                        cJSON_AddStringToObject(o_, "define", #name);          \
                        cJSON_AddStringToObject(o_, "name", name);             \
                        cJSON_AddStringToObject(o_, "doc", doc);               \
                }                                                              \
        } while (0);
        if (a) {
                SG_DLQ_HEADERS(DLQ_ROW)
        }
        return a;
}

static cJSON *dlq_reasons(void) {
        cJSON *a = cJSON_CreateArray();
        for (int r = 1; a && r < SG_R__CNT; r++)
                cJSON_AddItemToArray(
                        a, cJSON_CreateString(sg_reason_name((sg_reason_t)r)));
        return a;
}

static cJSON *exit_statuses(void) {
        cJSON *a = cJSON_CreateArray();
        const sg_exit_status_t *x;
        for (size_t i = 0; a && (x = sg_exit_status(i)); i++) {
                cJSON *o = cJSON_CreateObject();
                cJSON *errs = cJSON_AddArrayToObject(o, "errors");
                cJSON_AddNumberToObject(o, "status", x->status);
                cJSON_AddStringToObject(o, "name", x->name);
                cJSON_AddStringToObject(o, "doc", x->doc);
                for (size_t k = 0; k < SG_EXIT_ERRS && x->errs[k]; k++)
                        cJSON_AddItemToArray(
                                errs,
                                cJSON_CreateString(sg_err2str(x->errs[k])));
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

int main(void) {
        cJSON *root = cJSON_CreateObject();
        cJSON *parts[] = {config_rows(),  metric_rows(), stats_members(),
                          prometheus(),   dlq_headers(), dlq_reasons(),
                          exit_statuses()};
        const char *names[] = {"config_rows",  "metric_rows", "stats_members",
                               "prometheus",   "dlq_headers", "dlq_reasons",
                               "exit_statuses"};
        int bad = !root;
        for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
                if (!parts[i] || bad) {
                        cJSON_Delete(parts[i]);
                        bad = 1;
                        continue;
                }
                cJSON_AddItemToObject(root, names[i], parts[i]);
        }
        char *out = bad ? NULL : cJSON_Print(root);
        cJSON_Delete(root);
        if (!out) {
                fputs("sg_tables: out of memory\n", stderr);
                return 1;
        }
        puts(out);
        free(out);
        return 0;
}
