/*
 * config_yaml.c — a YAML configuration file, read into the same cJSON tree
 * a JSON file gives (libyaml's event parser), so that one validator and
 * one JSON Schema apply to both, and a file can carry comments.
 *
 * The YAML 1.1 pitfalls are refused, not guessed: libyaml parses YAML 1.1,
 * whose plain (unquoted) scalars `yes`, `no`, `on`, `off`, `y`, `n` are
 * booleans and `0755` octal, where YAML 1.2 (and every JSON reader) sees a
 * string and a decimal. A file read one way by seqgate and another by an
 * editor, a linter or PyYAML is a trap, so seqgate reads a plain scalar
 * only in the forms every reader agrees on (a strict subset of YAML 1.2's
 * core schema that is also JSON):
 *   null, Null, NULL, ~, or nothing     null
 *   true, True, TRUE, false, ...        a boolean
 *   a JSON number (-12, 3.5, 1e3)        a number, its text kept exactly
 *   anything else that is no number,
 *     boolean or null in any reading    a string
 * and refuses, naming the key, line and column, a plain scalar that YAML
 * 1.1 or 1.2 reads as a boolean, number or null in another spelling
 * (yes/no/on/off/y/n, 0755, 0o17, 0x1F, +1, 1_000, 1:30, .5, .inf, .nan):
 * quote it. Quoted and block scalars are strings. Aliases, tags (other
 * than !!str) and a second document are refused; keys are strings as
 * written. A value is never quoted in an error (it may be a secret).
 */
#include "config_int.h"

#include <yaml.h>

#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** The most nesting a configuration has is 7 levels; more is refused. */
#define YAML_MAX_DEPTH 64

typedef struct frame {
        cJSON *node; /* an object or an array */
        char *key;   /* object: the key read, waiting for its value */
        char path[SG_PATH_SIZE];
        size_t idx; /* array: the next index */
} frame_t;

typedef struct ybuild {
        frame_t st[YAML_MAX_DEPTH];
        int depth;
        cJSON *root;
        int docs;
        char *err;
        size_t err_size;
} ybuild_t;

/* The plain-scalar forms (plain_kind()), compiled once. */
enum {
        RE_NULL,
        RE_TRUE,
        RE_FALSE,
        RE_Y11_INT,
        RE_Y11_FLOAT,
        RE_Y12_INT,
        RE_Y12_FLOAT,
        RE_JSON_NUMBER,
        RE_Y11_BOOL,
        RE_CNT
};
static regex_t g_re[RE_CNT];
static bool g_re_ok;
static pthread_once_t g_re_once = PTHREAD_ONCE_INIT;

static void re_init(void);

/** True if @p s is of form @p which (the whole of it). */
static bool matches(int which, const char *s) {
        return regexec(&g_re[which], s, 0, NULL, 0) == 0;
}

typedef enum plain_kind {
        PLAIN_STRING,
        PLAIN_NULL,
        PLAIN_TRUE,
        PLAIN_FALSE,
        PLAIN_NUMBER,
        PLAIN_AMBIGUOUS_BOOL,
        PLAIN_AMBIGUOUS_NUMBER,
} plain_kind_t;

/* YAML 1.1's int and float (yaml.org/type/int.html, float.html, in the
 * form PyYAML's resolver uses) and YAML 1.2 core's, as POSIX EREs. */
#define Y11_INT                                                                \
        "^([-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(0|[1-9][0-9_]*)|"                \
        "[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+)$"
#define Y11_FLOAT                                                              \
        "^([-+]?[0-9][0-9_]*\\.[0-9_]*([eE][-+][0-9]+)?|"                      \
        "\\.[0-9][0-9_]*([eE][-+][0-9]+)?|"                                    \
        "[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\\.[0-9_]*|"                          \
        "[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN))$"
#define Y12_INT "^([-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"
#define Y12_FLOAT                                                              \
        "^([-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?|"             \
        "[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN))$"
#define JSON_NUMBER "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?$"

static void re_init(void) {
        static const char *const src[RE_CNT] = {
                [RE_NULL] = "^(null|Null|NULL|~)$",
                [RE_TRUE] = "^(true|True|TRUE)$",
                [RE_FALSE] = "^(false|False|FALSE)$",
                [RE_Y11_INT] = Y11_INT,
                [RE_Y11_FLOAT] = Y11_FLOAT,
                [RE_Y12_INT] = Y12_INT,
                [RE_Y12_FLOAT] = Y12_FLOAT,
                [RE_JSON_NUMBER] = JSON_NUMBER,
                /* YAML 1.1's booleans (yaml.org/type/bool.html) */
                /* one literal in two parts (clang's string-concatenation
                 * warning asks for the parentheses) */
                [RE_Y11_BOOL] = ("^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|"
                                 "off|Off|OFF)$"),
        };
        g_re_ok = true;
        for (int i = 0; i < RE_CNT; i++)
                g_re_ok &= regcomp(&g_re[i], src[i],
                                   REG_EXTENDED | REG_NOSUB) == 0;
}

/** How a plain scalar is read (the table at the top): a number only where
 *  JSON, YAML 1.1 and YAML 1.2 all read one ("1e3" is a string in YAML
 *  1.1, "1.0e+3" a number everywhere). */
static plain_kind_t plain_kind(const char *s) {
        if (!*s || matches(RE_NULL, s))
                return PLAIN_NULL;
        if (matches(RE_TRUE, s))
                return PLAIN_TRUE;
        if (matches(RE_FALSE, s))
                return PLAIN_FALSE;
        bool y11 = matches(RE_Y11_INT, s) || matches(RE_Y11_FLOAT, s);
        if (y11 && matches(RE_JSON_NUMBER, s))
                return PLAIN_NUMBER;
        if (y11 || matches(RE_Y12_INT, s) || matches(RE_Y12_FLOAT, s))
                return PLAIN_AMBIGUOUS_NUMBER;
        if (matches(RE_Y11_BOOL, s))
                return PLAIN_AMBIGUOUS_BOOL;
        return PLAIN_STRING;
}

static void yerr(ybuild_t *b, const yaml_mark_t *m, const char *path,
                 const char *what) {
        if (b->err[0])
                return; /* the first one */
        snprintf(b->err, b->err_size, "%s: YAML line %zu, column %zu: %s",
                 path && *path ? path : "(root)", m->line + 1, m->column + 1,
                 what);
}

/** The path of a value placed now (the key or index it goes under). */
static void value_path(const ybuild_t *b, char *out) {
        if (b->depth == 0) {
                out[0] = '\0';
                return;
        }
        const frame_t *f = &b->st[b->depth - 1];
        if (cJSON_IsObject(f->node))
                sg_cfg_path_key(out, f->path, f->key ? f->key : "");
        else
                sg_cfg_path_idx(out, f->path, f->idx);
}

/** Places @p v (taken) where the parser is: the root, an array's next
 *  element, or an object's value (or key, for a string at a key's place). */
static bool place(ybuild_t *b, cJSON *v) {
        if (!v)
                return false;
        if (b->depth == 0) {
                b->root = v;
                return true;
        }
        frame_t *f = &b->st[b->depth - 1];
        if (cJSON_IsArray(f->node)) {
                cJSON_AddItemToArray(f->node, v);
                f->idx++;
                return true;
        }
        cJSON_AddItemToObject(f->node, f->key, v);
        free(f->key);
        f->key = NULL;
        return true;
}

static const char *const AMBIGUOUS_BOOL =
        "an unquoted yes, no, on, off, y or n is a boolean in YAML 1.1 and a "
        "string in YAML 1.2; quote it (\"...\") for a text, or write true "
        "or false for a boolean";
static const char *const AMBIGUOUS_NUMBER =
        "an unquoted value that YAML 1.1, YAML 1.2 and JSON read as "
        "different numbers, or one as a text (octal 0755 or 0o17, hex 0x1F, "
        "+1, 1_000, 1:30, .5, 1e3, .inf, .nan); write a plain decimal "
        "(1024, 0.5, 1000), or quote it for a text";

/** One scalar event. */
static bool on_scalar(ybuild_t *b, const yaml_event_t *ev) {
        const char *text = (const char *)ev->data.scalar.value;
        char path[SG_PATH_SIZE];
        frame_t *f = b->depth ? &b->st[b->depth - 1] : NULL;
        const char *tag = (const char *)ev->data.scalar.tag;

        if (tag && strcmp(tag, YAML_STR_TAG) != 0) {
                value_path(b, path);
                yerr(b, &ev->start_mark, path,
                     "tags are not supported (only !!str); write the value "
                     "as it is");
                return false;
        }
        if (f && cJSON_IsObject(f->node) && !f->key) {
                /* a key: a string as written */
                if (!(f->key = strdup(text)))
                        return false;
                return true;
        }
        value_path(b, path);
        if (tag || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return place(b, cJSON_CreateString(text));
        switch (plain_kind(text)) {
        case PLAIN_NULL:
                return place(b, cJSON_CreateNull());
        case PLAIN_TRUE:
                return place(b, cJSON_CreateTrue());
        case PLAIN_FALSE:
                return place(b, cJSON_CreateFalse());
        case PLAIN_NUMBER: {
                cJSON *n = cJSON_CreateNumber(strtod(text, NULL));
                /* its text, read exactly as a JSON number's is
                 * (sg_cfg_number_texts) */
                if (n && !(n->valuestring = strdup(text))) {
                        cJSON_Delete(n);
                        n = NULL;
                }
                return place(b, n);
        }
        case PLAIN_AMBIGUOUS_BOOL:
                yerr(b, &ev->start_mark, path, AMBIGUOUS_BOOL);
                return false;
        case PLAIN_AMBIGUOUS_NUMBER:
                yerr(b, &ev->start_mark, path, AMBIGUOUS_NUMBER);
                return false;
        case PLAIN_STRING:
                break;
        }
        return place(b, cJSON_CreateString(text));
}

/** A mapping or sequence start: a new object or array, placed. */
static bool on_open(ybuild_t *b, const yaml_event_t *ev, bool object) {
        char path[SG_PATH_SIZE];
        frame_t *f = b->depth ? &b->st[b->depth - 1] : NULL;
        value_path(b, path);
        if (f && cJSON_IsObject(f->node) && !f->key) {
                yerr(b, &ev->start_mark, f->path,
                     "a key must be a plain or quoted text");
                return false;
        }
        const char *tag = (const char *)(object ? ev->data.mapping_start.tag
                                                : ev->data.sequence_start.tag);
        if (tag) {
                yerr(b, &ev->start_mark, path, "tags are not supported");
                return false;
        }
        if (b->depth == YAML_MAX_DEPTH) {
                yerr(b, &ev->start_mark, path, "nested too deep");
                return false;
        }
        cJSON *n = object ? cJSON_CreateObject() : cJSON_CreateArray();
        if (!place(b, n))
                return false;
        frame_t *nf = &b->st[b->depth++];
        memset(nf, 0, sizeof(*nf));
        nf->node = n;
        snprintf(nf->path, sizeof(nf->path), "%s", path);
        return true;
}

static void frames_free(ybuild_t *b) {
        while (b->depth > 0)
                free(b->st[--b->depth].key);
}

/**
 * A syntax error of libyaml's @p parser over @p len bytes, at a line an
 * editor shows (1-based, as yerr). libyaml finds an unclosed bracket or
 * quote only at the end of the input, and puts its problem there: past the
 * last newline, on a line the file does not have. The error is then placed
 * where the unfinished construct starts (the parser's context mark), and
 * otherwise names that construct beside the problem (as PyYAML does). The
 * texts are libyaml's; they never quote a value.
 */
static void yaml_syntax_err(ybuild_t *b, const yaml_parser_t *parser,
                            size_t len) {
        char what[512];
        const char *problem = parser->problem ? parser->problem : "error";
        const char *ctx = parser->context; /* "while parsing a ..." */
        const yaml_mark_t *pm = &parser->problem_mark;
        const yaml_mark_t *cm = &parser->context_mark;
        bool at_end = pm->index >= len;
        if (ctx && at_end) {
                /* "while parsing a flow sequence": "a flow sequence" */
                const char *in = ctx;
                if (!strncmp(in, "while ", 6) && strchr(in + 6, ' '))
                        in = strchr(in + 6, ' ') + 1;
                snprintf(what, sizeof(what),
                         "not valid YAML: %s at the end of the file, in %s "
                         "that starts here: a bracket or quote not closed?",
                         problem, in);
                yerr(b, cm, NULL, what);
        } else if (ctx) {
                snprintf(what, sizeof(what),
                         "not valid YAML: %s (%s at line %zu, column %zu)",
                         problem, ctx, cm->line + 1, cm->column + 1);
                yerr(b, pm, NULL, what);
        } else if (at_end && pm->line > 0 && pm->column == 0) {
                /* past the last newline: the file's last line */
                yaml_mark_t last = {.line = pm->line - 1, .column = 0};
                snprintf(what, sizeof(what),
                         "not valid YAML: %s at the end of the file", problem);
                yerr(b, &last, NULL, what);
        } else {
                snprintf(what, sizeof(what), "not valid YAML: %s", problem);
                yerr(b, pm, NULL, what);
        }
}

sg_err_t sg_cfg_yaml_parse(const char *text, size_t len, cJSON **rootp,
                           char *errstr, size_t errstr_size) {
        yaml_parser_t parser;
        yaml_event_t ev;
        ybuild_t b = {.err = errstr, .err_size = errstr_size};
        sg_err_t err = SG_OK;
        bool done = false;

        *rootp = NULL;
        errstr[0] = '\0';
        /* the patterns are constant: compiling fails only out of memory
         * (they stay compiled for the process: static tables) */
        if (pthread_once(&g_re_once, re_init) != 0 || !g_re_ok ||
            !yaml_parser_initialize(&parser))
                return SG_ERR_NOMEM;
        yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
        while (!done && !err) {
                if (!yaml_parser_parse(&parser, &ev)) {
                        if (parser.error == YAML_MEMORY_ERROR) {
                                err = SG_ERR_NOMEM;
                                break;
                        }
                        yaml_syntax_err(&b, &parser, len);
                        err = SG_ERR_CONFIG;
                        break;
                }
                bool ok = true;
                switch (ev.type) {
                case YAML_STREAM_END_EVENT:
                        done = true;
                        break;
                case YAML_DOCUMENT_START_EVENT:
                        if (++b.docs > 1) {
                                yerr(&b, &ev.start_mark, NULL,
                                     "a second YAML document; a "
                                     "configuration is one");
                                ok = false;
                        }
                        break;
                case YAML_ALIAS_EVENT: {
                        char path[SG_PATH_SIZE];
                        value_path(&b, path);
                        yerr(&b, &ev.start_mark, path,
                             "aliases (*name) are not supported; write the "
                             "value out");
                        ok = false;
                        break;
                }
                case YAML_SCALAR_EVENT:
                        ok = on_scalar(&b, &ev);
                        break;
                case YAML_MAPPING_START_EVENT:
                case YAML_SEQUENCE_START_EVENT:
                        ok = on_open(&b, &ev,
                                     ev.type == YAML_MAPPING_START_EVENT);
                        break;
                case YAML_MAPPING_END_EVENT:
                case YAML_SEQUENCE_END_EVENT:
                        free(b.st[b.depth - 1].key);
                        b.depth--;
                        break;
                default:
                        break;
                }
                yaml_event_delete(&ev);
                if (!ok)
                        err = errstr[0] ? SG_ERR_CONFIG : SG_ERR_NOMEM;
        }
        yaml_parser_delete(&parser);
        frames_free(&b);
        if (!err && !b.root) {
                snprintf(errstr, errstr_size,
                         "(root): the YAML document is empty");
                err = SG_ERR_CONFIG;
        }
        if (err) {
                cJSON_Delete(b.root);
                return err;
        }
        *rootp = b.root;
        return SG_OK;
}
