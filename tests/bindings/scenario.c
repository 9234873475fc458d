/* The cross-language scenario (cross_lang.sh), C's turn:
 *   scenario_c POOL_PATH HANDLES_FILE SEED
 * Verifies every block earlier languages listed in HANDLES_FILE, then opens
 * the pool, allocs 3 blocks with a hint, writes known bytes, prefetches, reads
 * them back, checks the stats, frees one, closes, reopens to verify, and
 * appends its blocks to HANDLES_FILE as "LANG INDEX HANDLE BYTES SEED live|freed". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "speckv.h"

static const char *LANG = "c";
static const uint64_t SIZES[3] = {1000, 5000, 9000};

static unsigned char pat(uint64_t seed, uint64_t index, uint64_t j) {
    return (unsigned char)((seed * 31 + index * 17 + j * 7 + (j >> 8)) & 0xff);
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "%s scenario: FAIL: %s: %s (%s)\n", LANG, what, rc ? speckv_strerror(rc) : "", rc ? speckv_errmsg() : "");
    exit(1);
}

static void verify(speckv_pool *pool, const char *who, uint64_t index, speckv_handle h, uint64_t bytes, uint64_t seed,
                   int live) {
    unsigned char *buf = malloc(bytes);
    if (!buf) fail("malloc", 0);
    int rc = speckv_access(pool, h, 0, buf, bytes, SPECKV_ACCESS_DEFAULT);
    if (live) {
        if (rc != SPECKV_OK) fail("access of a live block", rc);
        for (uint64_t j = 0; j < bytes; j++)
            if (buf[j] != pat(seed, index, j)) {
                fprintf(stderr, "%s scenario: FAIL: %s block %" PRIu64 " byte %" PRIu64 " differs\n", LANG, who, index, j);
                exit(1);
            }
    } else if (rc != SPECKV_EBADHANDLE) {
        fprintf(stderr, "%s scenario: FAIL: freed %s block %" PRIu64 " gave %d, not SPECKV_EBADHANDLE\n", LANG, who, index, rc);
        exit(1);
    }
    free(buf);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: scenario_c POOL_PATH HANDLES_FILE SEED\n");
        return 2;
    }
    uint64_t seed = strtoull(argv[3], NULL, 10);
    char uri[4200];
    snprintf(uri, sizeof uri, "file:%s?size=16M", argv[1]);
    speckv_pool *pool = NULL;
    int rc = speckv_pool_open(uri, NULL, &pool);
    if (rc) fail("open", rc);

    /* 1. What earlier languages left. */
    int checked = 0;
    FILE *f = fopen(argv[2], "r");
    if (f) {
        char who[32], state[16], hs[40];
        uint64_t index, bytes, s;
        while (fscanf(f, "%31s %" SCNu64 " %39s %" SCNu64 " %" SCNu64 " %15s", who, &index, hs, &bytes, &s, state) == 6) {
            verify(pool, who, index, strtoull(hs, NULL, 0), bytes, s, strcmp(state, "live") == 0);
            checked++;
        }
        fclose(f);
    }

    /* 2. Our own blocks. */
    speckv_handle hs[3];
    uint64_t written = 0;
    for (int i = 0; i < 3; i++) {
        speckv_hint hint;
        memset(&hint, 0, sizeof hint);
        hint.struct_size = sizeof hint;
        hint.tenant = 7;
        hint.request = seed;
        hint.layer = (uint32_t)i;
        hint.token_pos = (uint64_t)i * 16;
        hint.token_count = 16;
        if ((rc = speckv_alloc(pool, SIZES[i], SPECKV_DTYPE_FP16, &hint, &hs[i]))) fail("alloc", rc);
        unsigned char *d = malloc(SIZES[i]);
        for (uint64_t j = 0; j < SIZES[i]; j++) d[j] = pat(seed, (uint64_t)i, j);
        if ((rc = speckv_write(pool, hs[i], 0, d, SIZES[i]))) fail("write", rc);
        written += SIZES[i];
        free(d);
    }
    speckv_hint next;
    memset(&next, 0, sizeof next);
    next.struct_size = sizeof next;
    next.tenant = 7;
    next.request = seed;
    next.token_count = 16;
    if ((rc = speckv_prefetch(pool, &next))) fail("prefetch", rc);
    for (int i = 0; i < 3; i++) verify(pool, LANG, (uint64_t)i, hs[i], SIZES[i], seed, 1);

    speckv_pool_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if ((rc = speckv_stats(pool, &st))) fail("stats", rc);
    if (st.allocs != 3 || st.frees != 0 || st.prefetch_hints != 1 || st.blocks_live < 3 || st.bytes_written != written)
        fail("unexpected stats", 0);
    if ((rc = speckv_free(pool, hs[1]))) fail("free", rc);
    if (speckv_free(pool, hs[1]) != SPECKV_EBADHANDLE) fail("a double free was not refused", 0);
    if ((rc = speckv_stats(pool, &st)) || st.frees != 1) fail("stats.frees", rc);
    if ((rc = speckv_pool_close(pool))) fail("close", rc);

    /* 3. Reopen and verify. */
    if ((rc = speckv_pool_open(uri, NULL, &pool))) fail("reopen", rc);
    for (int i = 0; i < 3; i++) verify(pool, LANG, (uint64_t)i, hs[i], SIZES[i], seed, i != 1);
    if ((rc = speckv_pool_close(pool))) fail("close", rc);

    f = fopen(argv[2], "a");
    if (!f) fail("cannot append to the handles file", 0);
    for (int i = 0; i < 3; i++)
        fprintf(f, "%s %d 0x%016" PRIx64 " %" PRIu64 " %" PRIu64 " %s\n", LANG, i, hs[i], SIZES[i], seed,
                i == 1 ? "freed" : "live");
    if (fclose(f)) fail("writing the handles file", 0);
    printf("%s scenario: ok (verified %d blocks of earlier languages)\n", LANG, checked);
    return 0;
}
