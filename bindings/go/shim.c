// SPDX-License-Identifier: Apache-2.0
// The C side of the Go binding's loader: one function-pointer table filled
// by dlsym, and wrappers that copy speckv_errmsg() in the same C call.
#include "shim.h"

#include <dlfcn.h>
#include <stdio.h>

#include "_cgo_export.h"  // skvGoLog (log.go)

static struct {
	uint32_t (*version_number)(void);
	const char *(*version_string)(void);
	const char *(*strerror)(int);
	const char *(*errmsg)(void);
	int (*config_new)(skv_config **);
	void (*config_free)(skv_config *);
	int (*config_set_int)(skv_config *, const char *, int64_t);
	int (*config_set_str)(skv_config *, const char *, const char *);
	int (*config_get_int)(const skv_config *, const char *, int64_t *);
	int (*config_bounds)(const char *, int64_t *, int64_t *, int64_t *);
	int (*config_load_toml)(skv_config *, const char *);
	int (*config_load_toml_string)(skv_config *, const char *, size_t);
	int (*config_set_log)(skv_config *, void (*)(void *, int, const char *), void *);
	int (*pool_open)(const char *, const skv_config *, skv_pool **);
	int (*pool_close)(skv_pool *);
	int (*alloc)(skv_pool *, uint64_t, int, const skv_hint *, uint64_t *);
	int (*free)(skv_pool *, uint64_t);
	int (*write)(skv_pool *, uint64_t, uint64_t, const void *, size_t);
	int (*access)(skv_pool *, uint64_t, uint64_t, void *, size_t, uint32_t);
	int (*block_info)(skv_pool *, uint64_t, skv_block_meta *);
	int (*pin)(skv_pool *, uint64_t, const void **, size_t *);
	int (*unpin)(skv_pool *, uint64_t);
	int (*demote)(skv_pool *, uint64_t);
	int (*prefetch)(skv_pool *, const skv_hint *);
	int (*translate)(skv_pool *, uint64_t, uint64_t, uint32_t, uint64_t, uint64_t *, uint64_t *);
	int (*select)(skv_pool *, uint64_t, uint64_t, uint32_t, const float *, size_t, const skv_select_params *,
	              skv_page_ref *, size_t, size_t *, size_t *);
	int (*attend)(skv_pool *, uint64_t, uint64_t, uint32_t, const float *, size_t, const skv_select_params *,
	              const skv_page_ref *, size_t, skv_partial *);
	int (*merge_partials)(uint32_t, uint32_t, const skv_partial *, const skv_partial *, skv_partial *);
	int (*block_hash)(int, uint64_t, const uint8_t *, const uint32_t *, size_t, const void *, size_t, uint8_t *);
	int (*publish)(skv_pool *, uint64_t, const uint8_t *, uint64_t *);
	int (*lookup)(skv_pool *, uint64_t, const uint8_t *, uint64_t *);
	int (*tenant_set_quota)(skv_pool *, uint64_t, uint64_t);
	int (*tenant_usage)(skv_pool *, uint64_t, uint64_t *, uint64_t *);
	int (*stats)(skv_pool *, skv_pool_stats *);
	int (*stats_json)(skv_pool *, char *, size_t, size_t *);
} skv;

static void *lib;

// Loads the library and resolves speckv_version_number. Returns 0, or -1
// with the reason in err. The library is never closed.
int skv_load(const char *path, char *err) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) { snprintf(err, SKV_MSG, "%s", dlerror()); return -1; }
	lib = h;
	*(void **)&skv.version_number = dlsym(h, "speckv_version_number");
	if (!skv.version_number) { snprintf(err, SKV_MSG, "symbol speckv_version_number missing"); return -1; }
	return 0;
}

// Resolves the rest once the version is known to be compatible.
int skv_resolve(char *err) {
	void *h = lib;
#define SYM(f) do { *(void **)&skv.f = dlsym(h, "speckv_" #f); \
		if (!skv.f) { snprintf(err, SKV_MSG, "symbol speckv_%s missing", #f); return -1; } } while (0)
	SYM(version_string); SYM(strerror); SYM(errmsg);
	SYM(config_new); SYM(config_free); SYM(config_set_int); SYM(config_set_str);
	SYM(config_get_int); SYM(config_bounds); SYM(config_load_toml); SYM(config_load_toml_string);
	SYM(config_set_log);
	SYM(pool_open); SYM(pool_close); SYM(alloc); SYM(free); SYM(write); SYM(access);
	SYM(block_info); SYM(pin); SYM(unpin); SYM(demote); SYM(prefetch); SYM(translate); SYM(stats); SYM(stats_json);
	SYM(select); SYM(attend); SYM(merge_partials);
	SYM(block_hash); SYM(publish); SYM(lookup); SYM(tenant_set_quota); SYM(tenant_usage);
#undef SYM
	return 0;
}

// speckv_errmsg() is per OS thread and a goroutine may change threads
// between two cgo calls, so every wrapper copies the detail in the same call.
static int skv_done(int rc, char *msg) {
	if (rc != 0) {
		const char *m = skv.errmsg();
		if (!m || !*m) m = skv.strerror(rc);
		snprintf(msg, SKV_MSG, "%s", m ? m : "");
	}
	return rc;
}

uint32_t skv_version_number(void) { return skv.version_number(); }
const char *skv_version_string(void) { return skv.version_string(); }
const char *skv_strerror(int c) { return skv.strerror(c); }
int skv_config_new(skv_config **o, char *m) { return skv_done(skv.config_new(o), m); }
void skv_config_free(skv_config *c) { skv.config_free(c); }
int skv_config_set_int(skv_config *c, const char *k, int64_t v, char *m) { return skv_done(skv.config_set_int(c, k, v), m); }
int skv_config_set_str(skv_config *c, const char *k, const char *v, char *m) { return skv_done(skv.config_set_str(c, k, v), m); }
int skv_config_get_int(skv_config *c, const char *k, int64_t *v, char *m) { return skv_done(skv.config_get_int(c, k, v), m); }
int skv_config_bounds(const char *k, int64_t *lo, int64_t *hi, int64_t *d, char *m) { return skv_done(skv.config_bounds(k, lo, hi, d), m); }
int skv_config_load_toml(skv_config *c, const char *p, char *m) { return skv_done(skv.config_load_toml(c, p), m); }
int skv_config_load_toml_string(skv_config *c, const char *t, size_t n, char *m) { return skv_done(skv.config_load_toml_string(c, t, n), m); }
// The library's log callback: hands the message to the Go sink whose
// cgo.Handle is `user` (log.go).
static void skv_log_trampoline(void *user, int level, const char *msg) {
	skvGoLog((uintptr_t)user, level, (char *)msg);
}
int skv_config_set_log(skv_config *c, uintptr_t h, char *m) {
	return skv_done(skv.config_set_log(c, h ? skv_log_trampoline : NULL, (void *)h), m);
}
int skv_pool_open(const char *u, skv_config *c, skv_pool **o, char *m) { return skv_done(skv.pool_open(u, c, o), m); }
int skv_pool_close(skv_pool *p, char *m) { return skv_done(skv.pool_close(p), m); }
int skv_alloc(skv_pool *p, uint64_t n, int dt, const skv_hint *h, uint64_t *o, char *m) { return skv_done(skv.alloc(p, n, dt, h, o), m); }
int skv_free(skv_pool *p, uint64_t h, char *m) { return skv_done(skv.free(p, h), m); }
int skv_block_info(skv_pool *p, uint64_t h, skv_block_meta *o, char *m) { return skv_done(skv.block_info(p, h, o), m); }
int skv_write(skv_pool *p, uint64_t h, uint64_t off, const void *s, size_t n, char *m) { return skv_done(skv.write(p, h, off, s, n), m); }
int skv_access(skv_pool *p, uint64_t h, uint64_t off, void *d, size_t n, char *m) { return skv_done(skv.access(p, h, off, d, n, 0), m); }
int skv_pin(skv_pool *p, uint64_t h, const void **ptr, size_t *n, char *m) { return skv_done(skv.pin(p, h, ptr, n), m); }
int skv_unpin(skv_pool *p, uint64_t h, char *m) { return skv_done(skv.unpin(p, h), m); }
int skv_demote(skv_pool *p, uint64_t h, char *m) { return skv_done(skv.demote(p, h), m); }
int skv_prefetch(skv_pool *p, const skv_hint *h, char *m) { return skv_done(skv.prefetch(p, h), m); }
int skv_translate(skv_pool *p, uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, uint64_t *o,
                  uint64_t *off, char *m) {
	return skv_done(skv.translate(p, tenant, request, layer, pos, o, off), m);
}
int skv_select(skv_pool *p, uint64_t tenant, uint64_t request, uint32_t layer, const float *q, size_t q_len,
               const skv_select_params *sp, skv_page_ref *out, size_t cap, size_t *n_out, size_t *n_pages, char *m) {
	return skv_done(skv.select(p, tenant, request, layer, q, q_len, sp, out, cap, n_out, n_pages), m);
}
int skv_attend(skv_pool *p, uint64_t tenant, uint64_t request, uint32_t layer, const float *q, size_t q_len,
               const skv_select_params *sp, const skv_page_ref *ex, size_t n_ex, float *out, float *max_score,
               float *sum_exp, char *m) {
	skv_partial r = {sizeof r, out, max_score, sum_exp};
	return skv_done(skv.attend(p, tenant, request, layer, q, q_len, sp, ex, n_ex, &r), m);
}
int skv_merge_partials(uint32_t q_heads, uint32_t head_dim, const float *a_out, const float *a_max,
                       const float *a_sum, const float *b_out, const float *b_max, const float *b_sum,
                       float *out, float *max_score, float *sum_exp, char *m) {
	// speckv_partial's pointers are not const; a and b are only read.
	skv_partial a = {sizeof a, (float *)a_out, (float *)a_max, (float *)a_sum};
	skv_partial b = {sizeof b, (float *)b_out, (float *)b_max, (float *)b_sum};
	skv_partial o = {sizeof o, out, max_score, sum_exp};
	return skv_done(skv.merge_partials(q_heads, head_dim, &a, &b, &o), m);
}
// For tests: speckv_merge_partials with a speckv_partial of struct_size n.
int skv_partial_struct_size(size_t n, char *m) {
	float o[2] = {0, 0}, mx[1] = {0}, s[1] = {1};
	skv_partial a = {n, o, mx, s};
	return skv_done(skv.merge_partials(1, 2, &a, &a, &a), m);
}
// Go cannot take the address of an empty slice's first byte, so an empty but
// present extra (not the same as none: NULL is CBOR null) points here.
static const uint8_t skv_empty[1];
int skv_block_hash(int algo, uint64_t tenant, const uint8_t *parent, const uint32_t *tok, size_t n,
                   const void *extra, size_t elen, int has_extra, uint8_t *out, char *m) {
	if (has_extra && !extra) extra = skv_empty;
	return skv_done(skv.block_hash(algo, tenant, parent, tok, n, extra, elen, out), m);
}
int skv_publish(skv_pool *p, uint64_t h, const uint8_t *hash, uint64_t *canonical, char *m) { return skv_done(skv.publish(p, h, hash, canonical), m); }
int skv_lookup(skv_pool *p, uint64_t tenant, const uint8_t *hash, uint64_t *o, char *m) { return skv_done(skv.lookup(p, tenant, hash, o), m); }
int skv_tenant_set_quota(skv_pool *p, uint64_t tenant, uint64_t max_pages, char *m) { return skv_done(skv.tenant_set_quota(p, tenant, max_pages), m); }
int skv_tenant_usage(skv_pool *p, uint64_t tenant, uint64_t *used, uint64_t *max_pages, char *m) { return skv_done(skv.tenant_usage(p, tenant, used, max_pages), m); }
int skv_stats(skv_pool *p, skv_pool_stats *s, char *m) { return skv_done(skv.stats(p, s), m); }
int skv_stats_size(skv_pool *p, skv_pool_stats *s, size_t n, char *m) {
	s->struct_size = n;
	return skv_done(skv.stats(p, s), m);
}
int skv_stats_json(skv_pool *p, char *b, size_t cap, size_t *need, char *m) { return skv_done(skv.stats_json(p, b, cap, need), m); }
