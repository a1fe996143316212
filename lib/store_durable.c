/*
 * store_durable.c — when the store may skip its syncs, and how a store that
 * lost its last writes is found (semantics §6, "Durability of the store").
 *
 * Both guarantees keep every state change in the changelog topic before
 * LMDB commits it: exactly_once in the same Kafka transaction as the output
 * and the input offsets; at_least_once as framed records whose markers
 * Kafka acknowledged before the LMDB commit, with the input offsets
 * committed only after it (kafka_batch.c). Kafka holds the durable copy, as
 * it does for Kafka Streams' state stores. The LMDB store is then a cache
 * of the changelog and need not fdatasync every batch (sg_store_defer_sync:
 * MDB_NOSYNC), nor commit every batch: the engine commits at checkpoints
 * (semantics §6), and a partition's meta says from which changelog offset
 * its tail is restored. What that can cost, and how it is answered:
 *  - the process dies (kill -9, crash, OOM): every committed LMDB
 *    transaction was written to the file (the kernel's page cache), so the
 *    store is whole: nothing to do;
 *  - the machine stops (kernel panic, power loss, VM reset): the writes
 *    since the last sync may be missing or torn, so the store cannot be
 *    trusted. It is never used: the next open finds the session file still
 *    "open" under another boot id, removes the LMDB files, and the engine
 *    restores every partition from its changelog as a new owner would.
 * The session file (data_dir/seqgate.session, one line "seqgate-session 1
 * open|closed BOOT_ID") is replaced atomically (write, fsync, rename, fsync
 * of the directory) and says "open" from before the first unsynced commit
 * until the store was synced at its clean close.
 * at_least_once's input offsets cannot run ahead of a rebuilt store: an
 * offset is committed only after its batch's markers were acknowledged, so
 * the restore brings the store at least as far, and the start offset is
 * the later of the committed one and the restored store's (semantics §6);
 * what is read again is only what the restored store already knows:
 * duplicates.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sync_file_range */
#endif
#include "store_int.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SESSION_FILE "seqgate.session"
#define SESSION_MAGIC "seqgate-session 1"
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

/* This boot's id (Linux: a random UUID per boot), "" when unknown. */
static void boot_id_read(char *out, size_t size) {
        out[0] = '\0';
        FILE *f = fopen(BOOT_ID_PATH, "re");
        if (!f)
                return;
        if (fgets(out, (int)size, f)) {
                out[strcspn(out, "\r\n \t")] = '\0';
        } else {
                out[0] = '\0';
        }
        fclose(f);
}

static void path_of(const sg_store_t *s, const char *name, char *out,
                    size_t size) {
        snprintf(out, size, "%s/%s", s->dir, name);
}

/* Replaces the session file with one line, durably (write, fsync, rename,
 * fsync of the directory). */
static sg_err_t session_write(sg_store_t *s, const char *state, char *errstr,
                              size_t errstr_size) {
        char p[4096], tmp[4200], line[160];
        path_of(s, SESSION_FILE, p, sizeof(p));
        snprintf(tmp, sizeof(tmp), "%s.tmp", p);
        int n = snprintf(line, sizeof(line), "%s %s %s\n", SESSION_MAGIC, state,
                         s->boot_id);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
        if (fd < 0)
                goto fail;
        if (write(fd, line, (size_t)n) != n || fsync(fd) != 0) {
                close(fd);
                goto fail;
        }
        close(fd);
        if (rename(tmp, p) != 0)
                goto fail;
        int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
                int rc = fsync(dfd);
                close(dfd);
                if (rc != 0)
                        goto fail;
        }
        return SG_OK;
fail:
        sg_errf(errstr, errstr_size, "store session file %s: %s", p,
                strerror(errno));
        return SG_ERR_IO;
}

sg_err_t sg_store_session_open(sg_store_t *s, char *errstr,
                               size_t errstr_size) {
        boot_id_read(s->boot_id, sizeof(s->boot_id));
        char p[4096], line[256] = "";
        path_of(s, SESSION_FILE, p, sizeof(p));
        FILE *f = fopen(p, "re");
        if (!f) {
                if (errno == ENOENT)
                        return SG_OK; /* never deferred: every commit synced */
                sg_errf(errstr, errstr_size, "store session file %s: %s", p,
                        strerror(errno));
                return SG_ERR_IO;
        }
        bool got = fgets(line, sizeof(line), f) != NULL;
        fclose(f);
        line[strcspn(line, "\n")] = '\0';
        char state[16] = "", boot[80] = "";
        const char *rest =
                strncmp(line, SESSION_MAGIC " ", sizeof(SESSION_MAGIC)) == 0
                        ? line + sizeof(SESSION_MAGIC)
                        : NULL;
        if (got && rest && sscanf(rest, "%15s %79s", state, boot) >= 1 &&
            strcmp(state, "closed") == 0)
                return SG_OK; /* synced at its clean close */
        if (got && rest && strcmp(state, "open") == 0 && boot[0] &&
            s->boot_id[0] && strcmp(boot, s->boot_id) == 0) {
                /* the process stopped, its machine did not: every commit
                 * is in the file; synced before it is trusted further */
                s->settle = true;
                return SG_OK;
        }
        /* Open under another boot (or unreadable): the machine stopped
         * while commits were not synced. Never used: removed, and rebuilt
         * from the changelog. */
        if (!got || !rest || strcmp(state, "open") != 0)
                snprintf(s->rebuilt_why, sizeof(s->rebuilt_why),
                         "its session file %s is unreadable, so a machine "
                         "stop while syncs were deferred cannot be ruled out",
                         SESSION_FILE);
        else
                snprintf(s->rebuilt_why, sizeof(s->rebuilt_why),
                         "the store was in use without per-commit syncs "
                         "when its machine stopped (boot %.36s, now %.36s)",
                         boot[0] ? boot : "unknown",
                         s->boot_id[0] ? s->boot_id : "unknown");
        const char *files[] = {"data.mdb", "lock.mdb"};
        for (size_t i = 0; i < 2; i++) {
                char fp[4200];
                path_of(s, files[i], fp, sizeof(fp));
                if (unlink(fp) != 0 && errno != ENOENT) {
                        sg_errf(errstr, errstr_size,
                                "removing the untrusted store %s: %s", fp,
                                strerror(errno));
                        return SG_ERR_IO;
                }
        }
        s->rebuilt = true;
        return session_write(s, "closed", errstr, errstr_size);
}

sg_err_t sg_store_session_settle(sg_store_t *s, char *errstr,
                                 size_t errstr_size) {
        if (!s->settle)
                return SG_OK;
        sg_err_t err = sg_store_sync(s, errstr, errstr_size);
        if (err)
                return err;
        s->settle = false;
        return session_write(s, "closed", errstr, errstr_size);
}

sg_err_t sg_store_defer_sync(sg_store_t *s, char *errstr, size_t errstr_size) {
        if (s->deferred)
                return SG_OK;
        if (!s->boot_id[0]) {
                sg_errf(errstr, errstr_size,
                        "no boot id (%s): a machine stop could not be told "
                        "from a process stop, so every commit stays synced",
                        BOOT_ID_PATH);
                return SG_ERR_INVALID;
        }
        sg_err_t err = session_write(s, "open", errstr, errstr_size);
        if (err)
                return err;
        int rc = mdb_env_set_flags(s->env, MDB_NOSYNC, 1);
        if (rc) {
                sg_errf(errstr, errstr_size, "LMDB MDB_NOSYNC %s: %s", s->dir,
                        mdb_strerror(rc));
                return SG_ERR_STORE;
        }
        s->deferred = true;
        return SG_OK;
}

sg_err_t sg_store_sync(sg_store_t *s, char *errstr, size_t errstr_size) {
        int rc = mdb_env_sync(s->env, 1);
        if (rc) {
                sg_errf(errstr, errstr_size, "LMDB sync %s: %s", s->dir,
                        mdb_strerror(rc));
                return SG_ERR_STORE;
        }
        return SG_OK;
}

/* The bytes this process made dirty so far (/proc/self/io write_bytes:
 * counted when a page goes from clean to dirty), 0 when unknown. */
static uint64_t dirtied_bytes(void) {
        FILE *f = fopen("/proc/self/io", "re");
        char line[128];
        unsigned long long v = 0;
        bool got = false;
        while (f && !got && fgets(line, sizeof(line), f))
                got = sscanf(line, "write_bytes: %llu", &v) == 1;
        if (f)
                fclose(f);
        return got ? (uint64_t)v : 0;
}

/* One number of a /proc file (the first "%llu", after @p key when given),
 * 0 when unknown. */
static uint64_t proc_u64(const char *path, const char *key) {
        FILE *f = fopen(path, "re");
        char line[160];
        unsigned long long v = 0;
        bool got = false;
        size_t kl = key ? strlen(key) : 0;
        while (f && !got && fgets(line, sizeof(line), f))
                if (!key || !strncmp(line, key, kl))
                        got = sscanf(line + kl, "%llu", &v) == 1;
        if (f)
                fclose(f);
        return got ? (uint64_t)v : 0;
}

/* The writeback's budget: half the kernel's background dirty threshold
 * (vm.dirty_background_bytes, or vm.dirty_background_ratio of the memory
 * available), at least WRITEBACK_MIN. Below it the kernel coalesces the
 * pages LMDB dirties again and again (a page freed by one transaction is
 * reused two later); starting the write-out of every dirty page after each
 * checkpoint instead measured badly: engine_bench, 300,000 events after
 * 1 M preloaded keys, a 64 MiB budget cost 16.5-17.9 us of CPU per event
 * against 9.6 without, and the kernel wrote every reused page again. */
#define WRITEBACK_MIN (256ull << 20)

static uint64_t writeback_budget(void) {
        uint64_t bg = proc_u64("/proc/sys/vm/dirty_background_bytes", NULL);
        if (!bg) {
                uint64_t ratio =
                        proc_u64("/proc/sys/vm/dirty_background_ratio", NULL);
                uint64_t avail_kb = proc_u64("/proc/meminfo", "MemAvailable:");
                bg = avail_kb * 1024 / 100 * ratio;
        }
        return bg / 2 > WRITEBACK_MIN ? bg / 2 : WRITEBACK_MIN;
}

void sg_store_writeback(sg_store_t *s) {
        mdb_filehandle_t fd;
        if (!s || mdb_env_get_fd(s->env, &fd) || fd < 0)
                return;
        uint64_t now = dirtied_bytes();
        if (now == 0)
                return; /* not known: the kernel's own pace */
        if (!s->wb_budget)
                s->wb_budget = writeback_budget();
        if (now >= s->wb_at && now - s->wb_at < s->wb_budget)
                return;
        s->wb_at = now;
        (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

bool sg_store_session_sync(sg_store_t *s) {
        /* the session stays "open" unless everything reached the disk */
        return s->deferred && mdb_env_sync(s->env, 1) == 0;
}

void sg_store_session_mark_closed(sg_store_t *s) {
        (void)session_write(s, "closed", NULL, 0);
}

bool sg_store_rebuilt(const sg_store_t *s, const char **whyp) {
        if (whyp)
                *whyp = s->rebuilt ? s->rebuilt_why : NULL;
        return s->rebuilt;
}

bool sg_store_deferred(const sg_store_t *s) {
        return s->deferred;
}
