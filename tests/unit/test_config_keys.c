/*
 * test_config_keys.c — the configuration key table (sg_config_key()) and
 * the JSON Schema (schemas/config.schema.json) state the same scalar keys,
 * types, defaults and bounds: a default or a bound changed in one place
 * only fails here, and so does a key a reload may change (SG_CONF_RELOAD)
 * that the schema does not mark "x-reloadable" (or the reverse).
 *
 * The schema is read from $SG_SOURCE_ROOT (set by meson). A property's
 * "$ref" (e.g. "#/$defs/uint") supplies what the property itself does not
 * say (its own "minimum" overrides the reference's).
 */
#include "config.h"

#include <check.h>
#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *g_schema;

static void load_schema(void) {
        const char *root = getenv("SG_SOURCE_ROOT");
        char path[4096];
        static char buf[1 << 20];

        ck_assert_msg(
                root != NULL,
                "SG_SOURCE_ROOT must name the repository (meson sets it)");
        snprintf(path, sizeof(path), "%s/schemas/config.schema.json", root);
        FILE *fp = fopen(path, "rb");
        ck_assert_msg(fp != NULL, "cannot open %s", path);
        size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
        fclose(fp);
        buf[n] = '\0';
        g_schema = cJSON_Parse(buf);
        ck_assert_msg(g_schema != NULL, "%s is not JSON", path);
}

static void free_schema(void) {
        cJSON_Delete(g_schema);
        g_schema = NULL;
}

/** Follows a local "$ref" ("#/$defs/NAME") of @p node, once. */
static const cJSON *deref(const cJSON *node) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(node, "$ref");

        if (!cJSON_IsString(ref))
                return node;
        ck_assert_msg(strncmp(ref->valuestring, "#/$defs/", 8) == 0,
                      "unexpected $ref %s", ref->valuestring);
        const cJSON *def = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(g_schema, "$defs"),
                ref->valuestring + 8);
        ck_assert_msg(def != NULL, "dangling $ref %s", ref->valuestring);
        return def;
}

/** Member @p name of property @p prop, else of what its $ref names. */
static const cJSON *attr(const cJSON *prop, const char *name) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(prop, name);

        return v ? v : cJSON_GetObjectItemCaseSensitive(deref(prop), name);
}

/** The "properties" object of the schema object at key-table block path
 *  @p block ("", "store", "topics.*.ordering", ...). */
static const cJSON *block_props(const char *block) {
        const cJSON *node = g_schema;
        char buf[256], *save = NULL;

        snprintf(buf, sizeof(buf), "%s", block);
        for (char *part = strtok_r(buf, ".", &save); part;
             part = strtok_r(NULL, ".", &save)) {
                if (!strcmp(part, "*"))
                        node = cJSON_GetObjectItemCaseSensitive(
                                node, "additionalProperties");
                else
                        node = cJSON_GetObjectItemCaseSensitive(
                                cJSON_GetObjectItemCaseSensitive(node,
                                                                 "properties"),
                                part);
                ck_assert_msg(node != NULL, "schema has no block %s", block);
                node = deref(node);
        }
        const cJSON *props =
                cJSON_GetObjectItemCaseSensitive(node, "properties");
        ck_assert_msg(cJSON_IsObject(props), "block %s has no properties",
                      block);
        return props;
}

static bool is_int_type(sg_config_type_t t) {
        return t == SG_CONF_INT || t == SG_CONF_I64 || t == SG_CONF_U64 ||
               t == SG_CONF_SIZE;
}

/* Each key of the table is in the schema with the same type, default and
 * bounds. */
START_TEST(test_table_matches_schema) {
        size_t n = 0;

        load_schema();
        for (const sg_config_key_t *k; (k = sg_config_key(n)); n++) {
                const cJSON *prop = cJSON_GetObjectItemCaseSensitive(
                        block_props(k->block), k->name);
                char full[256];

                snprintf(full, sizeof(full), "%s%s%s", k->block,
                         *k->block ? "." : "", k->name);
                const char *where = full;
                ck_assert_msg(prop != NULL, "%s: not in the schema", where);
                ck_assert_msg(k->doc && *k->doc, "%s: no doc line", where);
                const cJSON *def = attr(prop, "default");
                const cJSON *type = attr(prop, "type");

                if (is_int_type(k->type)) {
                        const cJSON *min = attr(prop, "minimum");
                        const cJSON *max = attr(prop, "maximum");
                        ck_assert_msg(
                                cJSON_IsString(type) &&
                                        !strcmp(type->valuestring, "integer"),
                                "%s: schema type is not integer", where);
                        ck_assert_msg(cJSON_IsNumber(min) &&
                                              min->valuedouble ==
                                                      (double)k->min,
                                      "%s: minimum %g in the schema, %lld in "
                                      "the table",
                                      where, min ? min->valuedouble : -1.0,
                                      (long long)k->min);
                        ck_assert_msg(cJSON_IsNumber(max) &&
                                              max->valuedouble ==
                                                      (double)k->max,
                                      "%s: maximum %g in the schema, %lld in "
                                      "the table",
                                      where, max ? max->valuedouble : -1.0,
                                      (long long)k->max);
                        ck_assert_msg(cJSON_IsNumber(def) &&
                                              def->valuedouble ==
                                                      (double)k->def,
                                      "%s: default %g in the schema, %lld in "
                                      "the table",
                                      where, def ? def->valuedouble : -1.0,
                                      (long long)k->def);
                } else if (k->type == SG_CONF_BOOL) {
                        ck_assert_msg(
                                cJSON_IsString(type) &&
                                        !strcmp(type->valuestring, "boolean"),
                                "%s: schema type is not boolean", where);
                        ck_assert_msg(cJSON_IsBool(def) &&
                                              cJSON_IsTrue(def) ==
                                                      (k->def != 0),
                                      "%s: default differs", where);
                } else if (k->type == SG_CONF_ENUM ||
                           k->type == SG_CONF_ENUM_BOOL) {
                        const cJSON *en = attr(prop, "enum");
                        size_t cnt = 0;
                        ck_assert_msg(cJSON_IsArray(en), "%s: no enum", where);
                        for (; k->names[cnt]; cnt++) {
                                const cJSON *s =
                                        cJSON_GetArrayItem(en, (int)cnt);
                                ck_assert_msg(cJSON_IsString(s) &&
                                                      !strcmp(s->valuestring,
                                                              k->names[cnt]),
                                              "%s: enum value %zu is \"%s\" in "
                                              "the table",
                                              where, cnt, k->names[cnt]);
                        }
                        ck_assert_msg((int)cnt == cJSON_GetArraySize(en),
                                      "%s: enum sizes differ", where);
                        ck_assert(k->type != SG_CONF_ENUM_BOOL || cnt == 2);
                        ck_assert_msg(k->def >= 0 && (size_t)k->def < cnt,
                                      "%s: default index", where);
                        ck_assert_msg(cJSON_IsString(def) &&
                                              !strcmp(def->valuestring,
                                                      k->names[k->def]),
                                      "%s: default \"%s\" in the table", where,
                                      k->names[k->def]);
                } else { /* STRING, SRC */
                        if (k->def_text)
                                ck_assert_msg(cJSON_IsString(def) &&
                                                      !strcmp(def->valuestring,
                                                              k->def_text),
                                              "%s: default \"%s\" in the table",
                                              where, k->def_text);
                        else
                                ck_assert_msg(def == NULL,
                                              "%s: a default in the schema "
                                              "only",
                                              where);
                }
                /* a reload may change it: the table's flag and the
                 * schema's "x-reloadable" say the same */
                const cJSON *rl =
                        cJSON_GetObjectItemCaseSensitive(prop, "x-reloadable");
                ck_assert_msg((rl && cJSON_IsTrue(rl)) ==
                                      ((k->flags & SG_CONF_RELOAD) != 0),
                              "%s: reloadable %s in the table, %s in the "
                              "schema",
                              where, k->flags & SG_CONF_RELOAD ? "yes" : "no",
                              rl && cJSON_IsTrue(rl) ? "yes" : "no");
                ck_assert_msg(!rl || cJSON_IsTrue(rl),
                              "%s: x-reloadable is true or absent", where);
                /* one row per key */
                for (size_t j = 0; j < n; j++) {
                        const sg_config_key_t *o = sg_config_key(j);
                        ck_assert_msg(strcmp(o->block, k->block) ||
                                              strcmp(o->name, k->name),
                                      "%s: two rows", where);
                }
        }
        ck_assert_uint_gt(n, 40);
        free_schema();
}
END_TEST

/* Keys the parser reads by hand, not by the table (their rules do not fit
 * a row: see config.c). */
static bool hand_parsed(const char *block, const char *name) {
        return (!*block && !strcmp(name, "$schema")) ||
               (!strcmp(block, "topics.*.envelope") &&
                !strcmp(name, "digest")) ||
               (!strcmp(block, "topics.*.snapshot") && !strcmp(name, "source"));
}

/* Each scalar key of the schema, in a block the table covers, is in the
 * table (objects and arrays are hand code). */
START_TEST(test_schema_keys_in_table) {
        load_schema();
        for (size_t i = 0; sg_config_key(i); i++) {
                const char *block = sg_config_key(i)->block;
                const cJSON *prop;

                cJSON_ArrayForEach(prop, block_props(block)) {
                        const cJSON *type = attr(prop, "type");
                        bool scalar;

                        if (cJSON_IsString(type))
                                scalar = strcmp(type->valuestring, "object") &&
                                         strcmp(type->valuestring, "array");
                        else /* kafka blocks: allOf of objects */
                                scalar = !cJSON_GetObjectItemCaseSensitive(
                                                 prop, "allOf") &&
                                         !cJSON_GetObjectItemCaseSensitive(
                                                 prop, "properties");
                        if (!scalar || hand_parsed(block, prop->string))
                                continue;
                        bool found = false;
                        for (size_t j = 0; !found && sg_config_key(j); j++)
                                found = !strcmp(sg_config_key(j)->block,
                                                block) &&
                                        !strcmp(sg_config_key(j)->name,
                                                prop->string);
                        ck_assert_msg(found,
                                      "%s%s%s: in the schema, not in "
                                      "the key table",
                                      block, *block ? "." : "", prop->string);
                }
        }
        free_schema();
}
END_TEST

static Suite *config_keys_suite(void) {
        Suite *s = suite_create("config_keys");
        TCase *tc = tcase_create("table");

        tcase_add_test(tc, test_table_matches_schema);
        tcase_add_test(tc, test_schema_keys_in_table);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(config_keys_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
