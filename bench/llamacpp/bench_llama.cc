// SPDX-License-Identifier: Apache-2.0
// TTFT of a prompt whose prefix is cached: speckv (bindings/llama.cpp) vs
// recomputing it vs llama.cpp's own mechanisms. docs/llamacpp.md "Benchmark".
//   bench_llama MODEL.gguf TMPDIR [--rounds R] [--threads T] [--lens 32,64,...] [--ctx N] [--fa 0|1]
// n_ctx (default 1024) must hold 2L+1 cells. For each prefix length L (a multiple of the block size, 16) the request is
// L+1 tokens; the first token's logits are ready after:
//   recompute  decode all L+1 tokens
//   speckv     speckv_llama_restore (L tokens from the pool) + decode 1 token
//   seq_cp     llama_memory_seq_cp from a sequence that still holds the prefix
//              (in-process reuse, as llama-server's prompt cache) + decode 1
//   file       llama_state_seq_load_file of a slot saved with
//              llama_state_seq_save_file (slot save/restore) + decode 1
// Medians over R rounds, methods alternated inside each round. Also restore
// bandwidth (block bytes read from the pool per second of restore) against
// memcpy of the same bytes, and the break-even L: the smallest L at which
// speckv beats recompute in CPU time (wall time on a shared machine is
// mostly waiting for a core; CPU time of the calling thread is what the
// work costs, with --threads 1).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "ggml-backend.h"
#include "llama.h"
#include "speckv_llama.h"

namespace {
using clk = std::chrono::steady_clock;
double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }
double cpu_ms() {  // this thread's CPU time (threads 1: llama.cpp computes on the calling thread)
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}
void quiet(ggml_log_level, const char *, void *) {}

llama_model *M;
llama_context *C;

void decode(int32_t seq, const int32_t *tok, size_t n, size_t pos0) {
    llama_batch b = llama_batch_init((int32_t)n, 0, 1);
    for (size_t i = 0; i < n; ++i) {
        b.token[i] = tok[i];
        b.pos[i] = (llama_pos)(pos0 + i);
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq;
        b.logits[i] = i + 1 == n;
    }
    b.n_tokens = (int32_t)n;
    if (llama_decode(C, b) != 0) {
        std::fprintf(stderr, "llama_decode failed\n");
        std::exit(1);
    }
    llama_batch_free(b);
}
int first_token() {
    const float *l = llama_get_logits_ith(C, -1);
    int n = llama_vocab_n_tokens(llama_model_get_vocab(M)), best = 0;
    for (int i = 1; i < n; ++i)
        if (l[i] > l[best]) best = i;
    return best;
}
}  // namespace

int main(int argc, char **argv) {
    std::string model, tmp;
    int rounds = 7, threads = 1, fa = 0;
    bool skip_recompute = false;  // --skip-recompute 1: only the reference run recomputes
    uint32_t n_ctx = 1024;
    std::vector<size_t> lens = {16, 32, 64, 128, 256, 496};
    CLI::App app{"TTFT with a speckv prefix hit vs recompute vs llama.cpp's own mechanisms (docs/llamacpp.md)"};
    app.add_option("MODEL", model, "the GGUF model")->required();
    app.add_option("TMPDIR", tmp, "scratch directory (pools, state files)")->required();
    app.add_option("--rounds", rounds, "rounds per prefix length (medians)")->check(CLI::Range(1, 1 << 16));
    app.add_option("--threads", threads, "llama.cpp threads")->check(CLI::Range(1, 1024));
    app.add_option("--ctx", n_ctx, "context size in tokens")->check(CLI::Range(16u, 1u << 20));
    app.add_option("--fa", fa, "flash attention 0 or 1")->check(CLI::Range(0, 1));
    app.add_option("--skip-recompute", skip_recompute, "1: only the reference run recomputes");
    app.add_option("--lens", lens, "prefix lengths in tokens, comma-separated")->delimiter(',');
    CLI11_PARSE(app, argc, argv);
    mkdir(tmp.c_str(), 0755);
    llama_log_set(quiet, nullptr);
    ggml_backend_load_all_from_path(SPECKV_LLAMA_LIBDIR);
    llama_backend_init();
    M = llama_model_load_from_file(model.c_str(), llama_model_default_params());
    if (!M) return 1;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = cp.n_ubatch = n_ctx;
    cp.n_seq_max = 2;
    cp.kv_unified = true;  // both sequences share the n_ctx cells (seq 1 keeps the prefix for seq_cp)
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    C = llama_init_from_model(M, cp);
    if (!C) return 1;
    llama_memory_t mem = llama_get_memory(C);

    // A prompt of real-looking token ids: the vocabulary's ids in a fixed pseudo-random order.
    const int nv = llama_vocab_n_tokens(llama_model_get_vocab(M));
    size_t maxlen = *std::max_element(lens.begin(), lens.end()) + 1;
    std::vector<int32_t> prompt(maxlen);
    uint64_t x = 88172645463325252ull;
    for (auto &t : prompt) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t = (int32_t)(3 + x % (uint64_t)(nv - 3));
    }

    std::string pool_path = tmp + "/bench_llama.pool";
    unlink(pool_path.c_str());
    speckv_pool *pool = nullptr;
    if (speckv_pool_open(("file:" + pool_path + "?size=2G").c_str(), nullptr, &pool) != SPECKV_OK) {
        std::fprintf(stderr, "pool: %s\n", speckv_errmsg());
        return 1;
    }
    speckv_llama_params pr{};
    pr.struct_size = sizeof pr;
    pr.block_tokens = 16;
    speckv_llama_model_id_file(model.c_str(), pr.model_id);
    pr.kv_desc = fa ? "f16/f16/fa=1" : "f16/f16/fa=0";
    speckv_llama *a = nullptr;
    if (speckv_llama_open(pool, C, &pr, &a) != 0) return 1;

    std::printf("model %s, n_ctx %u, threads %d, flash attention %d, %d rounds (medians; wall ms, in brackets CPU ms of the calling thread)\n", model.c_str(), n_ctx,
                threads, fa, rounds);
    std::printf("| prefix L | recompute | speckv hit | seq_cp (in-process) | state file | restore MB/s | memcpy MB/s | block bytes/token |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    size_t break_even = 0;
    std::string file = tmp + "/bench_llama.slot";
    for (size_t L : lens) {
        const size_t n = L + 1;
        // Fill the pool and a file with the prefix once (seq 0), keep it in seq 1 for seq_cp.
        llama_memory_clear(mem, true);
        decode(0, prompt.data(), L, 0);
        size_t stored = 0;
        speckv_llama_store(a, 0, prompt.data(), L, &stored);
        llama_state_seq_save_file(C, file.c_str(), 0, prompt.data(), L);
        llama_memory_seq_cp(mem, 0, 1, -1, -1);
        const int want = [&] {
            llama_memory_seq_rm(mem, 0, -1, -1);
            decode(0, prompt.data(), n, 0);
            return first_token();
        }();
        std::vector<double> t_re, t_hit, t_cp, t_file, t_restore_only, c_re, c_hit, c_cp, c_file, c_restore_only;
        std::vector<double> dec_hit, dec_cp, dec_file;  // CPU ms of the one token's decode after each
        double c_dec = 0;
        uint64_t bytes_per = 0;
        for (int r = 0; r < rounds; ++r) {
            for (int m0 = 0; m0 < 4; ++m0) {
                int m = (m0 + r) % 4;  // alternate the order
                llama_memory_seq_rm(mem, 0, -1, -1);
                auto t0 = clk::now();
                double c0 = cpu_ms();
                size_t got = 0;
                if (m == 0) {
                    if (skip_recompute) continue;
                    decode(0, prompt.data(), n, 0);
                } else if (m == 1) {
                    speckv_llama_stats s0{sizeof(speckv_llama_stats)};
                    speckv_llama_stats_get(a, &s0);
                    speckv_llama_restore(a, 0, prompt.data(), n, &got);
                    t_restore_only.push_back(ms_since(t0));
                    c_restore_only.push_back(cpu_ms() - c0);
                    speckv_llama_stats s1{sizeof(speckv_llama_stats)};
                    speckv_llama_stats_get(a, &s1);
                    bytes_per = s1.bytes_restored - s0.bytes_restored;
                    if (got != L) {
                        std::fprintf(stderr, "speckv restored %zu of %zu (%s)\n", got, L, speckv_llama_errmsg(a));
                        return 1;
                    }
                    c_dec = cpu_ms();
                    decode(0, prompt.data() + L, 1, L);
                    dec_hit.push_back(cpu_ms() - c_dec);
                } else if (m == 2) {
                    llama_memory_seq_cp(mem, 1, 0, -1, -1);
                    c_dec = cpu_ms();
                    decode(0, prompt.data() + L, 1, L);
                    dec_cp.push_back(cpu_ms() - c_dec);
                } else {
                    std::vector<int32_t> toks(n);
                    size_t nt = 0;
                    if (llama_state_seq_load_file(C, file.c_str(), 0, toks.data(), toks.size(), &nt) == 0 || nt != L) {
                        std::fprintf(stderr, "state file load failed\n");
                        return 1;
                    }
                    c_dec = cpu_ms();
                    decode(0, prompt.data() + L, 1, L);
                    dec_file.push_back(cpu_ms() - c_dec);
                }
                int tok = first_token();
                double ms = ms_since(t0), cms = cpu_ms() - c0;
                if (tok != want) {
                    std::fprintf(stderr, "method %d gave token %d, recompute %d\n", m, tok, want);
                    return 1;
                }
                (m == 0 ? t_re : m == 1 ? t_hit : m == 2 ? t_cp : t_file).push_back(ms);
                (m == 0 ? c_re : m == 1 ? c_hit : m == 2 ? c_cp : c_file).push_back(cms);
                if (m == 0) {
                    // Untimed: a one-token decode after the L+1-token one, so that the
                    // method measured next does not pay for llama.cpp going back to
                    // one-token batches (without it, the method after recompute - speckv
                    // in three rounds of four - decoded its token 2-3x slower on a 1B model).
                    llama_memory_seq_rm(mem, 0, -1, -1);
                    decode(0, prompt.data(), 1, 0);
                }
            }
        }
        // memcpy of the same bytes, for scale
        std::vector<uint8_t> src(bytes_per ? bytes_per : 1, 1), dst(src.size());
        std::vector<double> t_mc;
        for (int r = 0; r < rounds; ++r) {
            auto t0 = clk::now();
            std::memcpy(dst.data(), src.data(), src.size());
            t_mc.push_back(ms_since(t0));
            src[r % src.size()] = dst[(r * 7) % dst.size()] + 1;
        }
        double re = median(t_re), hit = median(t_hit), ro = median(t_restore_only), mc = median(t_mc);
        if (!break_even && !skip_recompute && median(c_hit) < median(c_re)) break_even = L;
        std::fprintf(stderr, "L %zu: speckv_llama_restore alone: %.3f ms wall, %.3f ms CPU (median)\n", L,
                     median(t_restore_only), median(c_restore_only));
        std::fprintf(stderr, "L %zu: the one token's decode alone, CPU ms (median): after speckv %.3f, seq_cp %.3f, state file %.3f\n",
                     L, median(dec_hit), median(dec_cp), median(dec_file));
        std::printf("| %zu | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.0f | %.0f | %llu |\n", L, re,
                    median(c_re), hit, median(c_hit), median(t_cp), median(c_cp), median(t_file), median(c_file), bytes_per / 1e6 / (ro / 1e3), bytes_per / 1e6 / (mc / 1e3),
                    (unsigned long long)(bytes_per / (L ? L : 1)));
    }
    (void)0;
    if (break_even)
        std::printf("break-even (CPU time): speckv beats recompute from L = %zu tokens (smallest L measured where it does)\n", break_even);
    else
        std::printf("break-even: speckv never beats recompute at the lengths measured\n");
    unlink(file.c_str());
    speckv_llama_close(a);
    speckv_pool_close(pool);
    unlink(pool_path.c_str());
    llama_free(C);
    llama_model_free(M);
    return 0;
}
