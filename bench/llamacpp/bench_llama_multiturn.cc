// SPDX-License-Identifier: Apache-2.0
// Multi-turn workload on llama.cpp across worker processes (bench/llamacpp/README.md):
//   bench_llama_multiturn MODEL.gguf TRACE.jsonl TEXT TMPDIR [--requests N] [--workers W]
//                         [--max-blocks B] [--pool-mb S]
// The prompts follow the prefix structure of a Mooncake conversation trace:
// request i's prompt is the concatenation of one 16-token chunk of real text
// (tokenised TEXT) per hash id in its "hash_ids" (the first B of them), so
// requests sharing leading hash ids share leading blocks, as the turns of a
// conversation do. Requests go to W worker processes round-robin, each running
// its share in trace order, all at once. Per request: restore (if cached),
// prefill the rest, store, first token: that is its TTFT. Three runs:
//   none    no cache
//   local   each worker its own private speckv pool of S/W MB (a per-process
//           prompt cache of the same total size: what llama-server's own gives)
//   shared  one speckv pool of S MB for all workers
// Prints hit rate (prompt tokens restored), prefill tokens computed and saved,
// TTFT p50/p99 (wall and CPU of the worker's thread).
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "ggml-backend.h"
#include "llama.h"
#include "speckv_llama.h"

namespace {
constexpr size_t kChunk = 16;
void quiet(ggml_log_level, const char *, void *) {}
double cpu_ms() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
double pct(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t i = (size_t)(p * (v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

std::vector<std::vector<uint64_t>> read_trace(const std::string &path, size_t n, size_t max_blocks) {
    std::ifstream f(path);
    std::vector<std::vector<uint64_t>> out;
    std::string line;
    while (out.size() < n && std::getline(f, line)) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!j.is_object()) continue;
        auto h = j.find("hash_ids");
        if (h == j.end() || !h->is_array()) continue;
        std::vector<uint64_t> ids;
        for (const auto &id : *h) {
            if (ids.size() >= max_blocks || !id.is_number_unsigned()) break;
            ids.push_back(id.get<uint64_t>());
        }
        if (!ids.empty()) out.push_back(ids);
    }
    return out;
}

int worker(const std::string &model_path, const std::string &trace, const std::string &text_path, const std::string &mode,
           const std::string &pool_uri, int w, int workers, size_t n_req, size_t max_blocks, const std::string &out_path) {
    llama_log_set(quiet, nullptr);
    ggml_backend_load_all_from_path(SPECKV_LLAMA_LIBDIR);
    llama_backend_init();
    llama_model *m = llama_model_load_from_file(model_path.c_str(), llama_model_default_params());
    if (!m) return 1;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context *c = llama_init_from_model(m, cp);
    if (!c) return 1;
    const llama_vocab *v = llama_model_get_vocab(m);
    std::stringstream ss;
    ss << std::ifstream(text_path).rdbuf();
    std::string text = ss.str();
    std::vector<int32_t> corpus(text.size() + 16);
    int nt = llama_tokenize(v, text.c_str(), (int32_t)text.size(), corpus.data(), (int32_t)corpus.size(), false, false);
    if (nt < (int)kChunk * 4) return 1;
    corpus.resize(nt);
    speckv_pool *pool = nullptr;
    speckv_llama *a = nullptr;
    if (mode != "none") {
        if (speckv_pool_open(pool_uri.c_str(), nullptr, &pool) != SPECKV_OK) {
            std::fprintf(stderr, "pool %s: %s\n", pool_uri.c_str(), speckv_errmsg());
            return 1;
        }
        speckv_llama_params p{};
        p.struct_size = sizeof p;
        p.block_tokens = kChunk;
        p.kv_desc = "f16/f16/fa=0";
        speckv_llama_model_id_file(model_path.c_str(), p.model_id);
        if (speckv_llama_open(pool, c, &p, &a) != 0) return 1;
    }
    auto reqs = read_trace(trace, n_req, max_blocks);
    FILE *out = std::fopen(out_path.c_str(), "w");
    if (!out) return 1;
    llama_memory_t mem = llama_get_memory(c);
    for (size_t i = (size_t)w; i < reqs.size(); i += (size_t)workers) {
        std::vector<int32_t> prompt;
        for (uint64_t h : reqs[i]) {
            size_t off = (size_t)((h * 7919u) % (uint64_t)(corpus.size() - kChunk));
            prompt.insert(prompt.end(), corpus.begin() + off, corpus.begin() + off + kChunk);
        }
        llama_memory_seq_rm(mem, 0, -1, -1);
        auto t0 = std::chrono::steady_clock::now();
        double c0 = cpu_ms();
        size_t r = 0;
        if (a && speckv_llama_restore(a, 0, prompt.data(), prompt.size(), &r) != 0) r = 0;
        llama_batch b = llama_batch_init((int32_t)(prompt.size() - r), 0, 1);
        for (size_t k = r; k < prompt.size(); ++k) {
            int j = b.n_tokens++;
            b.token[j] = prompt[k];
            b.pos[j] = (llama_pos)k;
            b.n_seq_id[j] = 1;
            b.seq_id[j][0] = 0;
            b.logits[j] = k + 1 == prompt.size();
        }
        if (llama_decode(c, b) != 0) return 1;
        llama_batch_free(b);
        volatile float first = llama_get_logits_ith(c, -1)[0];
        (void)first;
        double ttft = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        double tcpu = cpu_ms() - c0;
        if (a) speckv_llama_store(a, 0, prompt.data(), prompt.size(), nullptr);  // after TTFT: off the critical path
        std::fprintf(out, "%.4f %.4f %zu %zu\n", ttft, tcpu, prompt.size(), r);
    }
    std::fclose(out);
    if (a) speckv_llama_close(a);
    if (pool) speckv_pool_close(pool);
    llama_free(c);
    llama_model_free(m);
    return 0;
}
}  // namespace

int main(int argc, char **argv) {
    if (argc >= 12 && std::string(argv[1]) == "--worker")
        return worker(argv[2], argv[3], argv[4], argv[5], argv[6], std::atoi(argv[7]), std::atoi(argv[8]),
                      std::strtoul(argv[9], nullptr, 10), std::strtoul(argv[10], nullptr, 10), argv[11]);
    // (`--worker ...` above is this program calling itself for a worker process.)
    std::string model, trace, text, tmp;
    size_t n_req = 200, max_blocks = 24, pool_mb = 16;
    int workers = 4;
    CLI::App app{"A multi-turn workload over worker processes: no cache, per-worker, shared pool (docs/llamacpp.md)"};
    app.add_option("MODEL", model, "the GGUF model")->required();
    app.add_option("TRACE", trace, "the conversation trace (JSONL)")->required();
    app.add_option("TEXT", text, "the text prompts are cut from")->required();
    app.add_option("TMPDIR", tmp, "scratch directory")->required();
    app.add_option("--requests", n_req, "requests to replay")->check(CLI::Range(size_t(1), size_t(1) << 30));
    app.add_option("--workers", workers, "worker processes")->check(CLI::Range(1, 64));
    app.add_option("--max-blocks", max_blocks, "most blocks of a prompt")->check(CLI::Range(size_t(1), size_t(1) << 20));
    app.add_option("--pool-mb", pool_mb, "cache size in MB, in total")->check(CLI::Range(size_t(4), size_t(1) << 30));
    CLI11_PARSE(app, argc, argv);
    mkdir(tmp.c_str(), 0755);
    std::printf("%zu requests of %s (at most %zu blocks of %zu tokens each), %d workers, cache %zu MB in total\n",
                n_req, trace.c_str(), max_blocks, kChunk, workers, pool_mb);
    std::printf("| cache | prompt tokens | restored (hit rate) | prefill tokens computed | TTFT p50 ms | TTFT p99 ms | CPU p50 ms | CPU p99 ms |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (std::string mode : {"none", "local", "shared"}) {
        std::string shared_path = tmp + "/multiturn.pool";
        unlink(shared_path.c_str());
        std::vector<pid_t> kids;
        for (int w = 0; w < workers; ++w) {
            std::string uri = mode == "shared" ? "file:" + shared_path + "?size=" + std::to_string(pool_mb) + "M"
                                               : "anon:?size=" + std::to_string(pool_mb * 1024 / workers) + "K";
            std::string out = tmp + "/multiturn." + std::to_string(w) + ".txt";
            pid_t p = fork();
            if (p == 0) {
                std::string ws = std::to_string(w), wn = std::to_string(workers), nr = std::to_string(n_req),
                            mb = std::to_string(max_blocks);
                execl(argv[0], argv[0], "--worker", model.c_str(), trace.c_str(), text.c_str(), mode.c_str(),
                      uri.c_str(), ws.c_str(), wn.c_str(), nr.c_str(), mb.c_str(), out.c_str(), (char *)nullptr);
                _exit(127);
            }
            kids.push_back(p);
        }
        bool ok = true;
        for (pid_t p : kids) {
            int st = 0;
            waitpid(p, &st, 0);
            ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
        }
        if (!ok) {
            std::fprintf(stderr, "a worker failed (%s)\n", mode.c_str());
            return 1;
        }
        std::vector<double> wall, cpu;
        size_t tokens = 0, restored = 0;
        for (int w = 0; w < workers; ++w) {
            std::ifstream f(tmp + "/multiturn." + std::to_string(w) + ".txt");
            double a, b;
            size_t n, r;
            while (f >> a >> b >> n >> r) {
                wall.push_back(a);
                cpu.push_back(b);
                tokens += n;
                restored += r;
            }
        }
        std::printf("| %s | %zu | %zu (%.1f%%) | %zu | %.2f | %.2f | %.2f | %.2f |\n", mode.c_str(), tokens, restored,
                    tokens ? 100.0 * restored / tokens : 0.0, tokens - restored, pct(wall, 0.5), pct(wall, 0.99),
                    pct(cpu, 0.5), pct(cpu, 0.99));
        std::fflush(stdout);
        unlink(shared_path.c_str());
    }
    return 0;
}
