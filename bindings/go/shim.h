// SPDX-License-Identifier: Apache-2.0
/* Private to the Go binding: the C side of its run-time (dlopen) loader. */
#ifndef SPECKV_GO_SHIM_H
#define SPECKV_GO_SHIM_H
#include <stddef.h>
#include <stdint.h>

// Declared by hand from speckv.h 0.1 so that this module needs neither the
// header nor libspeckv at build time; pool_test.go checks the sizes.
#define SKV_HASH_BYTES 32

typedef struct skv_pool skv_pool;
typedef struct skv_config skv_config;
typedef struct skv_hint {
	size_t struct_size;
	uint64_t tenant, request;
	uint32_t layer, flags;
	uint64_t token_pos, token_count;
	uint8_t content_hash[SKV_HASH_BYTES];
} skv_hint;
typedef struct skv_pool_stats {
	size_t struct_size;
	uint64_t pool_bytes, page_size, pages_total, pages_used, blocks_live, blocks_max,
		allocs, frees, bytes_written, bytes_read, reads, cache_hits, cache_misses,
		checksum_failures, prefetch_hints, attached,
		blocks_published, shared_bytes, lookups, lookup_hits, dedup_bytes, evictions, reclaimed_blocks,
		l2_hits, sync_reads, prefetch_pages, prefetch_used, prefetch_wasted, prefetch_wasted_bytes,
		prefetch_ignored, prefetch_dropped, link_bytes, tlb_hits, tlb_misses;
	uint32_t prefetch_beta_ppm, prefetch_depth;
	uint64_t codec_pages_encoded, codec_raw_bytes, codec_stored_bytes, codec_pages_bypassed,
		codec_pages_decoded;
	uint64_t l4_blocks, l4_bytes, l4_demotions, l4_promotions, l4_demote_failures;
} skv_pool_stats;

typedef struct skv_block_meta {
	size_t struct_size;
	uint64_t bytes;
	int32_t dtype;
	uint32_t flags;
	uint64_t tenant, request;
	uint32_t layer, reserved;
	uint64_t token_pos, token_count;
	uint8_t content_hash[SKV_HASH_BYTES];
} skv_block_meta;

typedef struct skv_select_params {
	size_t struct_size;
	uint32_t kv_heads, head_dim, q_per_kv, budget, recent;
	float band, scale;
	uint64_t context_tokens;
} skv_select_params;

typedef struct skv_page_ref {
	uint64_t block, offset, token_pos;
	uint32_t tokens;
	float score;
} skv_page_ref;

typedef struct skv_partial {
	size_t struct_size;
	float *out, *max_score, *sum_exp;
} skv_partial;

#define SKV_MSG 512

int skv_load(const char *path, char *err);
int skv_resolve(char *err);
uint32_t skv_version_number(void);
const char *skv_version_string(void);
const char *skv_strerror(int c);
int skv_config_new(skv_config **o, char *m);
void skv_config_free(skv_config *c);
int skv_config_set_int(skv_config *c, const char *k, int64_t v, char *m);
int skv_config_set_str(skv_config *c, const char *k, const char *v, char *m);
int skv_config_get_int(skv_config *c, const char *k, int64_t *v, char *m);
int skv_config_bounds(const char *k, int64_t *lo, int64_t *hi, int64_t *d, char *m);
int skv_config_load_toml(skv_config *c, const char *p, char *m);
int skv_config_load_toml_string(skv_config *c, const char *t, size_t n, char *m);
int skv_config_set_log(skv_config *c, uintptr_t h, char *m);
int skv_pool_open(const char *u, skv_config *c, skv_pool **o, char *m);
int skv_pool_close(skv_pool *p, char *m);
int skv_alloc(skv_pool *p, uint64_t n, int dt, const skv_hint *h, uint64_t *o, char *m);
int skv_free(skv_pool *p, uint64_t h, char *m);
int skv_write(skv_pool *p, uint64_t h, uint64_t off, const void *s, size_t n, char *m);
int skv_access(skv_pool *p, uint64_t h, uint64_t off, void *d, size_t n, char *m);
int skv_block_info(skv_pool *p, uint64_t h, skv_block_meta *o, char *m);
int skv_pin(skv_pool *p, uint64_t h, const void **ptr, size_t *n, char *m);
int skv_unpin(skv_pool *p, uint64_t h, char *m);
int skv_demote(skv_pool *p, uint64_t h, char *m);
int skv_prefetch(skv_pool *p, const skv_hint *h, char *m);
int skv_translate(skv_pool *p, uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, uint64_t *o,
                  uint64_t *off, char *m);
int skv_select(skv_pool *p, uint64_t tenant, uint64_t request, uint32_t layer, const float *q, size_t q_len,
               const skv_select_params *sp, skv_page_ref *out, size_t cap, size_t *n_out, size_t *n_pages, char *m);
// The partials' arrays are separate arguments: Go memory may not hold Go
// pointers when it is passed to C, so the speckv_partial is built here.
int skv_attend(skv_pool *p, uint64_t tenant, uint64_t request, uint32_t layer, const float *q, size_t q_len,
               const skv_select_params *sp, const skv_page_ref *ex, size_t n_ex, float *out, float *max_score,
               float *sum_exp, char *m);
int skv_merge_partials(uint32_t q_heads, uint32_t head_dim, const float *a_out, const float *a_max,
                       const float *a_sum, const float *b_out, const float *b_max, const float *b_sum,
                       float *out, float *max_score, float *sum_exp, char *m);
int skv_partial_struct_size(size_t n, char *m);
int skv_block_hash(int algo, uint64_t tenant, const uint8_t *parent, const uint32_t *tok, size_t n,
                   const void *extra, size_t elen, int has_extra, uint8_t *out, char *m);
int skv_publish(skv_pool *p, uint64_t h, const uint8_t *hash, uint64_t *canonical, char *m);
int skv_lookup(skv_pool *p, uint64_t tenant, const uint8_t *hash, uint64_t *o, char *m);
int skv_tenant_set_quota(skv_pool *p, uint64_t tenant, uint64_t max_pages, char *m);
int skv_tenant_usage(skv_pool *p, uint64_t tenant, uint64_t *used, uint64_t *max_pages, char *m);
int skv_stats(skv_pool *p, skv_pool_stats *s, char *m);
// For tests: speckv_stats with struct_size n (the older layouts).
int skv_stats_size(skv_pool *p, skv_pool_stats *s, size_t n, char *m);
int skv_stats_json(skv_pool *p, char *b, size_t cap, size_t *need, char *m);

#endif
