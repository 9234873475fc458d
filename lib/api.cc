// SPDX-License-Identifier: Apache-2.0
// The C ABI facade: argument checks, exception fences, status codes.
// Every exported function catches everything: nothing thrown ever crosses
// into the caller. Failures set the thread's detail message (speckv_errmsg);
// successes leave it alone, so the hot paths touch no thread-local state.
#include <cstddef>
#include <cstring>
#include <new>
#include <utility>

#include <nlohmann/json.hpp>

#include "share/block_hash.h"
#include "config/config.h"
#include "select/nmp.h"
#include "pool/pool.h"
#include "remote/remote_tier.h"
#include "speckv.h"
#include "util/status.h"

using namespace speckv;

namespace {
template <typename F>
int guard(F &&f) noexcept {
    try {
        return f();
    } catch (const std::bad_alloc &) {
        return fail(SPECKV_ENOMEM, "out of memory");
    } catch (const std::exception &e) {
        return fail(SPECKV_EINTERNAL, "internal error: %s", e.what());
    } catch (...) {
        return fail(SPECKV_EINTERNAL, "internal error: unknown exception");
    }
}
#define NEED_POOL()                                                      \
    do {                                                                 \
        if (!pool || !pool->rep) return fail(SPECKV_EINVAL, "pool is NULL"); \
    } while (0)
// The pool's stats JSON and, with L5, its remote_* counters: the one list
// speckv_stats_json prints and speckv_stat reads.
std::string stats_json_of(const speckv_pool *pool) {
    std::string j = pool->rep->stats_json();
    if (pool->remote && !j.empty() && j.back() == '}') j.insert(j.size() - 1, pool->remote->json_fields());
    return j;
}
}  // namespace

extern "C" {

SPECKV_API uint32_t speckv_version_number(void) { return SPECKV_VERSION_NUMBER; }
SPECKV_API const char *speckv_version_string(void) { return SPECKV_VERSION_STRING; }
SPECKV_API const char *speckv_strerror(int code) { return status_text(code); }
SPECKV_API const char *speckv_errmsg(void) { return last_error(); }

SPECKV_API int speckv_config_new(speckv_config **out) {
    return guard([&] {
        if (!out) return fail(SPECKV_EINVAL, "out is NULL");
        *out = new speckv_config;
        return SPECKV_OK;
    });
}

SPECKV_API void speckv_config_free(speckv_config *cfg) { delete cfg; }

SPECKV_API int speckv_config_set_int(speckv_config *cfg, const char *key, int64_t value) {
    return guard([&] {
        if (!cfg || !key) return fail(SPECKV_EINVAL, "cfg and key must not be NULL");
        return cfg->rep.set_int(key, value);
    });
}

SPECKV_API int speckv_config_set_str(speckv_config *cfg, const char *key, const char *value) {
    return guard([&] {
        if (!cfg || !key || !value) return fail(SPECKV_EINVAL, "cfg, key and value must not be NULL");
        return cfg->rep.set_str(key, value);
    });
}

SPECKV_API int speckv_config_get_int(const speckv_config *cfg, const char *key, int64_t *value) {
    return guard([&] {
        if (!cfg || !key || !value) return fail(SPECKV_EINVAL, "cfg, key and value must not be NULL");
        return cfg->rep.get_int(key, value);
    });
}

SPECKV_API int speckv_config_bounds(const char *key, int64_t *min, int64_t *max, int64_t *dflt) {
    return guard([&] {
        if (!key) return fail(SPECKV_EINVAL, "key is NULL");
        const KeySpec *k = find_key(key);
        if (!k) return fail(SPECKV_ENOENT, "unknown config key '%s'", key);
        if (min) *min = k->min;
        if (max) *max = k->max;
        if (dflt) *dflt = k->dflt;
        return SPECKV_OK;
    });
}

SPECKV_API int speckv_config_load_toml(speckv_config *cfg, const char *path) {
    return guard([&] {
        if (!cfg || !path) return fail(SPECKV_EINVAL, "cfg and path must not be NULL");
        return cfg->rep.load_toml_file(path);
    });
}

SPECKV_API int speckv_config_load_toml_string(speckv_config *cfg, const char *text, size_t len) {
    return guard([&] {
        if (!cfg || (!text && len)) return fail(SPECKV_EINVAL, "cfg and text must not be NULL");
        return cfg->rep.load_toml_text(std::string_view(text ? text : "", len), "<string>");
    });
}

SPECKV_API int speckv_config_set_log(speckv_config *cfg, speckv_log_fn fn, void *user) {
    return guard([&] {
        if (!cfg) return fail(SPECKV_EINVAL, "cfg is NULL");
        cfg->rep.log_fn = fn;
        cfg->rep.log_user = user;
        return SPECKV_OK;
    });
}

SPECKV_API int speckv_pool_open(const char *uri, const speckv_config *cfg, speckv_pool **out) {
    return guard([&] {
        if (!uri || !out) return fail(SPECKV_EINVAL, "uri and out must not be NULL");
        Config defaults;
        std::unique_ptr<Pool> p;
        const Config &c = cfg ? cfg->rep : defaults;
        int rc = Pool::open(uri, c, &p);
        if (rc != SPECKV_OK) return rc;
        std::unique_ptr<remote::Tier> l5;
        if (!c.get_str("remote.uri").empty() && (rc = remote::Tier::create(c, &l5)) != SPECKV_OK) {
            std::string msg = last_error();
            p->close();
            return fail(rc, "%s", msg.c_str());
        }
        if (l5)
            if (ColdTier *l4 = p->l4_tier())
                if (auto spill = l5->spill_for_l4(l4->spill_listed())) l4->set_spill(std::move(spill), l5->demotes());
        *out = new speckv_pool{std::move(p), std::move(l5)};
        return SPECKV_OK;
    });
}

SPECKV_API int speckv_pool_close(speckv_pool *pool) {
    return guard([&] {
        if (!pool) return SPECKV_OK;
        pool->remote.reset();  // sends what L5 has queued first
        int rc = pool->rep ? pool->rep->close() : SPECKV_OK;
        delete pool;
        return rc;
    });
}

SPECKV_API int speckv_alloc(speckv_pool *pool, uint64_t bytes, int dtype, const speckv_hint *hint,
                            speckv_handle *out) {
    return guard([&] {
        NEED_POOL();
        if (!out) return fail(SPECKV_EINVAL, "out is NULL");
        return pool->rep->alloc(bytes, dtype, hint, out);
    });
}

SPECKV_API int speckv_block_info(speckv_pool *pool, speckv_handle handle, speckv_block_meta *out) {
    return guard([&] {
        NEED_POOL();
        if (!out) return fail(SPECKV_EINVAL, "out is NULL");
        if (out->struct_size != sizeof(speckv_block_meta))
            return fail(SPECKV_ESTRUCT, "speckv_block_meta.struct_size is %zu, this library knows %zu", out->struct_size,
                        sizeof(speckv_block_meta));
        return pool->rep->block_info(handle, out);
    });
}

SPECKV_API int speckv_free(speckv_pool *pool, speckv_handle handle) {
    return guard([&] {
        NEED_POOL();
        return pool->rep->free(handle);
    });
}

SPECKV_API int speckv_write(speckv_pool *pool, speckv_handle handle, uint64_t offset, const void *src, size_t len) {
    return guard([&] {
        NEED_POOL();
        return pool->rep->write(handle, offset, src, len);
    });
}

SPECKV_API int speckv_access(speckv_pool *pool, speckv_handle handle, uint64_t offset, void *dst, size_t len,
                             uint32_t flags) {
    return guard([&] {
        NEED_POOL();
        if (flags != SPECKV_ACCESS_DEFAULT) return fail(SPECKV_EINVAL, "unknown access flags 0x%x", flags);
        return pool->rep->read(handle, offset, dst, len);
    });
}

SPECKV_API int speckv_pin(speckv_pool *pool, speckv_handle handle, const void **ptr, size_t *len) {
    return guard([&] {
        NEED_POOL();
        return pool->rep->pin(handle, ptr, len);
    });
}

SPECKV_API int speckv_unpin(speckv_pool *pool, speckv_handle handle) {
    return guard([&] {
        NEED_POOL();
        return pool->rep->unpin(handle);
    });
}

SPECKV_API int speckv_demote(speckv_pool *pool, speckv_handle handle) {
    return guard([&] {
        NEED_POOL();
        return pool->rep->demote(handle);
    });
}

SPECKV_API int speckv_prefetch(speckv_pool *pool, const speckv_hint *hint) {
    return guard([&] {
        NEED_POOL();
        return pool->rep->prefetch(hint);
    });
}

SPECKV_API int speckv_block_hash(int algo, uint64_t tenant, const uint8_t *parent, const uint32_t *tokens,
                                 size_t ntokens, const void *extra, size_t extra_len, uint8_t out[SPECKV_HASH_BYTES]) {
    return guard([&] {
        if (!out) return fail(SPECKV_EINVAL, "out is NULL");
        if (!tokens && ntokens) return fail(SPECKV_EINVAL, "tokens is NULL but ntokens is %zu", ntokens);
        if (!extra && extra_len) return fail(SPECKV_EINVAL, "extra is NULL but extra_len is %zu", extra_len);
        return block_hash(algo, tenant, parent, tokens, ntokens, static_cast<const uint8_t *>(extra), extra_len, out);
    });
}

SPECKV_API int speckv_publish(speckv_pool *pool, speckv_handle handle, const uint8_t hash[SPECKV_HASH_BYTES],
                              speckv_handle *canonical) {
    return guard([&] {
        NEED_POOL();
        int rc = pool->rep->publish(handle, hash, canonical);
        if (rc == SPECKV_OK && pool->remote) pool->remote->on_publish(*pool->rep, handle);
        return rc;
    });
}

SPECKV_API int speckv_lookup(speckv_pool *pool, uint64_t tenant, const uint8_t hash[SPECKV_HASH_BYTES],
                             speckv_handle *out) {
    return guard([&] {
        NEED_POOL();
        int rc = pool->rep->lookup(tenant, hash, out);
        if (rc == SPECKV_ENOENT && pool->remote) rc = pool->remote->on_lookup_miss(*pool->rep, tenant, hash, out);
        return rc;
    });
}

SPECKV_API int speckv_tenant_set_quota(speckv_pool *pool, uint64_t tenant, uint64_t max_pages) {
    return guard([&] {
        NEED_POOL();
        return pool->rep->tenant_set_quota(tenant, max_pages);
    });
}

SPECKV_API int speckv_tenant_usage(speckv_pool *pool, uint64_t tenant, uint64_t *pages_used, uint64_t *max_pages) {
    return guard([&] {
        NEED_POOL();
        return pool->rep->tenant_usage(tenant, pages_used, max_pages);
    });
}

SPECKV_API int speckv_translate(speckv_pool *pool, uint64_t tenant, uint64_t request, uint32_t layer,
                                uint64_t token_pos, speckv_handle *out, uint64_t *token_offset) {
    return guard([&] {
        NEED_POOL();
        return pool->rep->translate(tenant, request, layer, token_pos, out, token_offset);
    });
}

namespace {
// speckv_select_params as the caller's header laid it out: this one, or the
// one before budget_tokens (which then reads as 0). Anything else is refused.
int select_params_of(const speckv_select_params *in, speckv_select_params *out) {
    constexpr size_t kBeforeTokens = offsetof(speckv_select_params, budget_tokens);
    const size_t n = in->struct_size;
    if (n != sizeof(speckv_select_params) && n != kBeforeTokens)
        return fail(SPECKV_ESTRUCT, "speckv_select_params.struct_size is %zu, this library knows %zu and %zu", n,
                    sizeof(speckv_select_params), kBeforeTokens);
    std::memset(out, 0, sizeof *out);
    std::memcpy(out, in, n);
    out->struct_size = sizeof *out;
    return SPECKV_OK;
}
}  // namespace

SPECKV_API int speckv_select(speckv_pool *pool, uint64_t tenant, uint64_t request, uint32_t layer, const float *q,
                             size_t q_len, const speckv_select_params *params, speckv_page_ref *out, size_t cap,
                             size_t *n_out, size_t *n_pages) {
    return guard([&] {
        NEED_POOL();
        if (!q || !params || !n_out || (!out && cap)) return fail(SPECKV_EINVAL, "q, params, n_out (and out) must not be NULL");
        speckv_select_params p;
        if (int rc = select_params_of(params, &p); rc != SPECKV_OK) return rc;
        return pool->rep->select(tenant, request, layer, q, q_len, p, out, cap, n_out, n_pages);
    });
}

namespace {
int check_partial(const speckv_partial *p, const char *what) {
    if (!p) return speckv::fail(SPECKV_EINVAL, "%s is NULL", what);
    if (p->struct_size != sizeof(speckv_partial))
        return speckv::fail(SPECKV_ESTRUCT, "%s: speckv_partial.struct_size is %zu, this library knows %zu", what,
                            p->struct_size, sizeof(speckv_partial));
    if (!p->out || !p->max_score || !p->sum_exp) return speckv::fail(SPECKV_EINVAL, "%s has a NULL array", what);
    return SPECKV_OK;
}
}  // namespace

SPECKV_API int speckv_attend(speckv_pool *pool, uint64_t tenant, uint64_t request, uint32_t layer, const float *q,
                             size_t q_len, const speckv_select_params *params, const speckv_page_ref *exclude,
                             size_t n_exclude, speckv_partial *out) {
    return guard([&] {
        NEED_POOL();
        if (!q || !params || (!exclude && n_exclude)) return fail(SPECKV_EINVAL, "q, params (and exclude) must not be NULL");
        if (int rc = check_partial(out, "out"); rc != SPECKV_OK) return rc;
        speckv_select_params p;
        if (int rc = select_params_of(params, &p); rc != SPECKV_OK) return rc;
        return pool->rep->attend(tenant, request, layer, q, q_len, p, exclude, n_exclude, *out);
    });
}

SPECKV_API int speckv_merge_partials(uint32_t q_heads, uint32_t head_dim, const speckv_partial *a,
                                     const speckv_partial *b, speckv_partial *out) {
    return guard([&] {
        if (!q_heads || !head_dim) return fail(SPECKV_EINVAL, "q_heads and head_dim must be > 0");
        for (auto [p, what] : {std::pair{a, "a"}, std::pair{b, "b"}, std::pair{static_cast<const speckv_partial *>(out), "out"}})
            if (int rc = check_partial(p, what); rc != SPECKV_OK) return rc;
        speckv::nmp::merge_partials(q_heads, head_dim, {a->out, a->max_score, a->sum_exp},
                                    {b->out, b->max_score, b->sum_exp}, {out->out, out->max_score, out->sum_exp});
        return SPECKV_OK;
    });
}

// speckv_pool_stats is frozen at its 0.1.0 layout (new counters: speckv_stat).
static_assert(sizeof(speckv_pool_stats) == 368, "speckv_pool_stats does not grow: add a counter to the stats JSON");

SPECKV_API int speckv_stats(speckv_pool *pool, speckv_pool_stats *out) {
    return guard([&] {
        NEED_POOL();
        if (!out) return fail(SPECKV_EINVAL, "out is NULL");
        // Known layouts: this one, and the one before the codec fields
        // (callers built against that header get exactly what they know).
        constexpr size_t kBeforeCodec = offsetof(speckv_pool_stats, codec_pages_encoded);
        constexpr size_t kBeforeL4 = offsetof(speckv_pool_stats, l4_blocks);
        size_t n = out->struct_size;
        if (n != sizeof(speckv_pool_stats) && n != kBeforeCodec && n != kBeforeL4)
            return fail(SPECKV_ESTRUCT, "speckv_pool_stats.struct_size is %zu, this library knows %zu, %zu and %zu", n,
                        sizeof(speckv_pool_stats), kBeforeL4, kBeforeCodec);
        speckv_pool_stats all;
        pool->rep->stats(&all);
        all.struct_size = n;
        std::memcpy(out, &all, n);
        return SPECKV_OK;
    });
}

SPECKV_API int speckv_stats_json(speckv_pool *pool, char *buf, size_t cap, size_t *needed) {
    return guard([&] {
        NEED_POOL();
        if (!buf && cap) return fail(SPECKV_EINVAL, "buf is NULL");
        std::string j = stats_json_of(pool);
        if (needed) *needed = j.size();
        if (cap < j.size() + 1) {
            if (cap) buf[0] = '\0';
            return fail(SPECKV_ERANGE, "stats JSON needs %zu bytes, buffer has %zu", j.size() + 1, cap);
        }
        std::memcpy(buf, j.c_str(), j.size() + 1);
        return SPECKV_OK;
    });
}

SPECKV_API int speckv_stat(speckv_pool *pool, const char *name, uint64_t *value) {
    return guard([&] {
        NEED_POOL();
        if (!name || !value) return fail(SPECKV_EINVAL, "name or value is NULL");
        // The JSON object is the one list of counters: a counter added to it
        // is readable here without an ABI change.
        const nlohmann::json j = nlohmann::json::parse(stats_json_of(pool), nullptr, false);
        if (j.is_discarded() || !j.is_object()) return fail(SPECKV_EINTERNAL, "stats JSON does not parse");
        auto it = j.find(name);
        if (it == j.end()) return fail(SPECKV_ENOENT, "no counter named \"%s\" (see speckv_stats_json)", name);
        if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
            return fail(SPECKV_EINVAL, "\"%s\" is not a counter (not a non-negative integer)", name);
        *value = it->get<uint64_t>();
        return SPECKV_OK;
    });
}

}  // extern "C"
