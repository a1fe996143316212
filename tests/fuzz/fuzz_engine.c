/*
 * fuzz_engine.c — libFuzzer target: the engine property harness of
 * tests/unit/engine_model.h driven by the fuzzer's bytes instead of a
 * seeded PRNG. The first byte picks the configuration variant; every later
 * choice of the operation generator (which operation, which aggregate,
 * which version around L, how a batch ends, ...) consumes the next bytes,
 * so the fuzzer explores operation sequences, not byte soup. The same five
 * invariants are checked after every operation; a violation prints the
 * operations run and aborts, so libFuzzer reports the input.
 *
 * Self-contained: it includes the harness source, so it builds with the
 * library sources alone, as tests/fuzz/run.sh builds every fuzz_<name>.c
 * (tests/fuzz/run.sh SECONDS engine); corpus_replay.c replays its seeds
 * (tests/fuzz/corpus/engine/) in meson test. Stores are created under
 * $SG_MODEL_TMP, /dev/shm, $TMPDIR or /tmp and removed after each input.
 * To reproduce a crash input: ./fuzz_engine CRASH_FILE, with
 * SG_MODEL_SHRINK=1 to also print the shortest operation list that still
 * fails.
 */
#include "../unit/engine_model.c"

#define FUZZ_MAX_OPS 400 /* per input: keeps one execution short */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 2)
                return 0;
        size_t v = data[0] % model_variant_count();
        model_src_t src;
        model_src_bytes(&src, data + 1, size - 1);
        model_op_t *ops = NULL;
        size_t cnt = 0;
        model_result_t res;
        int inv = model_generate(v, &src, FUZZ_MAX_OPS, &ops, &cnt, &res);
        if (inv != MODEL_OK) {
                fprintf(stderr,
                        "\nengine invariant %d violated at operation %zu "
                        "(variant %s):\n  %s\noperations:\n",
                        inv, res.step, model_variant_name(v), res.msg);
                model_trace(stderr, v, ops, cnt);
                if (getenv("SG_MODEL_SHRINK")) {
                        /* reproducing a crash input: the shortest list */
                        size_t n = model_shrink(
                                v, ops, res.step < cnt ? res.step + 1 : cnt,
                                inv, 20000);
                        model_result_t again;
                        model_replay(v, ops, n, &again);
                        fprintf(stderr,
                                "shortest list found (%zu "
                                "operations):\n  %s\n",
                                n, again.msg);
                        model_trace(stderr, v, ops, n);
                }
                free(ops);
                abort();
        }
        free(ops);
        return 0;
}
