// SPDX-License-Identifier: Apache-2.0
// What Pool::open asks a backend for (pool/open_plan.h).
#include "pool/open_plan.h"

#include "pool/image.h"
#include "util/status.h"

namespace speckv {

int plan_open(Uri *uri_p, const Config &cfg, OpenPlan *out) {
    Uri &uri = *uri_p;
    int64_t size = uri.params.count("size") ? uri.params["size"] : cfg.get("pool.size");
    int64_t page_size = uri.params.count("page_size") ? uri.params["page_size"] : cfg.get("pool.page_size");
    int64_t max_blocks = uri.params.count("max_blocks") ? uri.params["max_blocks"] : cfg.get("pool.max_blocks");
    int64_t create = uri.params.count("create") ? uri.params["create"] : cfg.get("pool.create");
    const auto sumb = static_cast<uint32_t>(cfg.get("pool.summary_bytes"));
    if (page_size < 4096 || page_size > (2 << 20) || (page_size & (page_size - 1)))
        return fail(SPECKV_EINVAL, "page_size %lld is not a power of two in [4096, 2 MiB]", static_cast<long long>(page_size));
    if (size <= 0 || size % page_size)
        return fail(SPECKV_EINVAL, "pool size %lld is not a positive multiple of the page size %lld",
                    static_cast<long long>(size), static_cast<long long>(page_size));
    // The URI's size= is held to pool.size's bounds (a size past them would
    // only fail later, in fallocate, as ENOSPC).
    if (const KeySpec *ks = find_key("pool.size"); uri.params.count("size") && (size < ks->min || size > ks->max))
        return fail(SPECKV_EINVAL, "URI size=%lld is too %s: pool.size's bounds are [%lld, %lld] (4 MiB ... 64 TiB)",
                    static_cast<long long>(size), size < ks->min ? "small" : "large", static_cast<long long>(ks->min),
                    static_cast<long long>(ks->max));
    if (create < 0 || create > 1) return fail(SPECKV_EURI, "create must be 0 or 1");
    const FileAccess access = file_access(uri, &cfg);
    if (access.owner >= 0) uri.params["owner"] = access.owner;
    if (access.group >= 0) uri.params["group"] = access.group;
    uri.params["mode"] = access.mode;
    out->size = size;
    out->page_size = page_size;
    out->max_blocks = max_blocks;
    out->create = create;
    out->summary_bytes = sumb;
    out->access = access;
    return SPECKV_OK;
}

PoolMaker pool_maker(const OpenPlan *plan) {
    return PoolMaker{
        const_cast<OpenPlan *>(plan),
        [](void *c) {
            const auto &m = *static_cast<const OpenPlan *>(c);
            fmt::Superblock geometry;
            return plan_geometry(uint64_t(m.size), uint32_t(m.page_size), uint64_t(m.max_blocks), &geometry,
                                 m.summary_bytes);
        },
        [](void *c, unsigned char *b, size_t n) {
            const auto &m = *static_cast<const OpenPlan *>(c);
            return format_pool(b, n, static_cast<uint32_t>(m.page_size), static_cast<uint64_t>(m.max_blocks),
                               /*zeroed=*/true, m.summary_bytes);
        },
        [](void *c, const Mapping &map, bool create) {
            const auto &m = *static_cast<const OpenPlan *>(c);
            bool formatted;
            return format_if_blank(map, static_cast<uint32_t>(m.page_size), static_cast<uint64_t>(m.max_blocks), create,
                                   &formatted, m.summary_bytes);
        }};
}

int attach_uri(const std::string &uri_text, bool writable, const char *none_why, Mapping *out, std::string *target) {
    Uri uri;
    if (int rc = parse_uri(uri_text, &uri); rc != SPECKV_OK) return rc;
    const Backend &backend = backend_of(uri);
    if (!backend.attach)
        return fail(SPECKV_ENOTSUP, "%s: pools live in one process's private memory: %s", backend.scheme, none_why);
    if (target) *target = uri.target;
    return backend.attach(uri, writable, out);
}

}  // namespace speckv
