/*
 * standby.c — standby replica placement (standby.h, semantics §6
 * "Standby replicas").
 */
#include "standby.h"

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
