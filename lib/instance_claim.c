/* The per-host claim of a (group.id, instance_id) pair (instance_claim.h):
 * an abstract-namespace Unix socket name, released by the kernel when its
 * holder dies. */
#include "instance_claim.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CLAIM_PREFIX "seqgate/"

/* The abstract name (without its leading NUL) of the pair into @p name
 * (sizeof sun_path - 1 at most); the pair itself when it fits and
 * neither holds a '/' (one name per pair), else
 * "seqgate/sha256/<hex of group.id NUL instance_id>". @returns its length,
 * 0 on a digest failure. */
static size_t claim_name(const char *group_id, const char *instance_id,
                         char *name, size_t cap) {
        int n = snprintf(name, cap, CLAIM_PREFIX "%s/%s", group_id,
                         instance_id);
        if (n > 0 && (size_t)n < cap && !strchr(group_id, '/') &&
            !strchr(instance_id, '/'))
                return (size_t)n;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int md_len = 0;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
                  EVP_DigestUpdate(ctx, group_id, strlen(group_id) + 1) &&
                  EVP_DigestUpdate(ctx, instance_id, strlen(instance_id)) &&
                  EVP_DigestFinal_ex(ctx, md, &md_len);
        EVP_MD_CTX_free(ctx);
        if (!ok)
                return 0;
        size_t len = (size_t)snprintf(name, cap, CLAIM_PREFIX "sha256/");
        for (unsigned int i = 0; i < md_len && len + 2 < cap; i++)
                len += (size_t)snprintf(name + len, cap - len, "%02x", md[i]);
        return len;
}

/* The inode of the abstract socket @p name (@p len bytes) in
 * /proc/net/unix, or 0. A name with a space or newline is not matched. */
static unsigned long claim_inode(const char *name, size_t len) {
        FILE *f = fopen("/proc/net/unix", "re");
        if (!f)
                return 0;
        char line[512];
        unsigned long found = 0;
        while (!found && fgets(line, sizeof(line), f)) {
                /* Num RefCount Protocol Flags Type St Inode Path */
                unsigned long inode;
                int path_at = 0;
                if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %n", &inode,
                           &path_at) != 1 ||
                    !path_at || line[path_at] != '@')
                        continue;
                const char *p = line + path_at + 1;
                size_t plen = strcspn(p, "\n");
                if (plen == len && memcmp(p, name, len) == 0)
                        found = inode;
        }
        fclose(f);
        return found;
}

/* The pid of a process (of those whose /proc/PID/fd this user may read)
 * holding socket @p inode, or 0. */
static long claim_holder(unsigned long inode) {
        DIR *proc = opendir("/proc");
        if (!proc)
                return 0;
        char want[64];
        snprintf(want, sizeof(want), "socket:[%lu]", inode);
        long pid = 0;
        struct dirent *d;
        while (!pid && (d = readdir(proc))) {
                char *end;
                long p = strtol(d->d_name, &end, 10);
                if (p <= 0 || *end || p == (long)getpid())
                        continue;
                char path[64];
                snprintf(path, sizeof(path), "/proc/%ld/fd", p);
                DIR *fds = opendir(path);
                if (!fds)
                        continue;
                struct dirent *e;
                while (!pid && (e = readdir(fds))) {
                        if (e->d_name[0] == '.')
                                continue;
                        char link[320], target[64];
                        snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
                        ssize_t n = readlink(link, target, sizeof(target) - 1);
                        if (n > 0) {
                                target[n] = '\0';
                                if (strcmp(target, want) == 0)
                                        pid = p;
                        }
                }
                closedir(fds);
        }
        closedir(proc);
        return pid;
}

sg_err_t sg_instance_claim_take(const char *group_id, const char *instance_id,
                                int *fdp, long *holder_pidp, char *errstr,
                                size_t errstr_size) {
        *fdp = -1;
        if (holder_pidp)
                *holder_pidp = 0;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        size_t len = claim_name(group_id, instance_id, sa.sun_path + 1,
                                sizeof(sa.sun_path) - 1);
        if (!len) {
                sg_errf(errstr, errstr_size,
                        "cannot claim instance_id \"%s\" on this host: "
                        "SHA-256 failed",
                        instance_id);
                return SG_ERR_IO;
        }
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                sg_errf(errstr, errstr_size,
                        "cannot claim instance_id \"%s\" on this host: "
                        "socket: %s",
                        instance_id, strerror(errno));
                return SG_ERR_IO;
        }
        socklen_t sl =
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
        if (bind(fd, (const struct sockaddr *)&sa, sl) == 0) {
                *fdp = fd;
                return SG_OK;
        }
        int e = errno;
        close(fd);
        if (e != EADDRINUSE) {
                sg_errf(errstr, errstr_size,
                        "cannot claim instance_id \"%s\" on this host: "
                        "bind: %s",
                        instance_id, strerror(e));
                return SG_ERR_IO;
        }
        unsigned long inode = claim_inode(sa.sun_path + 1, len);
        long pid = inode ? claim_holder(inode) : 0;
        if (holder_pidp)
                *holder_pidp = pid;
        char who[64] = "another seqgate";
        if (pid)
                snprintf(who, sizeof(who), "another seqgate (pid %ld)", pid);
        sg_errf(errstr, errstr_size,
                "%s on this host already runs as instance_id \"%s\" in "
                "group.id \"%s\" (transactional.id \"%s-%s\"): the two "
                "would fence each other; give each instance on a host its "
                "own instance_id (or --instance-id)",
                who, instance_id, group_id, group_id, instance_id);
        return SG_ERR_CONFIG;
}

sg_err_t sg_instance_claim_probe(const char *group_id, const char *instance_id,
                                 long *holder_pidp, char *errstr,
                                 size_t errstr_size) {
        int fd = -1;
        sg_err_t err = sg_instance_claim_take(group_id, instance_id, &fd,
                                              holder_pidp, errstr, errstr_size);
        sg_instance_claim_release(fd);
        return err;
}

void sg_instance_claim_release(int fd) {
        if (fd >= 0)
                close(fd);
}
