/* SPDX-License-Identifier: Apache-2.0 */
/* speckv_llama.h: speckv as the prompt/prefix cache of a libllama engine.
 *
 * A prompt's tokens are cut into blocks of `block_tokens`; block i is keyed by
 * speckv's chained content hash (speckv_block_hash, SPECKV_HASH_NATIVE) of its
 * tokens, the previous block's key and "extra" bytes naming the model (a
 * 32-byte id, e.g. speckv_llama_model_id_file) and the KV cache settings
 * (`kv_desc`, the model's layer count and embedding width), salted by the
 * tenant. Each block is stored once in the pool, holding the K and V rows of
 * its tokens for every layer, cut out of llama.cpp's per-sequence state
 * (llama_state_seq_get_data); a restore puts the blocks of the longest cached
 * prefix back together into one sequence state (llama_state_seq_set_data).
 * docs/llamacpp.md describes the state format this relies on; a state that
 * does not parse as that format is an error, never a guess.
 *
 * Not thread-safe per handle: use one handle per thread (several handles may
 * share one pool). */
#ifndef SPECKV_LLAMA_H
#define SPECKV_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "speckv.h"

#ifdef __cplusplus
extern "C" {
#endif

struct llama_context;

#define SPECKV_LLAMA_API __attribute__((visibility("default")))

/* Errors (0 = OK). speckv_llama_errmsg() says more. */
#define SPECKV_LLAMA_OK 0
#define SPECKV_LLAMA_EINVAL -1   /* bad argument (NULL, bad seq id, n out of range) */
#define SPECKV_LLAMA_EFORMAT -2  /* llama.cpp's sequence state is not the format docs/llamacpp.md describes */
#define SPECKV_LLAMA_EBUSY -3    /* restore into a sequence that already holds tokens */
#define SPECKV_LLAMA_ECTX -4     /* the context is too small, or llama.cpp refused the state */
#define SPECKV_LLAMA_EPOOL -5    /* a speckv call failed (its error in the message) */
#define SPECKV_LLAMA_ENOMEM -6

typedef struct speckv_llama speckv_llama;

typedef struct speckv_llama_params {
    size_t struct_size;        /* sizeof(speckv_llama_params) */
    uint64_t tenant;           /* speckv tenant: prompts of one tenant never hit another's */
    uint32_t block_tokens;     /* tokens per block (0 = 16) */
    uint8_t model_id[32];      /* identity of the model weights (speckv_llama_model_id_file) */
    const char *kv_desc;       /* KV settings that change the cache's bytes, e.g. "f16/f16/fa=0"
                                  (type_k/type_v/flash attention); NULL = "" */
    uint32_t flags;            /* SPECKV_LLAMA_F_* (0 = none). Callers built before this field
                                  existed pass the shorter struct_size and get 0. */
} speckv_llama_params;

/* Store each block as three pool blocks: a small opaque one (header, tokens,
 * layout; keyed by the block's hash) and its K rows and V rows as typed blocks
 * hinted SPECKV_HINT_KEYS / SPECKV_HINT_VALUES, so the pool's codec
 * (codec.key_mode, codec.value_mode) applies to them. Lossy unless those modes
 * are `raw` (the pool's default). Needs F16, BF16 or F32 K and V caches;
 * otherwise a block is stored whole, as without the flag. A restore reads
 * either form, whatever its own flags. docs/llamacpp.md "The codec". */
#define SPECKV_LLAMA_F_CODEC 0x1u

typedef struct speckv_llama_stats {
    size_t struct_size;
    uint64_t restores;         /* restore calls */
    uint64_t blocks_restored;
    uint64_t tokens_restored;
    uint64_t bytes_restored;   /* block bytes read from the pool */
    uint64_t blocks_stored;    /* blocks this handle published */
    uint64_t blocks_present;   /* blocks a store found already in the pool (not stored again) */
    uint64_t bytes_stored;
    uint64_t fallbacks;        /* restores that fell back to recompute (corrupt or mismatched block,
                                  state llama.cpp refused): the prefix is recomputed */
    uint64_t bad_blocks;       /* blocks rejected: checksum failure, bad header, wrong tokens/layout */
} speckv_llama_stats;

/* SHA-256-based id of a file's bytes (the GGUF model file): out[32]. Returns 0 or EINVAL/EPOOL. */
SPECKV_LLAMA_API int speckv_llama_model_id_file(const char *path, uint8_t out[32]);

/* Opens an adapter over `pool` (not owned; must outlive the handle) and `ctx`. */
SPECKV_LLAMA_API int speckv_llama_open(speckv_pool *pool, struct llama_context *ctx, const speckv_llama_params *params,
                      speckv_llama **out);
SPECKV_LLAMA_API void speckv_llama_close(speckv_llama *a);

/* Restores into the empty sequence `seq_id` the longest prefix of
 * tokens[0..n) whose blocks are all in the pool, leaving at least one token
 * to decode (at most floor((n-1)/block_tokens) blocks), and sets *restored to
 * the tokens it covers (0 on a miss or a fallback). The caller then decodes
 * tokens[*restored..n) at positions *restored... A damaged or mismatched block
 * ends the prefix before it and is counted (stats bad_blocks); if llama.cpp
 * refuses the assembled state the sequence is cleared, *restored is 0 and
 * it is counted (fallbacks). Errors: EINVAL, EBUSY (the sequence holds
 * tokens), ECTX (the prefix does not fit the context), ENOMEM. */
SPECKV_LLAMA_API int speckv_llama_restore(speckv_llama *a, int32_t seq_id, const int32_t *tokens, size_t n, size_t *restored);

/* Stores the full blocks of tokens[0..n) that are not in the pool yet,
 * reading their KV from sequence `seq_id`, which must hold positions 0..n-1
 * of these tokens. Call after prefill and whenever decode completes a block.
 * *stored (may be NULL) = blocks published by this call. Errors: EINVAL,
 * EFORMAT, EPOOL (e.g. pool full), ENOMEM. */
SPECKV_LLAMA_API int speckv_llama_store(speckv_llama *a, int32_t seq_id, const int32_t *tokens, size_t n, size_t *stored);

/* The keys of the full blocks of tokens[0..n): writes min(cap, n/block_tokens)
 * hashes of SPECKV_HASH_BYTES to out and returns their count (or < 0). */
SPECKV_LLAMA_API int speckv_llama_block_keys(speckv_llama *a, const int32_t *tokens, size_t n, uint8_t *out, size_t cap);

SPECKV_LLAMA_API int speckv_llama_stats_get(speckv_llama *a, speckv_llama_stats *out);
/* The last error of this handle (never NULL). */
SPECKV_LLAMA_API const char *speckv_llama_errmsg(const speckv_llama *a);

#ifdef __cplusplus
}
#endif
#endif /* SPECKV_LLAMA_H */
