/*
 * corpus_replay.c — runs a libFuzzer target's corpus without libFuzzer: a
 * main() that feeds every file named on the command line (or every file of
 * a directory named) to LLVMFuzzerTestOneInput once. Linked with a
 * fuzz_<name>.c it makes the committed seeds a regression test of the
 * normal build (meson test, any compiler, the sanitizer build included).
 * Exit status 0 when every input ran (a target reports a violation by
 * aborting), 1 when a file cannot be read.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
        FILE *f = fopen(path, "rb");
        if (!f) {
                perror(path);
                return 1;
        }
        uint8_t *buf = NULL;
        size_t len = 0, size = 0;
        for (;;) {
                if (len == size) {
                        size = size ? size * 2 : 4096;
                        uint8_t *nb = realloc(buf, size);
                        if (!nb) {
                                fclose(f);
                                free(buf);
                                return 1;
                        }
                        buf = nb;
                }
                size_t n = fread(buf + len, 1, size - len, f);
                if (n == 0)
                        break;
                len += n;
        }
        int bad = ferror(f);
        fclose(f);
        if (!bad)
                LLVMFuzzerTestOneInput(buf, len);
        free(buf);
        return bad;
}

static int cmp(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
        int bad = 0, runs = 0;
        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) != 0) {
                        perror(argv[i]);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        bad |= run_file(argv[i]);
                        runs++;
                        continue;
                }
                DIR *d = opendir(argv[i]);
                if (!d) {
                        perror(argv[i]);
                        return 1;
                }
                char **names = NULL;
                size_t cnt = 0;
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char **nn = realloc(names, (cnt + 1) * sizeof(*nn));
                        size_t l = strlen(argv[i]) + strlen(de->d_name) + 2;
                        char *name = nn ? malloc(l) : NULL;
                        if (nn)
                                names = nn;
                        if (!name) {
                                fprintf(stderr, "out of memory\n");
                                while (cnt)
                                        free(names[--cnt]);
                                free(names);
                                closedir(d);
                                return 1;
                        }
                        snprintf(name, l, "%s/%s", argv[i], de->d_name);
                        names[cnt++] = name;
                }
                closedir(d);
                if (cnt) /* an empty directory: names is NULL */
                        qsort(names, cnt, sizeof(*names), cmp);
                for (size_t j = 0; j < cnt; j++) {
                        bad |= run_file(names[j]);
                        runs++;
                        free(names[j]);
                }
                free(names);
        }
        printf("%d input(s) run\n", runs);
        return bad || runs == 0;
}
