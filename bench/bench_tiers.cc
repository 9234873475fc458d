// SPDX-License-Identifier: Apache-2.0
// Tier building blocks (issue 5): software TLB lookups, L1 hits and pins,
// L3<->L4 cold-tier bandwidth beside raw file I/O on the same file system,
// and the prefetch policy on synthetic decode streams beside no-prefetch, a
// next-pages oracle and the Belady oracle at the same L2 size. Medians over
// repeated runs, as tables.
//   ./build/release/bench/bench_tiers [--repeats N] [--dir DIR] [--mib N] [--only SECTION]
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tiers/cold_tier.h"
#include "speckv.h"
#include "decode_sim.h"
#include "tiers/tier_buffers.h"
#include "pool/tlb.h"
#include "bench_util.h"

using namespace speckv;

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t0) { return std::chrono::duration<double, std::nano>(Clock::now() - t0).count(); }

double pct(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}
double median(std::vector<double> v) { return pct(std::move(v), 0.5); }

using bench::cpu_name;

[[noreturn]] void die(const char *what) {
    std::fprintf(stderr, "bench_tiers: %s: %s\n", what, last_error());
    std::exit(1);
}

volatile uint64_t g_sink;

// ---- TLB

void bench_tlb(int repeats) {
    std::unique_ptr<Tlb> tlb;
    if (Tlb::create(4096, 4, &tlb)) die("tlb");
    std::unordered_map<uint64_t, TlbValue> table;  // the "block table" behind it
    std::vector<TlbKey> keys;
    std::mt19937_64 rng(1);
    for (uint64_t i = 0; i < 1024; i++) {
        TlbKey k{uint32_t(i % 4), uint32_t(i % 32), 1000 + i / 32, (i % 7) * 16};
        keys.push_back(k);
        table[k.request << 32 ^ uint64_t(k.layer) << 20 ^ k.token >> 4 ^ uint64_t(k.tenant) << 60] = {i, i * 3};
    }
    auto walk = [&](const TlbKey &k, TlbValue *v) {
        auto it = table.find(k.request << 32 ^ uint64_t(k.layer) << 20 ^ k.token >> 4 ^ uint64_t(k.tenant) << 60);
        if (it == table.end()) return false;
        *v = it->second;
        return true;
    };
    for (auto &k : keys) {
        TlbValue v;
        tlb->translate(k, &v, walk);
    }
    std::vector<uint32_t> order(1 << 16);
    for (auto &o : order) o = uint32_t(rng() % keys.size());
    constexpr int kBatch = 256;
    std::vector<double> hit_ns, walk_ns;
    for (int r = 0; r < repeats; r++)
        for (size_t b = 0; b + kBatch <= order.size(); b += kBatch) {
            auto t0 = Clock::now();
            uint64_t acc = 0;
            for (int i = 0; i < kBatch; i++) {
                TlbValue v{0, 0};
                tlb->lookup(keys[order[b + i]], &v);
                acc += v.page;
            }
            hit_ns.push_back(ns_since(t0) / kBatch);
            t0 = Clock::now();
            for (int i = 0; i < kBatch; i++) {
                TlbValue v{0, 0};
                walk(keys[order[b + i]], &v);
                acc += v.page;
            }
            walk_ns.push_back(ns_since(t0) / kBatch);
            g_sink = acc;
        }
    TlbStats s = tlb->stats();
    std::printf("\nsoftware TLB (4096 entries, 1024 live keys, random order; ns per lookup, batches of %d)\n", kBatch);
    std::printf("%-40s %10s %10s\n", "operation", "p50 ns", "p99 ns");
    std::printf("%-40s %10.1f %10.1f\n", "TLB lookup (hit)", median(hit_ns), pct(hit_ns, 0.99));
    std::printf("%-40s %10.1f %10.1f\n", "block-table walk (unordered_map)", median(walk_ns), pct(walk_ns, 0.99));
    std::printf("%-40s %10.4f\n", "TLB hit rate in this run", s.hit_rate());
}

// ---- L1

void bench_l1(int repeats) {
    constexpr uint32_t kPage = 4096;
    std::unique_ptr<HotBuffer> l1;
    if (HotBuffer::create(1024 * kPage, kPage, &l1)) die("l1");
    std::vector<unsigned char> page(kPage, 7);
    for (uint64_t k = 0; k < 512; k++) l1->put(k, 1, page.data());
    std::vector<uint32_t> order(20000);
    std::mt19937_64 rng(2);
    for (auto &o : order) o = uint32_t(rng() % 512);
    auto run = [&](int threads, bool pin, std::vector<double> *ns) {
        std::vector<std::vector<double>> per(threads);
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; t++)
            ts.emplace_back([&, t] {
                alignas(64) unsigned char dst[kPage] = {};  // a get that misses leaves it as is
                per[t].reserve(order.size());
                for (uint32_t k : order) {
                    auto t0 = Clock::now();
                    if (pin) {
                        HotBuffer::Pin p;
                        if (l1->pin(k, 1, &p)) {
                            g_sink = static_cast<const unsigned char *>(p.data)[100];
                            l1->unpin(p);
                        }
                    } else {
                        l1->get(k, 1, 0, kPage, dst);
                        g_sink = dst[100];
                    }
                    per[t].push_back(ns_since(t0));
                }
            });
        for (auto &t : ts) t.join();
        for (auto &v : per) ns->insert(ns->end(), v.begin(), v.end());
    };
    std::printf("\nL1 hot buffer (4 KiB pages, 512 resident of 1024 frames; per operation, incl. ~20 ns of clock reads)\n");
    std::printf("%-40s %10s %10s\n", "operation", "p50 ns", "p99 ns");
    for (int threads : {1, 2})
        for (bool pin : {false, true}) {
            std::vector<double> p50, p99;
            for (int r = 0; r < repeats; r++) {
                std::vector<double> ns;
                run(threads, pin, &ns);
                p50.push_back(pct(ns, 0.5));
                p99.push_back(pct(ns, 0.99));
            }
            char name[64];
            std::snprintf(name, sizeof name, "%s, %d thread%s", pin ? "pin + unpin" : "get (4 KiB copy)", threads,
                          threads > 1 ? "s" : "");
            std::printf("%-40s %10.1f %10.1f\n", name, median(p50), median(p99));
        }
    // The floor under get: memcpy of the same pages from a plain array, timed the same way.
    std::vector<unsigned char> plain(512 * size_t(kPage), 7);
    std::vector<double> p50, p99;
    for (int r = 0; r < repeats; r++) {
        std::vector<double> ns;
        alignas(64) unsigned char dst[kPage];
        for (uint32_t k : order) {
            auto t0 = Clock::now();
            std::memcpy(dst, plain.data() + size_t(k) * kPage, kPage);
            asm volatile("" : : "r"(dst) : "memory");  // the copy must happen
            g_sink = dst[100];
            ns.push_back(ns_since(t0));
        }
        p50.push_back(pct(ns, 0.5));
        p99.push_back(pct(ns, 0.99));
    }
    std::printf("%-40s %10.1f %10.1f\n", "memcpy 4 KiB (same pages, plain array)", median(p50), median(p99));
}

// ---- cold tier

double raw_io_gbps(const std::string &path, size_t total, size_t chunk, bool write, bool direct) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | (direct ? O_DIRECT : 0), 0644);
    if (fd < 0) return 0;
    void *buf = std::aligned_alloc(4096, chunk);
    std::memset(buf, 0x42, chunk);
    auto t0 = Clock::now();
    for (size_t off = 0; off < total; off += chunk) {
        ssize_t r = write ? pwrite(fd, buf, chunk, off) : pread(fd, buf, chunk, off);
        if (r != ssize_t(chunk)) break;
    }
    double s = ns_since(t0) * 1e-9;
    std::free(buf);
    ::close(fd);
    return double(total) / s / 1e9;
}

void bench_cold(int repeats, const std::string &dir, size_t mib) {
    const size_t item = 64 << 10, total = mib << 20, batch = 64;
    std::string path = dir + "/speckv-bench-" + std::to_string(getpid()) + ".cold";
    std::string raw = path + ".raw";
    std::vector<std::vector<unsigned char>> data(batch, std::vector<unsigned char>(item));
    for (size_t i = 0; i < batch; i++) std::memset(data[i].data(), int(i), item);
    std::vector<double> put_g, get_g, rw_g, rr_g, rws_g, rrs_g;
    bool direct = false, uring = false;
    std::string reason;
    for (int r = 0; r < repeats; r++) {
        ColdTierOptions o;
        o.path = path;
        o.capacity = total * 2;
        o.queue_depth = 32;
        o.slot_bytes = 256 << 10;
        std::unique_ptr<ColdTier> t;
        if (ColdTier::open(o, &t)) die("cold tier open");
        direct = t->direct(), uring = t->uring(), reason = t->fallback_reason();
        uint64_t key = 0;
        auto t0 = Clock::now();
        for (size_t done = 0; done < total; done += batch * item) {
            std::vector<ColdTier::PutItem> items;
            for (size_t i = 0; i < batch; i++) items.push_back({key++, data[i].data(), item});
            if (t->put(items)) die("cold tier put");
        }
        put_g.push_back(double(total) / (ns_since(t0) * 1e-9) / 1e9);
        std::vector<std::vector<unsigned char>> back(batch, std::vector<unsigned char>(item));
        t0 = Clock::now();
        for (uint64_t k = 0; k < key; k += batch) {
            std::vector<ColdTier::GetItem> items;
            for (size_t i = 0; i < batch; i++) items.push_back({k + i, back[i].data(), item});
            if (t->get(items)) die("cold tier get");
        }
        get_g.push_back(double(total) / (ns_since(t0) * 1e-9) / 1e9);
        t.reset();
        unlink(raw.c_str());
        rw_g.push_back(raw_io_gbps(raw, total, 1 << 20, true, direct));
        rr_g.push_back(raw_io_gbps(raw, total, 1 << 20, false, direct));
        unlink(raw.c_str());
        rws_g.push_back(raw_io_gbps(raw, total, item, true, direct));
        rrs_g.push_back(raw_io_gbps(raw, total, item, false, direct));
    }
    unlink(path.c_str());
    unlink(raw.c_str());
    std::printf("\nL3<->L4 cold tier: %zu MiB in 64 KiB items, batches of %zu, in %s (%s, %s)\n", mib, batch, dir.c_str(),
                direct ? "O_DIRECT" : "buffered", uring ? "io_uring + registered buffers" : "pread/pwrite");
    if (!reason.empty()) std::printf("  fallback: %s\n", reason.c_str());
    std::printf("%-40s %10s %12s\n", "operation", "GB/s", "vs raw file");
    std::printf("%-40s %10.2f %12.2f\n", "demote (put: CRC32C + write)", median(put_g), median(put_g) / median(rw_g));
    std::printf("%-40s %10.2f %12.2f\n", "promote (get: read + CRC32C check)", median(get_g), median(get_g) / median(rr_g));
    std::printf("%-40s %10.2f %12s\n", "raw sequential pwrite, 1 MiB", median(rw_g), "1.00");
    std::printf("%-40s %10.2f %12s\n", "raw sequential pread, 1 MiB", median(rr_g), "1.00");
    std::printf("%-40s %10.2f %12.2f\n", "raw sequential pwrite, 64 KiB, QD 1", median(rws_g), median(rws_g) / median(rw_g));
    std::printf("%-40s %10.2f %12.2f\n", "raw sequential pread, 64 KiB, QD 1", median(rrs_g), median(rrs_g) / median(rr_g));
}

// ---- L3<->L4 through the pool (the C API: speckv_demote, then speckv_access)

speckv_pool *open_pool(const std::string &uri, const std::string &cold) {
    speckv_config *c = nullptr;
    if (speckv_config_new(&c)) die("config");
    if (!cold.empty() && speckv_config_set_str(c, "cold.path", cold.c_str())) die("config cold.path");
    speckv_pool *p = nullptr;
    if (int rc = speckv_pool_open(uri.c_str(), c, &p); rc != SPECKV_OK) {
        std::fprintf(stderr, "bench_tiers: open %s: %s\n", uri.c_str(), speckv_errmsg());
        std::exit(1);
    }
    speckv_config_free(c);
    return p;
}

std::vector<speckv_handle> make_blocks(speckv_pool *p, size_t n, size_t bytes, bool publish) {
    std::vector<speckv_handle> hs(n);
    std::vector<unsigned char> v(bytes);
    for (size_t i = 0; i < n; i++) {
        std::memset(v.data(), int(i * 7 + 1), bytes);
        speckv_hint hint{};
        hint.struct_size = sizeof hint;
        hint.tenant = 1;
        if (speckv_alloc(p, bytes, SPECKV_DTYPE_OPAQUE, &hint, &hs[i])) die("alloc");
        if (speckv_write(p, hs[i], 0, v.data(), bytes)) die("write");
        uint8_t hash[SPECKV_HASH_BYTES] = {};
        std::memcpy(hash, &i, sizeof i);
        if (publish && speckv_publish(p, hs[i], hash, nullptr)) die("publish");
    }
    return hs;
}

void bench_cold_pool(int repeats, const std::string &dir, size_t mib) {
    const size_t item = 64 << 10, n = (mib << 20) / item;
    const std::string path = dir + "/speckv-bench-" + std::to_string(getpid());
    const std::string uri = "file:" + path + ".pool?size=" + std::to_string(mib * 2 + 16) + "M&max_blocks=" +
                            std::to_string(n + 64);
    const std::string l4 = path + ".l4";
    std::vector<double> dem_g, pro_g, rem_g, pro_lat, rem_lat, mc_g, rws_g, rrs_g;
    std::vector<unsigned char> buf(item), src(item, 0x5A);
    for (int r = 0; r < repeats; r++) {
        unlink((path + ".pool").c_str());
        unlink(l4.c_str());
        speckv_pool *p = open_pool(uri, l4);
        auto hs = make_blocks(p, n, item, false);
        auto t0 = Clock::now();
        for (auto h : hs)
            if (speckv_demote(p, h)) die("demote");
        dem_g.push_back(double(n * item) / (ns_since(t0) * 1e-9) / 1e9);
        t0 = Clock::now();
        for (auto h : hs) {
            auto t1 = Clock::now();
            if (speckv_access(p, h, 0, buf.data(), item, 0)) die("access (promote)");
            pro_lat.push_back(ns_since(t1) / 1e3);
        }
        pro_g.push_back(double(n * item) / (ns_since(t0) * 1e-9) / 1e9);
        speckv_pool_close(p);
        // A process without cold.path reads blocks the holder (a child) demoted.
        unlink((path + ".pool").c_str());
        unlink(l4.c_str());
        { speckv_pool *init = open_pool(uri, ""); speckv_pool_close(init); }
        int fds[2];
        if (pipe(fds)) die("pipe");
        pid_t child = fork();
        if (child == 0) {
            close(fds[0]);
            speckv_pool *q = open_pool(uri, l4);
            auto cs = make_blocks(q, n, item, true);
            for (auto h : cs)
                if (speckv_demote(q, h)) _exit(3);
            if (write(fds[1], cs.data(), cs.size() * sizeof cs[0]) != ssize_t(cs.size() * sizeof cs[0])) _exit(4);
            for (;;) pause();
        }
        close(fds[1]);
        std::vector<speckv_handle> cs(n);
        if (read(fds[0], cs.data(), cs.size() * sizeof cs[0]) != ssize_t(cs.size() * sizeof cs[0])) die("holder child");
        close(fds[0]);
        speckv_pool *q = open_pool(uri, "");
        t0 = Clock::now();
        for (auto h : cs) {
            auto t1 = Clock::now();
            if (speckv_access(q, h, 0, buf.data(), item, 0)) die("access (remote promote)");
            rem_lat.push_back(ns_since(t1) / 1e3);
        }
        rem_g.push_back(double(n * item) / (ns_since(t0) * 1e-9) / 1e9);
        speckv_pool_close(q);
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
        unlink((path + ".pool").c_str());
        unlink(l4.c_str());
        t0 = Clock::now();
        for (size_t i = 0; i < n; i++) {
            src[i % item] = uint8_t(i);
            std::memcpy(buf.data(), src.data(), item);
            g_sink = g_sink + buf[i % item];
        }
        mc_g.push_back(double(n * item) / (ns_since(t0) * 1e-9) / 1e9);
        const std::string raw = path + ".raw";
        unlink(raw.c_str());
        rws_g.push_back(raw_io_gbps(raw, n * item, item, true, true));
        rrs_g.push_back(raw_io_gbps(raw, n * item, item, false, true));
        unlink(raw.c_str());
    }
    std::printf("\nL3<->L4 through the pool: %zu blocks of 64 KiB, one per call, pool and L4 file in %s\n", n,
                dir.c_str());
    std::printf("%-48s %8s %10s %11s %10s\n", "operation", "GB/s", "vs memcpy", "vs raw I/O", "p50 us");
    std::printf("%-48s %8.2f %10.3f %11.2f %10s\n", "speckv_demote (holder)", median(dem_g), median(dem_g) / median(mc_g),
                median(dem_g) / median(rws_g), "-");
    std::printf("%-48s %8.2f %10.3f %11.2f %10.1f\n", "speckv_access of a block in L4 (holder)", median(pro_g),
                median(pro_g) / median(mc_g), median(pro_g) / median(rrs_g), median(pro_lat));
    std::printf("%-48s %8.2f %10.3f %11.2f %10.1f\n", "speckv_access of a block in L4 (other process)", median(rem_g),
                median(rem_g) / median(mc_g), median(rem_g) / median(rrs_g), median(rem_lat));
    std::printf("%-48s %8.2f %10s %11s\n", "memcpy 64 KiB", median(mc_g), "1.000", "-");
    std::printf("%-48s %8.2f %10s %11s\n", "raw pwrite 64 KiB, O_DIRECT, QD 1 (demote)", median(rws_g), "-", "1.00");
    std::printf("%-48s %8.2f %10s %11s\n", "raw pread 64 KiB, O_DIRECT, QD 1 (promote)", median(rrs_g), "-", "1.00");
}

// ---- prefetch policy

void bench_prefetch(int repeats) {
    struct Scenario {
        const char *name;
        sim::SimConfig cfg;
    };
    std::vector<Scenario> sc;
    sim::SimConfig base;
    sc.push_back({"batch 8, 16 layers, link 2x compute", base});
    sim::SimConfig big = base;
    big.batch = 16, big.layers = 32, big.l2_pages = 512, big.steps = 80;
    sc.push_back({"batch 16, 32 layers, L2 512 pages", big});
    sim::SimConfig tight = base;
    tight.l2_pages = 64;
    sc.push_back({"batch 8, 16 layers, L2 64 pages", tight});
    sim::SimConfig shuf = base;
    shuf.shuffle = true;
    sc.push_back({"batch order shuffled every step", shuf});
    sim::SimConfig slow = base;
    slow.xfer = 1.5;
    slow.steps = 100;
    sc.push_back({"slow link: demand needs 150% of it", slow});
    std::printf("\nprefetch on synthetic decode streams (continuous batching, layer-major), same L2 for all;\n"
                "median over %d seeds. hit = share of reads served from L2 (docs/design.md §6), prec = share of\n"
                "prefetched pages read before eviction, waste = the rest, hidden = 1 - stall / stall(none),\n"
                "link = pages over the L3->L2 link per page read (prefetched + fetched on demand).\n"
                "oracle: the next pages in order, one bank ahead, the buffer's own eviction; belady: Belady eviction\n"
                "and perfect next access (docs/tiers.md §11); lru: the link pages of an LRU buffer of this size that\n"
                "fetches on demand; min: the fewest link pages any policy needs (MIN)\n",
                repeats);
    std::printf("%-38s %-8s %7s %7s %7s %8s %6s %6s %6s\n", "stream", "policy", "hit", "prec", "waste", "hidden",
                "link", "depth", "beta");
    constexpr int kPolicies = 4;
    for (auto &s : sc) {
        std::vector<double> hit[kPolicies], prec[kPolicies], waste[kPolicies], hidden[kPolicies], link[kPolicies];
        std::vector<double> depth, beta, min_link, lru_link;
        for (int r = 0; r < repeats; r++) {
            sim::SimConfig c = s.cfg;
            c.seed = uint32_t(r + 1);
            auto trace = sim::make_trace(c);
            sim::SimResult res[kPolicies] = {sim::run(c, trace, sim::Policy::kNone),
                                             sim::run(c, trace, sim::Policy::kLearned),
                                             sim::run(c, trace, sim::Policy::kOracle), sim::run_belady(c, trace)};
            for (int p = 0; p < kPolicies; p++) {
                hit[p].push_back(res[p].hit_rate());
                prec[p].push_back(res[p].precision());
                waste[p].push_back(res[p].waste());
                hidden[p].push_back(1 - res[p].stall / res[0].stall);
                link[p].push_back(res[p].link_per_read());
            }
            depth.push_back(res[1].mean_depth);
            beta.push_back(res[1].beta_min);
            min_link.push_back(double(sim::min_link_pages(c, trace)) / double(res[0].accesses));
            lru_link.push_back(double(oracle::lru(sim::page_reads(trace), c.l2_pages).misses()) / double(res[0].accesses));
        }
        const char *names[kPolicies] = {"none", "learned", "oracle", "belady"};
        for (int p = 0; p < kPolicies; p++) {
            if (p == 0)  // nothing prefetched: precision and waste do not apply
                std::printf("%-38s %-8s %6.1f%% %7s %7s %7.1f%% %6.3f", s.name, names[p], 100 * median(hit[p]), "-",
                            "-", 100 * median(hidden[p]), median(link[p]));
            else
                std::printf("%-38s %-8s %6.1f%% %6.1f%% %6.1f%% %7.1f%% %6.3f", "", names[p], 100 * median(hit[p]),
                            100 * median(prec[p]), 100 * median(waste[p]), 100 * median(hidden[p]), median(link[p]));
            if (p == 1) std::printf(" %6.2f %6.2f", median(depth), median(beta));
            std::printf("\n");
        }
        std::printf("%-38s %-8s %7s %7s %7s %8s %6.3f\n", "", "lru", "", "", "", "", median(lru_link));
        std::printf("%-38s %-8s %7s %7s %7s %8s %6.3f\n", "", "min", "", "", "", "", median(min_link));
    }
    std::printf("(depth: mean effective depth in units of (request, layer); beta: its minimum over the run)\n");
}

}  // namespace

int main(int argc, char **argv) {
    int repeats = 7;
    std::string dir = "/tmp", only;
    size_t mib = 64;
    CLI::App app{"speckv tier building blocks (bench/README.md)", "bench_tiers"};
    app.add_option("--repeats", repeats, "runs per cell (median reported)")->check(CLI::PositiveNumber);
    app.add_option("--dir", dir, "directory of the cold-tier file");
    app.add_option("--mib", mib, "MiB through the cold tier")->check(CLI::PositiveNumber);
    app.add_option("--only", only, "one section")
        ->check(CLI::IsMember({"tlb", "l1", "cold", "cold-pool", "prefetch"}));
    CLI11_PARSE(app, argc, argv);
    std::printf("speckv tier benchmarks on %s, %u CPUs; median of %d runs\n", cpu_name().c_str(),
                std::thread::hardware_concurrency(), repeats);
    auto want = [&](const char *s) { return only.empty() || only == s; };
    if (want("tlb")) bench_tlb(repeats);
    if (want("l1")) bench_l1(repeats);
    if (want("cold")) bench_cold(repeats, dir, mib);
    if (want("cold-pool")) bench_cold_pool(repeats, dir, std::min<size_t>(mib, 32));
    if (want("prefetch")) bench_prefetch(repeats);
    return 0;
}
