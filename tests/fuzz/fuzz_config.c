/*
 * fuzz_config.c — libFuzzer target: sg_config_parse() and
 * sg_config_parse_yaml() on any text (the configuration file, JSON or
 * YAML; every check below holds for both). Built and run by
 * tests/fuzz/run.sh (docs/testing.md "Fuzzing"); seeds are the JSON files
 * of examples/ and tests/schema/invalid/, and YAML ones.
 *
 * Checked beyond "no crash, no leak, no UB" (a violation aborts):
 *  - the result is SG_OK or SG_ERR_CONFIG (SG_ERR_NOMEM only if allocation
 *    failed), *confp is NULL on error;
 *  - an error is one line of NUL-terminated, printable, valid UTF-8 (what
 *    the file holds is quoted with \xNN escapes);
 *  - a loaded config has what config.h promises: every topic named, with
 *    output and DLQ topics, an id source, and a digest pointer that is a
 *    JSON Pointer ("/data" or under it with format cloudevents);
 *  - a secret's value never appears in the error text: every input gets a
 *    variant with "sasl.password" set to a marker, which must not be echoed;
 *    nor does a value from the environment (the variant's "client.id" is
 *    "${SG_FUZZ_SECRET}", docs/configuration.md "Secrets and environment
 * variables").
 *
 * ${VAR} references read the environment: it is cleared and set to fixed
 * values at start, so that a finding replays the same anywhere.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clearenv */
#endif
#include "config.h"
#include "envelope.h" /* sg_utf8_valid */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARKER "Zq9SECRETzq9"
#define ENV_MARKER "Xw7ENVSECRETxw7"

static void die(const char *what, const char *detail) {
        fprintf(stderr, "fuzz_config: %s%s%s\n", what, detail ? ": " : "",
                detail ? detail : "");
        abort();
}

static void check_loaded(const sg_config_t *conf) {
        if (!conf)
                die("SG_OK without a config", NULL);
        for (size_t i = 0; i < conf->topic_cnt; i++) {
                const sg_topic_config_t *tc = &conf->topics[i];
                const char *d = tc->digest_pointer;
                if (!tc->name || !tc->output_topic || !tc->dlq_topic)
                        die("topic without name, output or DLQ topic",
                            tc->name);
                if (tc->id.kind == SG_SRC_NONE)
                        die("topic without id source", tc->name);
                if (d && d[0] != '/')
                        die("digest pointer is not a JSON Pointer", d);
                if (d && tc->format == SG_FORMAT_CLOUDEVENTS &&
                    strcmp(d, "/data") != 0 && strncmp(d, "/data/", 6) != 0)
                        die("cloudevents digest pointer outside /data", d);
                if (sg_config_topic(conf, tc->name) != tc)
                        die("sg_config_topic does not find its topic",
                            tc->name);
        }
}

static void parse_one(const char *text, bool secret_marked, bool yaml) {
        sg_config_t *conf = (sg_config_t *)0x1;
        char err[1024];
        sg_err_t e;

        memset(err, 'X', sizeof(err));
        e = yaml ? sg_config_parse_yaml(text, &conf, err, sizeof(err))
                 : sg_config_parse(text, &conf, err, sizeof(err));
        if (e == SG_OK) {
                check_loaded(conf);
                sg_config_destroy(conf);
                return;
        }
        if (e != SG_ERR_CONFIG && e != SG_ERR_NOMEM)
                die("unexpected error code", sg_err2str(e));
        if (conf != NULL)
                die("*confp not NULL on error", NULL);
        if (!memchr(err, '\0', sizeof(err)))
                die("error text not NUL-terminated", NULL);
        if (err[0] == '\0')
                die("empty error text", NULL);
        /* one line per error: '\n' separates them, nothing else */
        for (const char *p = err; *p; p++)
                if (((unsigned char)*p < 0x20 && *p != '\n') || *p == 0x7f ||
                    (*p == '\n' && (p == err || p[1] == '\0' || p[1] == '\n')))
                        die("control character in error text", NULL);
        if (!sg_utf8_valid(err, strlen(err)))
                die("error text is not valid UTF-8", NULL);
        if (secret_marked && strstr(err, MARKER))
                die("secret value echoed in an error", err);
        if (secret_marked && strstr(err, ENV_MARKER))
                die("value from the environment echoed in an error", err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
        (void)argc;
        (void)argv;
        clearenv();
        setenv("SG_FUZZ_SECRET", ENV_MARKER, 1);
        setenv("SG_FUZZ_A", "a", 1);
        setenv("SG_FUZZ_EMPTY", "", 1);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char pre[] =
                "{\"kafka\":{\"sasl.password\":\"" MARKER "\","
                "\"client.id\":\"${SG_FUZZ_SECRET}\"},";
        static const char pre_yaml[] =
                "kafka: {sasl.password: " MARKER ", client.id: "
                "\"${SG_FUZZ_SECRET}\"}\n";
        char *text = malloc(size + 1), *variant;
        const char *brace;

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0'; /* sg_config_parse takes a C string */
        parse_one(text, false, false);
        parse_one(text, false, true);

        /* The same document with a secret in front of its members: the
         * first "{" becomes the marked prefix. Duplicate "kafka" members
         * and the rest are the parser's business; the marker must never be
         * printed. */
        brace = strchr(text, '{');
        if (brace && (variant = malloc(size + sizeof(pre) + 1))) {
                size_t head = (size_t)(brace - text);
                memcpy(variant, text, head);
                memcpy(variant + head, pre, sizeof(pre) - 1);
                strcpy(variant + head + sizeof(pre) - 1, brace + 1);
                /* (when the input holds the marker itself, it may be
                 * quoted as a key or another value: no finding) */
                bool marked = !strstr(text, MARKER) &&
                              !strstr(text, ENV_MARKER) &&
                              !strstr(text, "SG_FUZZ_SECRET");
                parse_one(variant, marked, false);
                free(variant);
        }
        /* YAML: a first line of its own holds the secret (the JSON
         * variant's "{" may sit inside a YAML plain scalar, ${VAR}'s, where
         * the marker would become part of a key the file wrote) */
        if ((variant = malloc(size + sizeof(pre_yaml)))) {
                memcpy(variant, pre_yaml, sizeof(pre_yaml) - 1);
                strcpy(variant + sizeof(pre_yaml) - 1, text);
                parse_one(variant,
                          !strstr(text, MARKER) && !strstr(text, ENV_MARKER) &&
                                  !strstr(text, "SG_FUZZ_SECRET"),
                          true);
                free(variant);
        }
        free(text);
        return 0;
}
