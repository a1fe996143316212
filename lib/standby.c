/*
 * standby.c — standby replica placement (standby.h, semantics §6
 * "Standby replicas").
 */
#include "standby.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A member's place in the order: its id beside its index (qsort has no
 * context argument in C11, and no state may be shared between threads) */
typedef struct ranked {
        const char *id;
        size_t idx;
} ranked_t;

static int member_cmp(const void *a, const void *b) {
        return strcmp(((const ranked_t *)a)->id, ((const ranked_t *)b)->id);
}

static int tp_cmp(const void *a, const void *b) {
        const sg_standby_tp_t *x = a, *y = b;
        int c = strcmp(x->topic, y->topic);
        if (c)
                return c;
        return (x->partition > y->partition) - (x->partition < y->partition);
}

static bool owns(const sg_standby_member_t *m, const sg_standby_tp_t *tp) {
        for (size_t i = 0; i < m->part_cnt; i++)
                if (m->parts[i].partition == tp->partition &&
                    !strcmp(m->parts[i].topic, tp->topic))
                        return true;
        return false;
}

sg_err_t sg_standby_place(const sg_standby_member_t *members, size_t member_cnt,
                          int replicas, const char *me, sg_standby_tp_t **outp,
                          size_t *cntp, char *errstr, size_t errstr_size) {
        *outp = NULL;
        *cntp = 0;
        if (replicas <= 0 || member_cnt < 2 || !me)
                return SG_OK;
        ranked_t *order = malloc(member_cnt * sizeof(*order));
        if (!order) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        for (size_t i = 0; i < member_cnt; i++)
                order[i] = (ranked_t){
                        members[i].member_id ? members[i].member_id : "", i};
        qsort(order, member_cnt, sizeof(*order), member_cmp);
        size_t self = SIZE_MAX;
        for (size_t i = 0; i < member_cnt; i++)
                if (!strcmp(order[i].id, me))
                        self = i;
        size_t k = (size_t)replicas < member_cnt - 1 ? (size_t)replicas
                                                     : member_cnt - 1;
        size_t n = 0, cap = 0;
        sg_standby_tp_t *out = NULL;
        sg_err_t err = SG_OK;
        for (size_t i = 0; self != SIZE_MAX && i < member_cnt && !err; i++) {
                /* member i's standbys are i+1 … i+k (mod member_cnt): self
                 * is one of them when its distance after i is 1..k */
                size_t d = (self + member_cnt - i) % member_cnt;
                if (d == 0 || d > k)
                        continue;
                const sg_standby_member_t *m = &members[order[i].idx];
                for (size_t j = 0; j < m->part_cnt; j++) {
                        if (owns(&members[order[self].idx], &m->parts[j]))
                                continue;
                        if (n == cap) {
                                size_t nc = cap ? cap * 2 : 16;
                                sg_standby_tp_t *o =
                                        realloc(out, nc * sizeof(*o));
                                if (!o) {
                                        err = SG_ERR_NOMEM;
                                        break;
                                }
                                out = o;
                                cap = nc;
                        }
                        out[n++] = m->parts[j];
                }
        }
        free(order);
        if (err) {
                free(out);
                sg_errf(errstr, errstr_size, "out of memory");
                return err;
        }
        if (n > 1) {
                qsort(out, n, sizeof(*out), tp_cmp);
                size_t w = 1;
                for (size_t r = 1; r < n; r++)
                        if (tp_cmp(&out[r], &out[w - 1]))
                                out[w++] = out[r];
                n = w;
        }
        if (n == 0) {
                free(out);
                out = NULL;
        }
        *outp = out;
        *cntp = n;
        return SG_OK;
}

/* A big-endian reader over an assignment's bytes. */
typedef struct rd {
        const unsigned char *p;
        size_t left;
} rd_t;

static bool rd_i16(rd_t *r, int16_t *v) {
        if (r->left < 2)
                return false;
        *v = (int16_t)(((unsigned)r->p[0] << 8) | r->p[1]);
        r->p += 2;
        r->left -= 2;
        return true;
}

static bool rd_i32(rd_t *r, int32_t *v) {
        if (r->left < 4)
                return false;
        *v = (int32_t)(((uint32_t)r->p[0] << 24) | ((uint32_t)r->p[1] << 16) |
                       ((uint32_t)r->p[2] << 8) | r->p[3]);
        r->p += 4;
        r->left -= 4;
        return true;
}

sg_err_t sg_standby_assignment_parse(const void *buf, size_t len,
                                     sg_standby_tp_t **tpsp, size_t *cntp,
                                     char *errstr, size_t errstr_size) {
        rd_t r = {buf, len};
        int16_t version, tlen;
        int32_t topics, parts, part = 0;
        if (len == 0)
                return SG_OK;
        if (!rd_i16(&r, &version) || !rd_i32(&r, &topics) || topics < 0) {
                sg_errf(errstr, errstr_size,
                        "assignment: %zu bytes, no version and topic count",
                        len);
                return SG_ERR_INVALID;
        }
        for (int32_t t = 0; t < topics; t++) {
                if (!rd_i16(&r, &tlen) || tlen < 0 || r.left < (size_t)tlen) {
                        sg_errf(errstr, errstr_size,
                                "assignment: topic %d cut short", (int)t);
                        return SG_ERR_INVALID;
                }
                const char *name = (const char *)r.p;
                r.p += tlen;
                r.left -= (size_t)tlen;
                if (!rd_i32(&r, &parts) || parts < 0 ||
                    r.left / 4 < (size_t)parts) {
                        sg_errf(errstr, errstr_size,
                                "assignment: topic %.*s: partitions cut short",
                                (int)tlen, name);
                        return SG_ERR_INVALID;
                }
                sg_standby_tp_t *n = realloc(
                        *tpsp, (*cntp + (size_t)parts + 1) * sizeof(**tpsp));
                if (!n) {
                        sg_errf(errstr, errstr_size, "out of memory");
                        return SG_ERR_NOMEM;
                }
                *tpsp = n;
                for (int32_t i = 0; i < parts; i++) {
                        char *topic = strndup(name, (size_t)tlen);
                        if (!topic) {
                                sg_errf(errstr, errstr_size, "out of memory");
                                return SG_ERR_NOMEM;
                        }
                        (void)rd_i32(&r, &part);
                        n[(*cntp)++] = (sg_standby_tp_t){topic, part};
                }
        }
        (void)version; /* every version so far begins the same way */
        return SG_OK;
}

void sg_standby_tps_free(sg_standby_tp_t *tps, size_t cnt) {
        for (size_t i = 0; tps && i < cnt; i++)
                free((char *)tps[i].topic);
        free(tps);
}
