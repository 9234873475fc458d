// SPDX-License-Identifier: Apache-2.0
/* prefill_decode: disaggregated serving on one speckv pool, no daemon.
 *
 * One prefill process computes the KV blocks of a batch of requests that
 * share a system prompt, and publishes each block under its chained content
 * hash. Several decode processes, knowing only the requests' token ids,
 * compute the same hashes, look the blocks up, read them and check every
 * byte. The shared prefix is stored once however many requests use it; the
 * program prints what sharing saved.
 *
 *   prefill_decode URI [requests] [decoders]
 *   e.g. prefill_decode "file:/tmp/pd.pool?size=64M" 16 3
 *
 * Only the public header is used. Exit status 0 = every byte checked. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "speckv.h"

enum { BLOCK_TOKENS = 16, PREFIX_BLOCKS = 4, OWN_BLOCKS = 2, KV_BYTES_PER_TOKEN = 512 };
#define BLOCK_BYTES ((size_t)BLOCK_TOKENS * KV_BYTES_PER_TOKEN)
#define TENANT 7

/* Token ids of block b of request r: the first PREFIX_BLOCKS blocks are the
 * shared system prompt, the rest are the request's own. */
static void tokens_of(int r, int b, uint32_t *t) {
    for (int i = 0; i < BLOCK_TOKENS; i++)
        t[i] = b < PREFIX_BLOCKS ? (uint32_t)(1000 + b * BLOCK_TOKENS + i) : (uint32_t)(50000 + r * 997 + b * 31 + i);
}

/* Stand-in for the KV a model would compute: a function of the block's hash,
 * so equal prefixes give equal bytes and anyone can check them. */
static void kv_of(const uint8_t hash[SPECKV_HASH_BYTES], unsigned char *kv) {
    uint64_t x;
    memcpy(&x, hash, sizeof x);
    x |= 1;
    for (size_t i = 0; i < BLOCK_BYTES; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        kv[i] = (unsigned char)x;
    }
}

static int die(const char *what, int rc) {
    fprintf(stderr, "prefill_decode: %s: %s: %s\n", what, speckv_strerror(rc), speckv_errmsg());
    return 1;
}

/* The chained hashes of request r's blocks. */
static int hashes_of(int r, uint8_t out[][SPECKV_HASH_BYTES]) {
    uint32_t tok[BLOCK_TOKENS];
    const char model[] = "stories260K";
    for (int b = 0; b < PREFIX_BLOCKS + OWN_BLOCKS; b++) {
        tokens_of(r, b, tok);
        int rc = speckv_block_hash(SPECKV_HASH_NATIVE, TENANT, b ? out[b - 1] : NULL, tok, BLOCK_TOKENS, model,
                                   sizeof model - 1, out[b]);
        if (rc != SPECKV_OK) return die("speckv_block_hash", rc);
    }
    return 0;
}

static int prefill(const char *uri, int requests) {
    speckv_pool *pool;
    int rc = speckv_pool_open(uri, NULL, &pool);
    if (rc != SPECKV_OK) return die("open", rc);
    unsigned char kv[BLOCK_BYTES];
    uint8_t h[PREFIX_BLOCKS + OWN_BLOCKS][SPECKV_HASH_BYTES];
    int computed = 0, reused = 0;
    for (int r = 0; r < requests; r++) {
        if (hashes_of(r, h)) return 1;
        for (int b = 0; b < PREFIX_BLOCKS + OWN_BLOCKS; b++) {
            speckv_handle blk;
            /* Already there? Then prefill skips this block's compute. */
            rc = speckv_lookup(pool, TENANT, h[b], &blk);
            if (rc == SPECKV_OK) {
                reused++;
                speckv_free(pool, blk); /* release the reference lookup took */
                continue;
            }
            if (rc != SPECKV_ENOENT) return die("lookup", rc);
            speckv_hint hint;
            memset(&hint, 0, sizeof hint);
            hint.struct_size = sizeof hint;
            hint.tenant = TENANT;
            hint.request = (uint64_t)r;
            hint.token_pos = (uint64_t)b * BLOCK_TOKENS;
            hint.token_count = BLOCK_TOKENS;
            if ((rc = speckv_alloc(pool, BLOCK_BYTES, SPECKV_DTYPE_FP16, &hint, &blk)) != SPECKV_OK)
                return die("alloc", rc);
            kv_of(h[b], kv);
            if ((rc = speckv_write(pool, blk, 0, kv, BLOCK_BYTES)) != SPECKV_OK) return die("write", rc);
            speckv_handle canon;
            rc = speckv_publish(pool, blk, h[b], &canon);
            if (rc == SPECKV_EEXIST) { /* someone published it first: use theirs */
                speckv_free(pool, blk);
                reused++;
            } else if (rc != SPECKV_OK) {
                return die("publish", rc);
            } else {
                computed++;
            }
            speckv_free(pool, canon); /* the pool keeps it, published, until space is needed */
        }
    }
    printf("prefill : %d requests, %d blocks computed and published, %d reused from the pool\n", requests, computed,
           reused);
    return speckv_pool_close(pool) == SPECKV_OK ? 0 : 1;
}

static int decode(const char *uri, int id, int decoders, int requests) {
    speckv_pool *pool;
    int rc = speckv_pool_open(uri, NULL, &pool);
    if (rc != SPECKV_OK) return die("open", rc);
    unsigned char want[BLOCK_BYTES], got[BLOCK_BYTES];
    uint8_t h[PREFIX_BLOCKS + OWN_BLOCKS][SPECKV_HASH_BYTES];
    int blocks = 0;
    for (int r = id; r < requests; r += decoders) {
        if (hashes_of(r, h)) return 1;
        for (int b = 0; b < PREFIX_BLOCKS + OWN_BLOCKS; b++) {
            speckv_handle blk;
            if ((rc = speckv_lookup(pool, TENANT, h[b], &blk)) != SPECKV_OK) return die("lookup", rc);
            if ((rc = speckv_access(pool, blk, 0, got, BLOCK_BYTES, 0)) != SPECKV_OK) return die("access", rc);
            kv_of(h[b], want);
            if (memcmp(want, got, BLOCK_BYTES) != 0) {
                fprintf(stderr, "prefill_decode: request %d block %d: KV differs from what prefill wrote\n", r, b);
                return 1;
            }
            speckv_free(pool, blk);
            blocks++;
        }
    }
    printf("decode %d: %d blocks looked up and verified byte for byte\n", id, blocks);
    return speckv_pool_close(pool) == SPECKV_OK ? 0 : 1;
}

static int wait_all(int n) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st;
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad = 1;
    }
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: prefill_decode URI [requests] [decoders]\n");
        return 2;
    }
    const char *uri = argv[1];
    int requests = argc > 2 ? atoi(argv[2]) : 16, decoders = argc > 3 ? atoi(argv[3]) : 3;
    if (requests < 1 || decoders < 1 || decoders > 32) {
        fprintf(stderr, "prefill_decode: requests >= 1, decoders in 1..32\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Prefill runs first (a decode needs its blocks), then the decoders together. */
    if (fork() == 0) _exit(prefill(uri, requests));
    if (wait_all(1)) return 1;
    for (int d = 0; d < decoders; d++)
        if (fork() == 0) _exit(decode(uri, d, decoders, requests));
    if (wait_all(decoders)) return 1;

    speckv_pool *pool;
    int rc = speckv_pool_open(uri, NULL, &pool);
    if (rc != SPECKV_OK) return die("open", rc);
    speckv_pool_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if ((rc = speckv_stats(pool, &st)) != SPECKV_OK) return die("stats", rc);
    uint64_t logical = (uint64_t)requests * (PREFIX_BLOCKS + OWN_BLOCKS) * BLOCK_BYTES;
    printf("pool    : %" PRIu64 " published blocks, %" PRIu64 " bytes stored for %" PRIu64
           " bytes of KV referenced by %d requests: sharing saved %.1f%%\n",
           st.blocks_published, st.shared_bytes, logical, requests,
           100.0 * (1.0 - (double)st.shared_bytes / (double)logical));
    printf("pool    : %" PRIu64 " lookups, %" PRIu64 " hits\n", st.lookups, st.lookup_hits);
    uint64_t want_blocks = (uint64_t)PREFIX_BLOCKS + (uint64_t)requests * OWN_BLOCKS;
    speckv_pool_close(pool);
    if (st.blocks_published != want_blocks) {
        fprintf(stderr, "prefill_decode: expected %" PRIu64 " published blocks, found %" PRIu64 "\n", want_blocks,
                st.blocks_published);
        return 1;
    }
    return 0;
}
