// SPDX-License-Identifier: Apache-2.0
/* The cross-language scenario (cross_lang.sh), C's turn:
 *   scenario_c POOL_PATH HANDLES_FILE SEED SHARED_FILE
 * Verifies every block earlier languages listed in HANDLES_FILE, then opens
 * the pool, allocs 3 blocks with a hint, writes known bytes, prefetches, reads
 * them back, checks the stats, frees one, closes, reopens to verify, and
 * appends its blocks to HANDLES_FILE as "LANG INDEX HANDLE BYTES SEED live|freed".
 *
 * Then sharing, the same in every language:
 *   - prints the chained hashes of 4 blocks of 16 tokens (tokens(): the same
 *     64 tokens everywhere) with both algorithms, without and with an extra,
 *     as "hash ALGO EXTRA BLOCK HEX" (cross_lang.sh compares the languages);
 *   - looks up every block earlier languages published (SHARED_FILE, lines
 *     "LANG INDEX HASH HANDLE BYTES SEED"): tenant 7 finds it with its bytes,
 *     tenant 8 does not; releases the reference;
 *   - publishes a block of its own under a hash no other language uses
 *     (index 3: native chain with extra, block (SEED - 1) % 4);
 *   - publishes a block under the hash every language computes (index 4:
 *     vLLM chain without extra, block 3): the first language publishes it,
 *     every later one gets SPECKV_EEXIST and the first one's handle;
 *   - checks blocks_published and shared_bytes, and appends its lines. */
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

#define TENANT 7
#define SHARED_BYTES 3000

static void tokens(uint32_t t[64]) {
    static const uint32_t wide[8] = {0, 23, 24, 255, 256, 65535, 65536, 4294967295u};
    for (uint64_t i = 0; i < 64; i++) t[i] = i < 56 ? (uint32_t)(i * 2654435761u % 128256u) : wide[i - 56];
}

static const uint8_t EXTRA_NATIVE[] = "speckv-test-model"; /* 17 bytes, no NUL */
static const uint8_t EXTRA_CBOR[] = {0x82, 0x66, 'l', 'o', 'r', 'a', '-', '7', 0x03}; /* ["lora-7", 3] */

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

static void hex(char out[2 * SPECKV_HASH_BYTES + 1], const uint8_t *h) {
    for (int i = 0; i < SPECKV_HASH_BYTES; i++) sprintf(out + 2 * i, "%02x", h[i]);
}

static int unhex(uint8_t h[SPECKV_HASH_BYTES], const char *s) {
    if (strlen(s) != 2 * SPECKV_HASH_BYTES) return -1;
    for (int i = 0; i < SPECKV_HASH_BYTES; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
        h[i] = (uint8_t)v;
    }
    return 0;
}

/* chains[algo][with_extra][block] */
static uint8_t chains[2][2][4][SPECKV_HASH_BYTES];

static void compute_chains(void) {
    uint32_t t[64];
    tokens(t);
    for (int a = 0; a < 2; a++)
        for (int x = 0; x < 2; x++)
            for (int b = 0; b < 4; b++) {
                const void *extra = !x ? NULL : a == 0 ? (const void *)EXTRA_NATIVE : (const void *)EXTRA_CBOR;
                size_t elen = !x ? 0 : a == 0 ? sizeof EXTRA_NATIVE - 1 : sizeof EXTRA_CBOR;
                int rc = speckv_block_hash(a == 0 ? SPECKV_HASH_NATIVE : SPECKV_HASH_VLLM_CBOR, TENANT,
                                           b ? chains[a][x][b - 1] : NULL, t + 16 * b, 16, extra, elen, chains[a][x][b]);
                if (rc) fail("block_hash", rc);
                char hx[2 * SPECKV_HASH_BYTES + 1];
                hex(hx, chains[a][x][b]);
                printf("hash %d %d %d %s\n", a, x, b, hx);
            }
}

/* Allocs and fills a block, then publishes it; returns publish's status. */
static int publish_new(speckv_pool *pool, const uint8_t *hash, uint64_t seed, uint64_t index, speckv_handle *h,
                       speckv_handle *canonical) {
    speckv_hint hint;
    memset(&hint, 0, sizeof hint);
    hint.struct_size = sizeof hint;
    hint.tenant = TENANT;
    hint.token_count = 16;
    hint.flags = SPECKV_HINT_HAS_HASH;
    memcpy(hint.content_hash, hash, SPECKV_HASH_BYTES);
    int rc = speckv_alloc(pool, SHARED_BYTES, SPECKV_DTYPE_FP16, &hint, h);
    if (rc) fail("alloc", rc);
    unsigned char d[SHARED_BYTES];
    for (uint64_t j = 0; j < SHARED_BYTES; j++) d[j] = pat(seed, index, j);
    if ((rc = speckv_write(pool, *h, 0, d, SHARED_BYTES))) fail("write", rc);
    *canonical = 0;
    return speckv_publish(pool, *h, hash, canonical);
}

/* Fills `out` with the lines to append to SHARED_FILE. */
static void sharing(speckv_pool *pool, uint64_t seed, const char *shared, char *out, size_t cap) {
    compute_chains();
    int rc;
    uint64_t published = 0;
    speckv_handle first = 0, h, got;
    uint64_t first_seed = 0;
    FILE *f = fopen(shared, "r");
    if (f) {
        char who[32], hs[80], hh[40];
        uint64_t index, bytes, s;
        uint8_t hash[SPECKV_HASH_BYTES];
        while (fscanf(f, "%31s %" SCNu64 " %79s %39s %" SCNu64 " %" SCNu64, who, &index, hs, hh, &bytes, &s) == 6) {
            speckv_handle want = strtoull(hh, NULL, 0);
            if (unhex(hash, hs)) fail("bad hash in the shared file", 0);
            if ((rc = speckv_lookup(pool, TENANT, hash, &got)) || got != want) fail("lookup of an earlier language's block", rc);
            verify(pool, who, index, want, bytes, s, 1);
            if (speckv_lookup(pool, TENANT + 1, hash, &got) != SPECKV_ENOENT) fail("another tenant found a block", 0);
            if ((rc = speckv_free(pool, want))) fail("free (release)", rc);
            if (index == 4) first = want, first_seed = s;
            published++;
        }
        fclose(f);
    }
    char hx[2 * SPECKV_HASH_BYTES + 1];
    size_t used = 0;
    /* Our own block. */
    const uint8_t *mine = chains[0][1][(seed + 3) % 4];
    speckv_handle canonical;
    if ((rc = publish_new(pool, mine, seed, 3, &h, &canonical)) || canonical != h) fail("publish under a fresh hash", rc);
    if ((rc = speckv_lookup(pool, TENANT, mine, &got)) || got != h) fail("lookup of our own block", rc);
    if ((rc = speckv_free(pool, h))) fail("free (release)", rc);
    hex(hx, mine);
    used += (size_t)snprintf(out + used, cap - used, "%s 3 %s 0x%016" PRIx64 " %d %" PRIu64 "\n", LANG, hx, h,
                             SHARED_BYTES, seed);
    published++;
    /* The block every language computes. */
    const uint8_t *all = chains[1][0][3];
    rc = publish_new(pool, all, seed, 4, &h, &canonical);
    if (!first) {
        if (rc || canonical != h) fail("publish of the common block", rc);
        hex(hx, all);
        snprintf(out + used, cap - used, "%s 4 %s 0x%016" PRIx64 " %d %" PRIu64 "\n", LANG, hx, h, SHARED_BYTES, seed);
        published++;
    } else {
        if (rc != SPECKV_EEXIST || canonical != first) fail("the common block is not the first publisher's", rc);
        if ((rc = speckv_free(pool, h))) fail("free of the duplicate", rc);
        verify(pool, "first publisher's", 4, first, SHARED_BYTES, first_seed, 1);
        if ((rc = speckv_free(pool, first))) fail("free (release)", rc);
    }
    speckv_pool_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if ((rc = speckv_stats(pool, &st))) fail("stats", rc);
    if (st.blocks_published != published || st.shared_bytes != published * SHARED_BYTES || st.lookup_hits < 1)
        fail("unexpected sharing stats", 0);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: scenario_c POOL_PATH HANDLES_FILE SEED SHARED_FILE\n");
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
    char shared_lines[512];
    sharing(pool, seed, argv[4], shared_lines, sizeof shared_lines);
    if ((rc = speckv_pool_close(pool))) fail("close", rc);

    f = fopen(argv[2], "a");
    if (!f) fail("cannot append to the handles file", 0);
    for (int i = 0; i < 3; i++)
        fprintf(f, "%s %d 0x%016" PRIx64 " %" PRIu64 " %" PRIu64 " %s\n", LANG, i, hs[i], SIZES[i], seed,
                i == 1 ? "freed" : "live");
    if (fclose(f)) fail("writing the handles file", 0);
    if (!(f = fopen(argv[4], "a"))) fail("cannot append to the shared file", 0);
    fputs(shared_lines, f);
    if (fclose(f)) fail("writing the shared file", 0);
    printf("%s scenario: ok (verified %d blocks of earlier languages)\n", LANG, checked);
    return 0;
}
