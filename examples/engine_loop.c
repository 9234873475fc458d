// SPDX-License-Identifier: Apache-2.0
/* engine_loop.c — the smallest serving-engine loop on speckv.
 *
 * One request, LAYERS transformer layers. Every TOKENS_PER_BLOCK tokens the
 * engine allocates one KV block per layer (with a hint saying which request,
 * layer and token range it holds), then for each decoded token it:
 *   1. writes the token's K/V row into the current block of every layer,
 *   2. tells the pool which layer it will run next (speckv_prefetch),
 *   3. reads the layer's whole KV history back for attention (speckv_access).
 * At the end it prints the pool's stats and frees everything.
 *
 *   engine_loop [URI] [TOKENS]    (default anon:?size=16M, 40 tokens)
 * Exit status 0 when every byte read back is the byte written.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "speckv.h"

enum { LAYERS = 4, TOKENS_PER_BLOCK = 16, ROW_BYTES = 256, MAX_BLOCKS = 64 };

#define CHECK(call)                                                                              \
    do {                                                                                         \
        int rc_ = (call);                                                                        \
        if (rc_ != SPECKV_OK) {                                                                  \
            fprintf(stderr, "engine_loop: %s: %s (%s)\n", #call, speckv_strerror(rc_), speckv_errmsg()); \
            goto fail;                                                                           \
        }                                                                                        \
    } while (0)

/* The K/V row of (layer, token): deterministic, so reads can be checked. */
static void kv_row(uint32_t layer, uint64_t token, unsigned char *row) {
    for (int i = 0; i < ROW_BYTES; i++) row[i] = (unsigned char)(layer * 41 + token * 13 + (uint64_t)i);
}

int main(int argc, char **argv) {
    const char *uri = argc > 1 ? argv[1] : "anon:?size=16M";
    uint64_t tokens = argc > 2 ? strtoull(argv[2], NULL, 10) : 40;
    if (tokens == 0 || tokens > (uint64_t)MAX_BLOCKS * TOKENS_PER_BLOCK) {
        fprintf(stderr, "engine_loop: TOKENS must be 1..%d\n", MAX_BLOCKS * TOKENS_PER_BLOCK);
        return 2;
    }
    const uint64_t request = 1;
    speckv_handle blocks[LAYERS][MAX_BLOCKS] = {{0}};
    unsigned char row[ROW_BYTES], want[ROW_BYTES];
    unsigned char *history = malloc((size_t)TOKENS_PER_BLOCK * ROW_BYTES);
    speckv_pool *pool = NULL;
    int ok = 0;
    if (!history) return 1;

    if (speckv_version_number() / 10000 != SPECKV_VERSION_MAJOR) {
        fprintf(stderr, "engine_loop: library %s, header %s\n", speckv_version_string(), SPECKV_VERSION_STRING);
        goto fail;
    }
    CHECK(speckv_pool_open(uri, NULL, &pool));

    for (uint64_t t = 0; t < tokens; t++) {
        uint64_t blk = t / TOKENS_PER_BLOCK, slot = t % TOKENS_PER_BLOCK;
        for (uint32_t layer = 0; layer < LAYERS; layer++) {
            if (slot == 0) { /* a new block per layer every TOKENS_PER_BLOCK tokens */
                speckv_hint hint;
                memset(&hint, 0, sizeof hint);
                hint.struct_size = sizeof hint;
                hint.request = request;
                hint.layer = layer;
                hint.token_pos = blk * TOKENS_PER_BLOCK;
                hint.token_count = TOKENS_PER_BLOCK;
                CHECK(speckv_alloc(pool, (uint64_t)TOKENS_PER_BLOCK * ROW_BYTES, SPECKV_DTYPE_FP16, &hint,
                                   &blocks[layer][blk]));
            }
            /* 1. append this token's K/V */
            kv_row(layer, t, row);
            CHECK(speckv_write(pool, blocks[layer][blk], slot * ROW_BYTES, row, ROW_BYTES));

            /* 2. announce the next layer (wrapping to layer 0 of the next token) */
            speckv_hint next;
            memset(&next, 0, sizeof next);
            next.struct_size = sizeof next;
            next.request = request;
            next.layer = (layer + 1) % LAYERS;
            next.token_pos = layer + 1 == LAYERS ? t + 1 : t;
            CHECK(speckv_prefetch(pool, &next));

            /* 3. attention reads every KV row of this layer so far */
            for (uint64_t b = 0; b <= blk; b++) {
                uint64_t rows = b == blk ? slot + 1 : TOKENS_PER_BLOCK;
                CHECK(speckv_access(pool, blocks[layer][b], 0, history, rows * ROW_BYTES, SPECKV_ACCESS_DEFAULT));
                for (uint64_t r = 0; r < rows; r++) {
                    kv_row(layer, b * TOKENS_PER_BLOCK + r, want);
                    if (memcmp(history + r * ROW_BYTES, want, ROW_BYTES) != 0) {
                        fprintf(stderr, "engine_loop: layer %u token %" PRIu64 " reads back wrong\n", layer,
                                b * TOKENS_PER_BLOCK + r);
                        goto fail;
                    }
                }
            }
        }
    }

    speckv_pool_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK(speckv_stats(pool, &st));
    printf("%" PRIu64 " tokens x %d layers: %" PRIu64 " blocks, %" PRIu64 " B written, %" PRIu64
           " B read in %" PRIu64 " accesses, %" PRIu64 " prefetch hints, %" PRIu64 "/%" PRIu64 " pages used\n",
           tokens, LAYERS, st.allocs, st.bytes_written, st.bytes_read, st.reads, st.prefetch_hints, st.pages_used,
           st.pages_total);
    if (st.allocs != LAYERS * ((tokens + TOKENS_PER_BLOCK - 1) / TOKENS_PER_BLOCK) ||
        st.bytes_written != tokens * LAYERS * ROW_BYTES || st.prefetch_hints != tokens * LAYERS) {
        fprintf(stderr, "engine_loop: stats disagree with what the loop did\n");
        goto fail;
    }

    /* The request is done: release its KV. */
    for (uint32_t layer = 0; layer < LAYERS; layer++)
        for (uint64_t b = 0; b < MAX_BLOCKS && blocks[layer][b]; b++) CHECK(speckv_free(pool, blocks[layer][b]));
    ok = 1;
fail:
    if (speckv_pool_close(pool) != SPECKV_OK) ok = 0;
    free(history);
    return ok ? 0 : 1;
}
