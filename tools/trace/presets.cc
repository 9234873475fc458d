// SPDX-License-Identifier: Apache-2.0
// Model geometries, GPU and link presets, and the paper's workload generators.
// Sources of the numbers are in docs/trace.md ("Presets").
#include <cmath>
#include <strings.h>

#include "trace.h"

namespace speckv_trace {

const std::vector<ModelSpec> &models() {
    // name, layers, query heads, KV heads, head dim, parameters, bytes per element
    static const std::vector<ModelSpec> m = {
        {"llama-2-7b", 32, 32, 32, 128, 6.74e9, 2},
        {"llama-2-13b", 40, 40, 40, 128, 13.0e9, 2},
        {"llama-2-70b", 80, 64, 8, 128, 69.0e9, 2},
        {"llama-3-8b", 32, 32, 8, 128, 8.03e9, 2},
        {"llama-3-70b", 80, 64, 8, 128, 70.6e9, 2},
        {"qwen-72b", 80, 64, 64, 128, 72.3e9, 2},
        {"llama-3.1-405b", 126, 128, 8, 128, 405.9e9, 2},
        // The tiny real model of data/models (real-byte mode at small scale).
        {"stories260k", 5, 8, 4, 8, 2.6e5, 2},
    };
    return m;
}

const std::vector<GpuSpec> &gpus() {
    static const std::vector<GpuSpec> g = {
        {"a100-80g", 80e9, 2.039e12, 312e12},
        {"a100-40g", 40e9, 1.555e12, 312e12},
        {"h100-80g", 80e9, 3.35e12, 989e12},
    };
    return g;
}

const std::vector<LinkSpec> &links() {
    static const std::vector<LinkSpec> l = {
        // name, latency, bandwidth per device, devices, bytes per device
        // Sources and reasoning per number: docs/trace.md "Presets".
        {"pcie-host", 1.0e-6, 25e9, 1, 1024e9},     // pinned host-to-device copies over PCIe 4.0 x16, one per GPU
        {"cxl-direct", 250e-9, 36e9, 4, 512e9},     // CXL Type-3 expander (PCIe 5.0 x8) per root port
        {"cxl-pooled", 600e-9, 16e9, 4, 1024e9},    // 4 expanders behind one switch: its x16 upstream port (64 GB/s) is shared
        {"nvme", 20e-6, 7e9, 4, 3840e9},            // PCIe 4.0 NVMe SSD
        // L5, a Redis Cluster over the host's 25 GbE NIC (TCP goodput, a
        // network round trip per request); any cxl_* system on it is a
        // remote-tier system. Capacity: the cluster's memory (assumption).
        {"redis-25gbe", 200e-6, 2.94e9, 1, 1536e9},
    };
    return l;
}

namespace {
template <class T>
const T *find_by_name(const std::vector<T> &v, const std::string &n) {
    for (auto &e : v)
        if (strcasecmp(e.name, n.c_str()) == 0) return &e;
    return nullptr;
}
}  // namespace

const ModelSpec *find_model(const std::string &n) { return find_by_name(models(), n); }
const GpuSpec *find_gpu(const std::string &n) { return find_by_name(gpus(), n); }
const LinkSpec *find_link(const std::string &n) { return find_by_name(links(), n); }

const std::vector<Workload> &workloads() {
    // The paper's four workloads (input tokens, output tokens), uniform ranges.
    static const std::vector<Workload> w = {
        {"chat", 128, 128, 256, 256},
        {"summarization", 1024, 2048, 128, 256},
        {"code", 256, 512, 512, 1024},
        {"qa", 64, 128, 32, 64},
    };
    return w;
}

const Workload *find_workload(const std::string &n) { return find_by_name(workloads(), n); }

Generator::Generator(const GenOptions &o) : o_(o), w_(find_workload(o.workload)) {
    if (!w_) w_ = &workloads()[0];
    state_ = o.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    // Ids 0 .. prefixes*blocks_per_prefix-1 belong to the shared prefixes.
    next_id_ = static_cast<uint64_t>(o_.prefixes) * (o_.prefix_tokens / o_.block_tokens + 1);
}

double Generator::uniform() {
    // splitmix64: small, fast, and the same sequence everywhere for a seed.
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (static_cast<double>(z >> 11) + 0.5) * (1.0 / 9007199254740992.0);  // (0,1)
}

bool Generator::next(Request *r) {
    if (n_ >= o_.count) return false;
    auto pick = [&](uint32_t lo, uint32_t hi) {
        return lo + static_cast<uint32_t>(std::floor(uniform() * (hi - lo + 1)));
    };
    if (n_ > 0) t_ms_ += -std::log(uniform()) / o_.rate * 1000.0;
    *r = Request{};
    r->id = n_++;
    r->arrival_ms = t_ms_;
    uint32_t own = pick(w_->in_lo, w_->in_hi);
    r->output_len = pick(w_->out_lo, w_->out_hi);
    uint32_t prefix = 0, which = 0;
    if (o_.prefix_share > 0 && uniform() < o_.prefix_share) {
        which = static_cast<uint32_t>(std::floor(uniform() * o_.prefixes));
        prefix = o_.prefix_tokens;
    }
    r->input_len = prefix + own;
    uint32_t blocks = (r->input_len + o_.block_tokens - 1) / o_.block_tokens;
    uint64_t per_prefix = o_.prefix_tokens / o_.block_tokens + 1;
    for (uint32_t b = 0; b < blocks; ++b) {
        // A block made only of the shared prefix's tokens has that prefix's id;
        // anything holding the request's own tokens is new.
        if (static_cast<uint64_t>(b + 1) * o_.block_tokens <= prefix)
            r->hash_ids.push_back(which * per_prefix + b);
        else
            r->hash_ids.push_back(next_id_++);
    }
    return true;
}

}  // namespace speckv_trace
