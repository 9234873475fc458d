// SPDX-License-Identifier: Apache-2.0
#include "config/config.h"

#include <cstdio>
#include <cstring>

#include "codec/codec.h"
#include "util/status.h"
#include "config/uri.h"

namespace speckv {

// In the order of codec::Mode ids (a test checks it against codec::mode_name),
// then `adaptive` (= codec::kModeCount): a preset per layer and K/V, chosen by
// the pool from the first page it stores of each (docs/codec.md §17.1).
const char *const kCodecChoices = "raw|paper|int8|k8|v8|k6|v6|k5|v5|p8r|k4|v4|k9|k10|k12|vp8|vp6|vp5|"
                                   "k8s|v8s|k6s|v6s|k5s|v5s|p8rs|k4s|v4s|k9s|k10s|k12s|vp8s|vp6s|vp5s|"
                                   "k3p|v3p|k4p|v4p|k5p|v5p|adaptive";

const std::vector<KeySpec> &config_keys() {
    static const std::vector<KeySpec> keys = {
        {"pool.size", 4 << 20, int64_t(1) << 46, 256 << 20,
         "size of a pool created by open (URI `size=` wins); a multiple of `pool.page_size`"},
        {"pool.page_size", 4096, 2 << 20, 4096, "data page size of a new pool", nullptr, false, nullptr,
         "4 KiB … 2 MiB, a power of two"},
        {"pool.max_blocks", 0, (int64_t(1) << 24) - 1, 0, "block slots of a new pool", nullptr, false,
         "0 (= pages / 4, ≥ 64)"},
        {"pool.create", 0, 1, 1, "create a missing file pool on open"},
        {"pool.summary_bytes", 0, 2 << 20, 0,
         "page-summary slot per data page of a new pool, for `speckv_select` (≥ 16 + 4 × `select.channels`; "
         "`docs/selection.md` §7)",
         nullptr, false, nullptr, "0 … 2 MiB (0 or a multiple of 16, ≥ 32, ≤ page size)"},
        {"pool.mode", 0600, 0666, 0600,
         "permission bits of the pool and L4 files speckv creates, set exactly (the umask does not narrow them; "
         "URI `mode=` wins); octal in TOML (`0o640`) or as a string (`\"0640\"`) (`docs/sharing.md` \"Threat model\")",
         nullptr, false, nullptr, "0600 … 0666, owner read+write kept"},
        {"pool.owner", 0, int64_t(UINT32_MAX) - 1, 0,
         "uid whose pool and L4 files are accepted besides your own and root's (URI `owner=` wins; `docs/sharing.md`)",
         nullptr, false, "unset"},
        {"pool.group", 0, int64_t(UINT32_MAX) - 1, 0,
         "gid whose pool and L4 files are accepted besides your own and root's (URI `group=` wins; `docs/sharing.md`)",
         nullptr, false, "unset"},
        {"alloc.unit_slack", 0, 1024, 8,
         "layer-aware placement: a (request, layer)'s blocks go right after its last one when free, and a block that "
         "cannot gets room for this many more after it (`docs/tiers.md` §10; 0 = off)"},
        {"cache.bytes", 0, int64_t(1) << 36, 64 << 20, "per-process cache of verified pages (0: checksum every read)"},
        {"cache.associative", 0, 1, 1,
         "L1 frames fully associative (the tier manager's `HotBuffer`: any page in any frame, scan-resistant eviction, `docs/tiers.md` §2); 0: "
         "direct-mapped frames (no hash probe; conflict misses) (`docs/tiers.md` §8)"},
        {"pool.prefault", 0, int64_t(1) << 46, 0,
         "a `file:` pool up to this size gets its page tables populated at attach (`MADV_POPULATE_WRITE`: no page "
         "fault per page on the first pass, but the attach pays for every page of the pool, touched or not: "
         "`bench/README.md` \"Data path\"); 0 = never"},
        {"cache.admit", 0, 2, 2,
         "which pages enter the per-process cache: 0 every page written or read, 1 pages read, 2 a page on its "
         "second touch in this process (a write or a read miss, then another) — data written once, or read once, is "
         "not copied into it (`lib/tiers/page_cache.h`)"},
        {"lock.timeout_ms", 1, 600000, 5000, "longest wait for the pool lock before `SPECKV_EBUSY`"},
        {"log.level", 0, 3, 1, "0 error, 1 warn, 2 info, 3 debug (to the `speckv_config_set_log` callback)"},
        {"prefetch.enable", 0, 1, 1, "run the prefetch thread behind `speckv_prefetch` (0: hints are only counted)"},
        {"prefetch.l2_bytes", 0, int64_t(1) << 36, 16 << 20,
         "per-process prefetch buffer (L2) of verified pages, at least two pages; 0 disables prefetching"},
        {"prefetch.policy", 0, 1, 0,
         "0 learned (predictor, UCB depth, β); 1 hinted: fetch exactly the unit each hint names (a perfect next-unit "
         "predictor when hints are the true next unit; the Belady oracle is `docs/tiers.md` §11)"},
        {"prefetch.sync", 0, 1, 0,
         "1: each hint is carried out inside `speckv_prefetch`, on the caller's thread (no prefetch thread, no β "
         "feedback: the caller keeps the time; trace replay in virtual time, deterministic tests)"},
        {"prefetch.queue", 16, 65536, 4096, "hints queued for the prefetch thread; beyond, hints are dropped and counted"},
        {"prefetch.k_min", 1, 64, 1, "smallest prefetch depth, in units (a request's layer) ahead"},
        {"prefetch.k_max", 1, 64, 8, "largest prefetch depth; `prefetch.k_min ≤ prefetch.k_max` is checked at open"},
        {"prefetch.ucb_c_milli", 0, 10000, 300, "UCB exploration constant c, in thousandths"},
        {"prefetch.kappa_milli", 1, 1000, 500, "β decrease gain κ, in thousandths"},
        {"prefetch.theta_milli", 50, 1000, 800, "target L3→L2 link utilisation θ, in thousandths"},
        {"prefetch.beta_min_milli", 0, 1000, 50, "lowest aggressiveness β, in thousandths"},
        {"prefetch.bandwidth", 1000000, int64_t(10000000000000), int64_t(8000000000),
         "configured L3→L2 bytes/s that link utilisation is measured against; set, it overrides the placement", nullptr,
         false, "from the placement (8e9 in local DRAM)"},
        {"placement.latency_ns", 10, 1000000, 100,
         "latency of the pool's memory in ns; its class and L3→L2 bandwidth follow (`docs/devices.md`, "
         "\"Placement hints\")",
         nullptr, false, "from the backend"},
        {"placement.bandwidth", 1000000, int64_t(10000000000000), int64_t(8000000000),
         "L3→L2 bytes/s of the pool's memory; `prefetch.bandwidth`, if set, wins", nullptr, false,
         "from the latency class"},
        {"prefetch.tick_us", 10, 10000000, 1000, "period of the β feedback step, microseconds"},
        {"tlb.entries", 64, 1 << 20, 4096, "per-process translation cache entries", nullptr, false, nullptr,
         "64 … 2^20, a power of two"},
        {"share.flush", 0, 1, 0,
         "explicit cache-line write-back at publish and invalidation at lookup, for hosts sharing a pool without "
         "hardware coherence (`docs/sharing.md`)"},
        {"codec.mode", 0, codec::kModeCount, 0,
         "how pages of FP16/BF16/FP32 blocks are stored: a write that completes a page stores it as a codec record "
         "(lossy unless `raw`; `docs/codec.md` §17); `adaptive` picks a preset per layer and K/V",
         kCodecChoices},
        {"codec.key_mode", 0, codec::kModeCount, 0, "the preset for blocks hinted `SPECKV_HINT_KEYS`", kCodecChoices,
         false, "`codec.mode`", "as `codec.mode`"},
        {"codec.value_mode", 0, codec::kModeCount, 0, "the preset for blocks hinted `SPECKV_HINT_VALUES`",
         kCodecChoices, false, "`codec.mode`", "as `codec.mode`"},
        {"codec.max_err_milli", 0, 1000, 50,
         "with `adaptive`: largest relative RMS error of a V (or unhinted) page's preset, in thousandths "
         "(`docs/codec.md` §17.1)"},
        {"codec.max_err_k_milli", 0, 1000, 20,
         "with `adaptive`: largest relative RMS error of a K page's preset, in thousandths (attention is ~10x more "
         "sensitive to K)",
         nullptr, false, "20 (5 with `codec.adaptive_set` = dense when this key is unset)"},
        {"codec.adaptive_set", 0, 1, 0,
         "with `adaptive`: the presets it chooses among: `fast` = `int8` and the packed `k3p`…`v5p` (no "
         "variable-length stage), `dense` = `paper` and the split Rice presets (more ratio at the same error, decoded "
         "at ≤ 0.1x memcpy) (`docs/codec.md` §10)",
         "fast|dense"},
        {"codec.recalibrate", 0, 1 << 30, 256,
         "with `adaptive`: re-choose a (layer, K/V)'s preset on every this-many-th whole page it encodes (0 = keep the "
         "first choice)"},
        {"codec.pack", 0, 1, 1,
         "the write that completes a block of coded pages packs their records into fewer pool pages, so the pool holds "
         "more (format 6 pools; a later write or pin unpacks; `docs/pool-format.md` \"Packed blocks\")"},
        {"codec.channels", 1, 65535, 1, "values per token in a page (head_dim or kv_dim): what channel and token scales group by"},
        {"select.channels", 0, 65535, 0,
         "K row width (kv_heads × head_dim): pages of blocks hinted `SPECKV_HINT_KEYS` get summaries when written "
         "(0: none)"},
        {"select.recent", 0, 65535, 1, "most recent pages `speckv_select` always returns (`params->recent = UINT32_MAX`)"},
        {"select.band_milli", 0, 1000000, 0,
         "steady-selection hysteresis of `speckv_select`, thousandths of a logit (`params->band < 0` takes it)"},
        {"cold.path", 0, 0, 0,
         "the L4 cold-tier file (NVMe): this process holds the pool's L4 tier, demotes the coldest blocks to it when an "
         "allocation finds no room and on `speckv_demote`, and brings them back on use (`docs/tiers.md` §9); one "
         "process per pool (unset: no L4)",
         nullptr, true},
        {"heat.w_recency_milli", 0, 1000, 400, "L4 holder: weight of recency in a block's heat, thousandths (`docs/tiers.md` §4)"},
        {"heat.w_frequency_milli", 0, 1000, 300, "L4 holder: weight of (decayed) access frequency in heat, thousandths"},
        {"heat.w_position_milli", 0, 1000, 200,
         "L4 holder: weight of position in heat (attention-sink and recent-window blocks count fully), thousandths"},
        {"heat.w_sharing_milli", 0, 1000, 100, "L4 holder: weight of sharing (processes referencing it) in heat, thousandths"},
        {"heat.t_hot_milli", 0, 1000, 600,
         "L4 holder: initial promotion threshold T_h, thousandths (it adapts to pressure and miss rate)", nullptr, false,
         nullptr, "0 … 1000, ≥ `heat.t_cold_milli` + 100"},
        {"heat.t_cold_milli", 0, 1000, 250, "L4 holder: initial demotion threshold T_c, thousandths"},
        {"heat.pressure_target_milli", 50, 1000, 850,
         "L4 holder: pool pressure above which blocks below T_c go to L4 ahead of need; 100 below it, blocks in L4 "
         "above T_h come back"},
        {"cold.capacity", int64_t(1) << 20, int64_t(1) << 50, int64_t(1) << 30, "most bytes the L4 file may grow to"},
        {"cold.direct", 0, 1, 1, "open the L4 file with O_DIRECT where the file system takes it"},
        {"cold.durable", 0, 1, 0,
         "fdatasync the L4 file before a demotion commits (else a process crash is survived, a power loss is not)"},
        {"cold.batch", 1, 4096, 16, "most blocks one demotion pass writes in one batch (at least those an allocation needs)"},
        {"cold.wait_ms", 0, 600000, 5000,
         "a process without `cold.path` that needs a block in L4 asks the holder and waits this long (0 = fail at "
         "once; `docs/tiers.md` §9.1)"},
        {"remote.uri", 0, 0, 0,
         "the L5 remote tier: a Redis Cluster as `redis://host:port[,host:port...]` (any reachable node serves as a "
         "seed); published blocks go to it and a lookup that misses in the pool looks there (`docs/remote.md`; unset: "
         "no L5)",
         nullptr, true},
        {"remote.timeout_ms", 1, 600000, 1000,
         "L5: connect and socket timeout, and the time one batch may spend on redirects and retries"},
        {"remote.ttl_s", 0, int64_t(1) << 31, 0, "L5: expiry of the blocks written (0 = none: Redis `maxmemory` and "
         "its eviction policy bound the cluster; `docs/remote.md`)"},
        {"remote.write", 0, 2, 0,
         "L5: `through` publish waits until its block is in the cluster (batched with concurrent publishes), `back` "
         "queues it for a writer thread (dropped, and counted, past 64 MiB queued), `off` only reads",
         "through|back|off"},
        {"remote.demote", 0, 1, 1,
         "L5 behind L4: when the L4 file (`cold.path`) has no room, its oldest blocks move to the cluster, and a block "
         "that does not fit goes there itself; they come back to the same handle on use, also after the L4 holder "
         "closes or dies (listed in `<cold.path>.l5`; `docs/remote.md`)"},
        {"tenant.id", -1, INT64_MAX, -1,
         "bind the pool handle to one tenant: other tenants' blocks are invisible to it (`docs/sharing.md`)", nullptr,
         false, "−1 (unbound)"},
        {"events.endpoint", 0, 0, 0,
         "ZeroMQ endpoint of this pool handle's KV events for routers: vLLM's `KVEventBatch` on a PUB socket, bound "
         "if it holds `*` or is `ipc://`/`inproc://`, else connected (`docs/events.md`; unset: no events)",
         nullptr, true},
        {"events.replay_endpoint", 0, 0, 0,
         "ZeroMQ ROUTER endpoint (bound) where a subscriber that missed batches asks for them again, as vLLM's "
         "`replay_endpoint` (unset: no replay)",
         nullptr, true},
        {"events.topic", 0, 0, 0, "topic frame of every event message (vLLM's `topic`; unset: empty)", nullptr, true},
        {"events.buffer_steps", 0, 10000000, 10000, "event batches kept for replay (vLLM's `buffer_steps`)"},
        {"events.queue", 1, 100000000, 100000,
         "events waiting for the publisher thread; beyond, an event is dropped and counted (`events_dropped`)"},
        {"events.hwm", 0, 100000000, 100000, "ZeroMQ send high-water mark of the PUB socket (vLLM's `hwm`)"},
        {"events.batch_us", 0, 1000000, 1000,
         "the publisher thread, woken by an event, waits this long for more before sending them as one batch (the "
         "pool's paths then wake it at most once per batch)"},
        {"events.encoding", 0, 1, 0,
         "`map`: events as tagged maps (vLLM since the map encoding, pinned v0.26.0); `array`: positional arrays for "
         "subscribers of older vLLM versions (`docs/events.md`)",
         "map|array"},
    };
    return keys;
}

const KeySpec *find_key(std::string_view name) {
    for (const auto &k : config_keys())
        if (name == k.name) return &k;
    return nullptr;
}

Config::Config() {
    for (const auto &k : config_keys()) values_[k.name] = k.dflt;
}

int Config::set_int(std::string_view key, int64_t v) {
    const KeySpec *k = find_key(key);
    if (!k) return fail(SPECKV_ENOENT, "unknown config key '%.*s'", static_cast<int>(key.size()), key.data());
    if (k->text) return fail(SPECKV_EINVAL, "config %s is a text key: set it with a string", k->name);
    if (v < k->min || v > k->max)
        return fail(SPECKV_EINVAL, "config %s = %lld is out of bounds [%lld, %lld]", k->name,
                    static_cast<long long>(v), static_cast<long long>(k->min), static_cast<long long>(k->max));
    if (std::strcmp(k->name, "pool.page_size") == 0 && (v & (v - 1)) != 0)
        return fail(SPECKV_EINVAL, "config pool.page_size = %lld is not a power of two", static_cast<long long>(v));
    if (std::strcmp(k->name, "pool.mode") == 0 && ((v & 0600) != 0600 || (v & ~int64_t(0666))))
        return fail(SPECKV_EINVAL, "config pool.mode = 0%llo must keep the owner's read and write bits and nothing beyond 0666",
                    static_cast<unsigned long long>(v));
    values_[k->name] = v;
    explicit_[k->name] = true;
    return SPECKV_OK;
}

int Config::set_str(std::string_view key, std::string_view v) {
    const KeySpec *k = find_key(key);
    if (!k) return fail(SPECKV_ENOENT, "unknown config key '%.*s'", static_cast<int>(key.size()), key.data());
    if (k->text) {
        if (v.size() > 4095 || v.find('\0') != std::string_view::npos)
            return fail(SPECKV_EINVAL, "config %s: a path of %zu bytes (at most 4095, no NUL)", k->name, v.size());
        strings_[k->name] = std::string(v);
        explicit_[k->name] = true;
        return SPECKV_OK;
    }
    if (k->choices) {
        std::string_view c = k->choices;
        int64_t idx = 0;
        while (true) {
            size_t bar = c.find('|');
            if (c.substr(0, bar) == v) return set_int(key, idx);
            if (bar == std::string_view::npos) break;
            c = c.substr(bar + 1);
            idx++;
        }
        return fail(SPECKV_EINVAL, "config %s = '%.*s' is not one of %s", k->name, static_cast<int>(v.size()),
                    v.data(), k->choices);
    }
    int64_t n;
    if (std::strcmp(k->name, "pool.mode") == 0) {  // a file mode is octal text
        if (!parse_file_mode(v.substr(v.size() > 1 && v[0] == '0' && (v[1] == 'o' || v[1] == 'O') ? 2 : 0), &n))
            return fail(SPECKV_EINVAL,
                        "config pool.mode = '%.*s' is not an octal file mode in [0600, 0666] keeping 0600 (e.g. \"0640\")",
                        static_cast<int>(v.size()), v.data());
        return set_int(key, n);
    }
    if (!parse_size(v, &n))
        return fail(SPECKV_EINVAL, "config %s = '%.*s' is not a number or size", k->name, static_cast<int>(v.size()),
                    v.data());
    return set_int(key, n);
}

int Config::get_int(std::string_view key, int64_t *v) const {
    auto it = values_.find(std::string(key));
    if (it == values_.end())
        return fail(SPECKV_ENOENT, "unknown config key '%.*s'", static_cast<int>(key.size()), key.data());
    *v = it->second;
    return SPECKV_OK;
}

int64_t Config::get(std::string_view key) const { return values_.at(std::string(key)); }

std::string Config::get_str(std::string_view key) const {
    auto it = strings_.find(std::string(key));
    return it == strings_.end() ? std::string() : it->second;
}

}  // namespace speckv
