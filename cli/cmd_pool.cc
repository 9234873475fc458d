// SPDX-License-Identifier: Apache-2.0
// `speckv pool create|inspect|check|reset`.
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "commands.h"
#include "util/json.h"
#include "util/text.h"
#include "config/config.h"
#include "backend/devices.h"
#include "events/publisher.h"
#include "pool/pool.h"
#include "speckv.h"
#include "util/status.h"
#include "config/uri.h"

namespace speckv_cli {
namespace {


std::string uuid_text(const uint8_t u[16]) {
    char b[40];
    std::snprintf(b, sizeof b, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
                  u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    return b;
}

std::string time_text(uint64_t ns) {
    time_t t = static_cast<time_t>(ns / 1000000000ull);
    struct tm tm;
    gmtime_r(&t, &tm);
    char b[32];
    std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return b;
}

std::string human(uint64_t bytes) { return speckv::human_bytes(bytes); }

using speckv::Json;
using speckv::json_text;

// The file or device a URI names, for messages. anon: and unnamed numa:
// pools are private to their process and can't be operated on from outside;
// a named numa: pool is its tmpfs file.
bool target_of(const std::string &uri_text, std::string *target, speckv::Uri *parsed = nullptr) {
    speckv::Uri u;
    if (int rc = speckv::parse_uri(uri_text, &u); rc != SPECKV_OK) {
        error(describe(rc), rc);
        return false;
    }
    if (u.scheme == speckv::Scheme::Anon) {
        error("anon: pools can't be used with this command (an anon: pool lives inside one process)", SPECKV_ENOTSUP);
        return false;
    }
    if (u.scheme == speckv::Scheme::Numa && !u.named) {
        error("numa:" + std::to_string(u.node) +
              " without name= is private memory of the process that opens it: no other process, and not this "
              "command, can reach it. Name the pool to share it with other processes and the CLI: numa:" +
              std::to_string(u.node) + "?size=64M&name=NAME",
              SPECKV_ENOTSUP);
        return false;
    }
    *target = u.target;
    if (parsed) *parsed = std::move(u);
    return true;
}

std::string gbps(uint64_t bytes_per_s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f GB/s", double(bytes_per_s) / 1e9);
    return b;
}

// What `pool inspect` adds to PoolInfo: where the pool's memory sits.
struct Where {
    speckv::Placement placement;
    bool numa = false;  // a named numa: pool: its pages were counted
    int node = -1;
    speckv::NumaPlacement pages;
};

void add_where(const Where &w, Json *o) {
    (*o)["placement"] = speckv::placement_value(w.placement);
    if (w.numa)
        (*o)["numa_pages"] = {{"node", w.node},
                              {"total", w.pages.pages},
                              {"on_node", w.pages.on_node},
                              {"elsewhere", w.pages.elsewhere},
                              {"absent", w.pages.absent}};
}

void print_where(const Where &w) {
    const speckv::Placement &p = w.placement;
    std::printf("placement    %s: ~%" PRIu64 " ns, %s L3->L2 (%s)\n", p.cls.c_str(), p.latency_ns, gbps(p.bandwidth).c_str(),
                p.source.c_str());
    if (w.numa)
        std::printf("numa pages   %" PRIu64 " of %" PRIu64 " on node %d (%" PRIu64 " elsewhere, %" PRIu64 " absent)\n",
                    w.pages.on_node, w.pages.pages, w.node, w.pages.elsewhere, w.pages.absent);
}

void print_info_where(const speckv::PoolInfo &i, bool json, const Where *w, bool nl = true);

}  // namespace

void print_info(const speckv::PoolInfo &i, bool json, bool nl) { print_info_where(i, json, nullptr, nl); }

Json info_value(const speckv::PoolInfo &i) {
    Json o = {
        {"location", i.location},
        {"format_version", i.format_version},
        {"uuid", uuid_text(i.uuid)},
        {"created", time_text(i.created_ns)},
        {"pool_bytes", i.pool_bytes},
        {"page_size", i.page_size},
        {"data_offset", i.data_off},
        {"pages", {{"total", i.n_pages}, {"used", i.pages_used}, {"free", i.n_pages - i.pages_used}}},
        {"blocks", {{"live", i.blocks_live}, {"max", i.max_blocks}}},
        {"bytes_by_dtype",
         {{"opaque", i.bytes_by_dtype[0]}, {"fp16", i.bytes_by_dtype[1]}, {"bf16", i.bytes_by_dtype[2]}, {"fp32", i.bytes_by_dtype[3]}}},
        {"attached", i.attached},
        {"clean", i.clean},
        {"epoch", i.epoch},
        {"recoveries", i.recoveries},
        {"checksums", {{"quarantined_pages", i.pages_quarantined}, {"pages_mid_write", i.pages_in_write}}},
        {"codec",
         {{"coded_pages", i.pages_coded},
          {"raw_bytes", i.coded_raw_bytes},
          {"stored_bytes", i.coded_stored_bytes},
          {"packed_blocks", i.blocks_packed},
          {"packed_pages", i.packed_pages},
          {"pages_saved", i.packed_saved}}},
        {"sharing",
         {{"published_blocks", i.blocks_published},
          {"shared_bytes", i.shared_bytes},
          {"lookups", i.lookups},
          {"lookup_hits", i.lookup_hits},
          {"dedup_bytes", i.dedup_bytes},
          {"evictions", i.evictions},
          {"reclaimed_blocks", i.reclaimed}}},
        {"l4",
         {{"blocks", i.cold_blocks},
          {"bytes", i.cold_bytes},
          {"demotions", i.demotions},
          {"promotions", i.promotions},
          {"demote_failures", i.demote_failures},
          {"holder_pid", i.cold_pid ? Json(i.cold_pid) : Json(nullptr)}}},
    };
    Json procs = Json::array();
    for (const auto &a : i.attach)
        procs.push_back({{"pid", a.pid},
                         {"alive", a.alive},
                         {"attach_id", a.id},
                         {"attached", time_text(a.attach_ns)},
                         {"lookups", a.lookups},
                         {"lookup_hits", a.lookup_hits}});
    o["processes"] = std::move(procs);
    Json tenants = Json::array();
    for (const auto &t : i.tenants)
        tenants.push_back({{"tenant", t.tenant}, {"quota_pages", t.quota_pages}, {"used_pages", t.used_pages}});
    o["tenants"] = std::move(tenants);
    return o;
}

std::string damaged_text(uint64_t packed_damaged) {
    return std::to_string(packed_damaged) + " packed block" + (packed_damaged == 1 ? "" : "s") +
           " with a damaged image (head or directory)" +
           (g_opt.json ? std::string(": the pool's figures would be incomplete") : std::string(", left out of the figures above")) +
           ": run `speckv pool check`";
}

namespace {
void print_info_where(const speckv::PoolInfo &i, bool json, const Where *w, bool nl) {
    if (json) {
        Json o = info_value(i);
        if (w) add_where(*w, &o);
        std::printf("%s%s", json_text(o).c_str(), nl ? "\n" : "");
        return;
    }
    std::printf("pool         %s\n", i.location.c_str());
    std::printf("format       %u\n", i.format_version);
    std::printf("uuid         %s\n", uuid_text(i.uuid).c_str());
    std::printf("created      %s\n", time_text(i.created_ns).c_str());
    std::printf("size         %" PRIu64 " bytes (%s)\n", i.pool_bytes, human(i.pool_bytes).c_str());
    std::printf("page size    %" PRIu64 "\n", i.page_size);
    std::printf("data pages   %" PRIu64 " (%" PRIu64 " used, %" PRIu64 " free)\n", i.n_pages, i.pages_used,
                i.n_pages - i.pages_used);
    std::printf("blocks       %" PRIu64 " live of %" PRIu64 " slots\n", i.blocks_live, i.max_blocks);
    std::printf("bytes        opaque %" PRIu64 ", fp16 %" PRIu64 ", bf16 %" PRIu64 ", fp32 %" PRIu64 "\n",
                i.bytes_by_dtype[0], i.bytes_by_dtype[1], i.bytes_by_dtype[2], i.bytes_by_dtype[3]);
    std::printf("attached     %u process%s\n", i.attached, i.attached == 1 ? "" : "es");
    std::printf("state        %s (epoch %" PRIu64 ", %" PRIu64 " recoveries)\n",
                i.clean ? "clean" : (i.attached ? "in use" : "not closed cleanly: recovered on next open"), i.epoch,
                i.recoveries);
    std::printf("checksums    %" PRIu64 " quarantined pages, %" PRIu64 " pages mid-write\n", i.pages_quarantined,
                i.pages_in_write);
    std::printf("codec        %" PRIu64 " pages stored as records: %s in clear -> %s", i.pages_coded,
                human(i.coded_raw_bytes).c_str(), human(i.coded_stored_bytes).c_str());
    if (i.coded_stored_bytes) std::printf(" (%.2fx)", double(i.coded_raw_bytes) / double(i.coded_stored_bytes));
    std::printf("\n");
    // Packed blocks: sealed blocks whose records share fewer pages (docs/pool-format.md).
    std::printf("packed       %" PRIu64 " blocks in %" PRIu64 " pages, %" PRIu64 " pages given back\n", i.blocks_packed,
                i.packed_pages, i.packed_saved);
    // Sharing: what is published, and what sharing saved (bytes a lookup
    // hit or a publish collision did not store again).
    uint64_t stored = i.bytes_by_dtype[0] + i.bytes_by_dtype[1] + i.bytes_by_dtype[2] + i.bytes_by_dtype[3];
    std::printf("shared       %" PRIu64 " published blocks, %s\n", i.blocks_published, human(i.shared_bytes).c_str());
    std::printf("dedup        %" PRIu64 " lookups, %" PRIu64 " hits; saved %s", i.lookups, i.lookup_hits,
                human(i.dedup_bytes).c_str());
    if (i.dedup_bytes) std::printf(" (%.1f%% of %s without sharing)", 100.0 * double(i.dedup_bytes) / double(stored + i.dedup_bytes),
                                   human(stored + i.dedup_bytes).c_str());
    std::printf("\n");
    std::printf("evictions    %" PRIu64 " (reclaimed from dead processes: %" PRIu64 " blocks)\n", i.evictions, i.reclaimed);
    std::printf("l4           %" PRIu64 " blocks, %s in the cold tier; %" PRIu64 " demoted, %" PRIu64 " promoted, %" PRIu64
                " failed; ",
                i.cold_blocks, human(i.cold_bytes).c_str(), i.demotions, i.promotions, i.demote_failures);
    if (i.cold_pid) std::printf("held by pid %u\n", i.cold_pid);
    else std::printf("no holder\n");
    for (const auto &a : i.attach)
        std::printf("process      pid %u%s, attach id %" PRIu64 ", since %s, %" PRIu64 " lookups (%" PRIu64 " hits)\n", a.pid,
                    a.alive ? "" : " (gone: recovered on next open)", a.id, time_text(a.attach_ns).c_str(), a.lookups,
                    a.lookup_hits);
    for (const auto &t : i.tenants)
        std::printf("tenant       %" PRIu64 ": %" PRIu64 " pages used, quota %s\n", t.tenant, t.used_pages,
                    t.quota_pages ? std::to_string(t.quota_pages).c_str() : "none");
    if (w) print_where(*w);
}
}  // namespace

void register_pool_commands(CLI::App &app) {
    auto *pool = app.add_subcommand("pool", "Create, inspect, check and reset pools");
    pool->require_subcommand(1);

    const std::string uri_help =
        "file:/path or a plain path, file:NAME, dax:/dev/daxX.Y or numa:N?name=NAME";
    auto *create = pool->add_subcommand("create", "Create a pool (fails if it exists)");
    static std::string c_uri, c_size, c_page;
    static int64_t c_max_blocks = -1, c_summary = -1;
    static std::vector<std::string> c_set;
    create->add_option("URI", c_uri, uri_help + "; ?size= gives the size when --size is absent")->required();
    create->add_option("--size", c_size, "pool size, e.g. 256M, 8G (default: the URI's ?size=)");
    create->add_option("--page-size", c_page, "data page size (power of two, >= 4096; default 4096)");
    create->add_option("--max-blocks", c_max_blocks, "block slots (pool.max_blocks; default one per 4 data pages)");
    create->add_option("--summary-bytes", c_summary,
                       "page-summary slot per data page, for speckv_select (pool.summary_bytes; default 0 = none)");
    create->add_option("--set", c_set, "any configuration key the pool is created with, KEY=VALUE (repeatable)")
        ->type_name("KEY=VALUE");
    add_json(create);
    add_quiet(create);
    add_verbose(create);
    create->callback([] {
        c_uri = pool_uri(c_uri);
        std::string path;
        speckv::Uri u;
        if (!target_of(c_uri, &path, &u)) return void(g_exit = 1);
        if (c_size.empty() && !u.params.count("size")) {
            error("give the pool's size: --size SIZE, or ?size=SIZE in the URI");
            return void(g_exit = 2);
        }
        std::unique_ptr<speckv::Pool> existing;
        if (speckv::Pool::open_readonly_uri(c_uri, &existing) == SPECKV_OK ||
            ((u.scheme == speckv::Scheme::File || u.scheme == speckv::Scheme::Numa) && access(path.c_str(), F_OK) == 0)) {
            error("a pool already exists at " + path + " (use `speckv pool reset` to wipe it)", SPECKV_EEXIST);
            return void(g_exit = 1);
        }
        speckv::Config cfg;
        set_log(&cfg);
        int rc = SPECKV_OK;
        // --set first, so that the dedicated options win.
        for (const auto &kv : c_set) {
            size_t eq = kv.find('=');
            if (eq == std::string::npos || eq == 0) {
                error("--set " + kv + ": expected KEY=VALUE");
                return void(g_exit = 2);
            }
            if ((rc = cfg.set_str(kv.substr(0, eq), kv.substr(eq + 1))) != SPECKV_OK) {
                error("--set " + kv + ": " + describe(rc), rc);
                return void(g_exit = 1);
            }
        }
        if (!c_size.empty()) {
            int64_t want = 0;
            if (u.params.count("size") && speckv::parse_size(c_size, &want) && want != u.params["size"]) {
                error("--size " + c_size + " and the URI's ?size= differ: give one");
                return void(g_exit = 2);
            }
            rc = cfg.set_str("pool.size", c_size);
        }
        if (rc == SPECKV_OK && !c_page.empty()) rc = cfg.set_str("pool.page_size", c_page);
        if (rc == SPECKV_OK && c_max_blocks >= 0) rc = cfg.set_int("pool.max_blocks", c_max_blocks);
        if (rc == SPECKV_OK && c_summary >= 0) rc = cfg.set_int("pool.summary_bytes", c_summary);
        std::unique_ptr<speckv::Pool> p;
        if (rc == SPECKV_OK) rc = speckv::Pool::open(c_uri, cfg, &p);
        if (rc != SPECKV_OK) {
            error(describe(rc), rc);
            return void(g_exit = 1);
        }
        speckv::PoolInfo i;
        p->info(&i);
        if (g_opt.json)
            std::printf("%s\n", json_text({{"created", path},
                                           {"pool_bytes", i.pool_bytes},
                                           {"page_size", i.page_size},
                                           {"data_pages", i.n_pages},
                                           {"max_blocks", i.max_blocks}})
                                    .c_str());
        else if (!g_opt.quiet)
            std::printf("created %s: %" PRIu64 " bytes, %" PRIu64 " data pages of %" PRIu64 " bytes, %" PRIu64
                        " block slots\n",
                        path.c_str(), i.pool_bytes, i.n_pages, i.page_size, i.max_blocks);
        p->close();
    });

    auto *inspect = pool->add_subcommand("inspect", "Show a pool's geometry, usage and checksum state");
    static std::string i_uri;
    inspect->add_option("URI", i_uri, uri_help)->required();
    add_json(inspect);
    inspect->callback([] {
        i_uri = pool_uri(i_uri);
        std::string path;
        if (!target_of(i_uri, &path)) return void(g_exit = 1);
        std::unique_ptr<speckv::Pool> p;
        if (int rc = speckv::Pool::open_readonly_uri(i_uri, &p); rc != SPECKV_OK) {
            error(describe(rc), rc);
            return void(g_exit = 1);
        }
        speckv::PoolInfo i;
        p->info(&i);
        speckv::Uri u;
        speckv::parse_uri(i_uri, &u);
        Where w;
        w.placement = speckv::placement_for_uri(u);
        if (u.scheme == speckv::Scheme::Numa) {  // attached: every page is mapped here
            w.numa = true;
            w.node = u.node;
            if (speckv::numa_placement(p->image(), p->image_size(), u.node, &w.pages) != SPECKV_OK) w.numa = false;
        }
        if (i.packed_damaged && g_opt.json) {  // --json: one object, the error (figures incomplete)
            error(damaged_text(i.packed_damaged), SPECKV_ECORRUPT);
            return void(g_exit = 1);
        }
        print_info_where(i, g_opt.json, &w);
        if (i.packed_damaged) {
            error(damaged_text(i.packed_damaged), SPECKV_ECORRUPT);
            g_exit = 1;
        }
    });

    auto *check = pool->add_subcommand("check", "Verify every checksum and metadata invariant (exit 0 clean, 1 problems, "
                                                "2 could not run, 3 recovery pending: a process died holding the pool lock)");
    static std::string k_uri;
    check->add_option("URI", k_uri, uri_help)->required();
    add_json(check);
    add_quiet(check, "print only the problems found (the exit status tells)");
    add_verbose(check);
    add_no_progress(check);
    static bool k_repair = false;
    check->add_flag("--repair", k_repair,
                    "first fix what crashed processes left: reclaim their references and unpublished blocks, "
                    "re-seal torn pages, rebuild the hash index and counters (attaches to the pool)");
    check->callback([] {
        k_uri = pool_uri(k_uri);
        const bool k_json = g_opt.json;
        std::string path;
        if (!target_of(k_uri, &path)) return void(g_exit = 2);
        std::unique_ptr<speckv::Pool> p;
        speckv::CheckReport r;
        if (k_repair) {
            speckv::Config cfg;
            cfg.set_int("pool.create", 0);
            set_log(&cfg);
            Ticker tick("repairing " + path);
            int rc = speckv::Pool::open(k_uri, cfg, &p);
            if (rc == SPECKV_OK) rc = p->repair();
            if (rc != SPECKV_OK) {
                error("repair: " + describe(rc), rc);
                return void(g_exit = 2);
            }
            p->close();
            p.reset();
            if (!k_json && !g_opt.quiet) std::printf("repaired %s\n", path.c_str());
        }
        int rc = speckv::Pool::open_readonly_uri(k_uri, &p);
        if (rc == SPECKV_ECORRUPT) {
            r.problems.push_back(describe(rc));  // the superblock itself is bad
        } else if (rc != SPECKV_OK) {
            error(describe(rc), rc);
            return void(g_exit = 2);
        } else {
            Ticker tick("checking " + path);
            p->check(&r);
        }
        if (k_json) {
            Json o = {{"pool", path},
                      {"clean", r.problems.empty()},
                      {"recovery_pending", r.recovery_pending},
                      {"blocks_checked", r.blocks_checked},
                      {"pages_verified", r.pages_verified},
                      {"problems", r.problems}};
            std::printf("%s\n", json_text(o).c_str());
        } else {
            for (auto &s : r.problems) std::printf("problem: %s\n", s.c_str());
            if (!g_opt.quiet)
                std::printf("%s: %" PRIu64 " blocks, %" PRIu64 " pages verified, %zu problem%s\n", path.c_str(),
                        r.blocks_checked, r.pages_verified, r.problems.size(), r.problems.size() == 1 ? "" : "s");
        }
        // Temporary files of creators that died before publishing the pool.
        if (speckv::Uri u; speckv::parse_uri(k_uri, &u) == SPECKV_OK && !u.target.empty())
            for (const std::string &t : speckv::stale_temp_files(u.target, /*sweep=*/false))
                std::fprintf(stderr, "speckv: note: %s was left by a process that died creating the pool (the next "
                                     "create deletes it)\n", t.c_str());
        g_exit = r.problems.empty() ? 0 : r.recovery_pending ? 3 : 1;
    });

    auto *reset = pool->add_subcommand("reset", "Wipe every block of a pool, keeping its geometry (needs --force)");
    static std::string r_uri;
    static bool r_force = false;
    reset->add_option("URI", r_uri, uri_help)->required();
    add_json(reset);
    add_quiet(reset);
    add_no_progress(reset);
    reset->add_flag("--force", r_force, "really wipe it, even while processes are attached (their handles become invalid)");
    static std::string r_events, r_topic;
    static uint32_t r_wait_ms = 2000;
    reset->add_option("--events-endpoint", r_events,
                      "after the reset, send AllBlocksCleared there (ZeroMQ, vLLM's framing; bound as events.endpoint "
                      "is; docs/events.md)");
    reset->add_option("--events-topic", r_topic, "topic frame of that message (as events.topic)");
    reset->add_option("--events-wait-ms", r_wait_ms, "wait this long for a subscriber before sending")
        ->check(CLI::Range(1u, 600000u));
    reset->callback([] {
        r_uri = pool_uri(r_uri);
        std::string path;
        if (!target_of(r_uri, &path)) return void(g_exit = 1);
        std::unique_ptr<speckv::Pool> p;
        speckv::PoolInfo before{};
        bool readable = speckv::Pool::open_readonly_uri(r_uri, &p) == SPECKV_OK;
        if (readable) p->info(&before);
        p.reset();
        std::string live;
        for (const auto &a : before.attach)
            if (a.alive && a.pid != static_cast<uint32_t>(getpid())) live += (live.empty() ? "" : ", ") + std::to_string(a.pid);
        if (!r_force) {
            if (speckv::Uri u; speckv::parse_uri(r_uri, &u) == SPECKV_OK && !u.target.empty())
                for (const std::string &t : speckv::stale_temp_files(u.target, /*sweep=*/false))
                    std::fprintf(stderr, "speckv: note: %s was left by a process that died creating the pool (reset "
                                         "--force deletes it)\n", t.c_str());
            error("refusing to reset " + path + " without --force: it would delete " +
                  (readable ? std::to_string(before.blocks_live) + " blocks (" + human(before.bytes_by_dtype[0] +
                                  before.bytes_by_dtype[1] + before.bytes_by_dtype[2] + before.bytes_by_dtype[3]) + ")"
                            : std::string("every block")) +
                  " and keep only the geometry" +
                  (live.empty() ? "" : "; processes are attached (pid " + live + "): their handles would become invalid"),
              SPECKV_EBUSY);
            return void(g_exit = 1);
        }
        if (!live.empty()) std::fprintf(stderr, "speckv: warning: resetting while pid %s are attached\n", live.c_str());
        int rc;
        {
            Ticker tick("resetting " + path);
            rc = speckv::Pool::reset_uri(r_uri, true);
        }
        if (rc != SPECKV_OK) {
            error(describe(rc), rc);
            return void(g_exit = 1);
        }
        bool told = false;
        if (!r_events.empty()) {  // routers forget this pool's blocks (vLLM's AllBlocksCleared)
            speckv::events::Settings es;
            es.endpoint = r_events;
            es.topic = r_topic;
            es.wait_subscriber_ms = r_wait_ms;
            std::unique_ptr<speckv::events::Publisher> pub;
            if (int erc = speckv::events::Publisher::start(es, &pub); erc != SPECKV_OK) {
                error(describe(erc), erc);
                return void(g_exit = 1);
            }
            told = pub->subscriber_seen();
            if (!told)
                std::fprintf(stderr, "speckv: warning: no subscriber on %s within %u ms: AllBlocksCleared sent to nobody\n",
                             r_events.c_str(), r_wait_ms);
            pub->cleared();
            pub.reset();  // sends it (bounded wait)
        }
        if (g_opt.json) {
            Json j = {{"reset", path}, {"blocks_wiped", readable ? Json(before.blocks_live) : Json(nullptr)}};
            if (!r_events.empty()) j["events_cleared_sent"] = told;
            std::printf("%s\n", json_text(j).c_str());
        }
        else if (!g_opt.quiet)
            std::printf("reset %s: wiped %s blocks and all metadata; kept geometry and UUID\n", path.c_str(),
                    readable ? std::to_string(before.blocks_live).c_str() : "all");
        // Temporary files of creators that died before publishing the pool go too.
        if (speckv::Uri u; speckv::parse_uri(r_uri, &u) == SPECKV_OK && !u.target.empty())
            for (const std::string &t : speckv::stale_temp_files(u.target, /*sweep=*/true))
                std::printf("removed %s, left by a process that died creating the pool\n", t.c_str());
    });
}

}  // namespace speckv_cli
