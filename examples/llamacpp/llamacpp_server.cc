// SPDX-License-Identifier: Apache-2.0
// A small completion server on libllama with speckv as its prefix cache
// (examples/llamacpp/README.md). Several worker processes share one pool:
// a prompt whose prefix another worker (or a worker before a restart)
// computed is restored from speckv instead of recomputed.
//   llamacpp_server --model M.gguf --pool URI [--port P] [--workers N]
//                   [--distinct-ports] [--slots S] [--no-cache]
//                   [--config POOL.toml] [--codec]
// POST /v1/completions {"prompt": "...", "max_tokens": N}  (greedy)
// GET /health, GET /stats
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "ggml-backend.h"
#include "llama.h"
#include "speckv_llama.h"

namespace {

constexpr size_t kBlockTokens = 16;  // tokens per speckv block

struct Options {
    std::string model, pool = "file:llamacpp-example?size=1G", host = "127.0.0.1", config;
    int port = 8088, workers = 2, slots = 4, n_ctx_slot = 512;
    bool distinct_ports = false, cache = true, codec = false;
};

struct Result {
    std::string text;
    size_t prompt_tokens = 0, completion_tokens = 0, restored = 0;
    std::string error;
};

struct Request {
    std::vector<int32_t> prompt;
    int max_tokens = 16;
    std::promise<Result> done;
};

struct Slot {
    bool busy = false;
    std::shared_ptr<Request> req;
    std::vector<int32_t> tokens;  // prompt + generated; KV holds all but the last
    int generated = 0;
    size_t restored = 0;
    std::string text;
};

// --- JSON (nlohmann/json): request bodies in, responses out
using Json = nlohmann::ordered_json;  // keys in the order they are added
// Compact text; bytes that are not UTF-8 (a generated token can hold any) become U+FFFD.
std::string json_text(const Json &j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }
std::string json_error(const std::string &msg) { return json_text({{"error", {{"message", msg}}}}); }

class Engine {
public:
    Engine(const Options &o) : opt(o) {}
    bool start() {
        model = llama_model_load_from_file(opt.model.c_str(), llama_model_default_params());
        if (!model) return false;
        vocab = llama_model_get_vocab(model);
        llama_context_params cp = llama_context_default_params();
        cp.n_seq_max = opt.slots;
        cp.n_ctx = opt.slots * opt.n_ctx_slot;
        cp.n_batch = cp.n_ubatch = opt.n_ctx_slot;
        cp.n_threads = cp.n_threads_batch = 1;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        ctx = llama_init_from_model(model, cp);
        if (!ctx) return false;
        if (opt.cache) {
            speckv_config *cfg = nullptr;
            if (!opt.config.empty() &&
                (speckv_config_new(&cfg) != SPECKV_OK || speckv_config_load_toml(cfg, opt.config.c_str()) != SPECKV_OK)) {
                std::fprintf(stderr, "speckv config %s: %s\n", opt.config.c_str(), speckv_errmsg());
                speckv_config_free(cfg);
                return false;
            }
            int rc = speckv_pool_open(opt.pool.c_str(), cfg, &pool);
            speckv_config_free(cfg);
            if (rc != SPECKV_OK) {
                std::fprintf(stderr, "speckv pool %s: %s\n", opt.pool.c_str(), speckv_errmsg());
                return false;
            }
            speckv_llama_params p{};
            p.struct_size = sizeof p;
            p.tenant = 1;
            p.block_tokens = kBlockTokens;
            p.kv_desc = "f16/f16/fa=0";
            p.flags = opt.codec ? SPECKV_LLAMA_F_CODEC : 0;
            if (speckv_llama_model_id_file(opt.model.c_str(), p.model_id) != 0 ||
                speckv_llama_open(pool, ctx, &p, &cache) != 0)
                return false;
        }
        slots.resize(opt.slots);
        thread = std::thread([this] { loop(); });
        return true;
    }
    // Finishes the requests in flight, then closes the adapter, the pool and the context.
    void stop() {
        {
            std::lock_guard<std::mutex> g(mu);
            stopping = true;
        }
        cv.notify_one();
        if (thread.joinable()) thread.join();
        speckv_llama_close(cache);
        cache = nullptr;
        if (pool) speckv_pool_close(pool);
        pool = nullptr;
        llama_free(ctx);
        llama_model_free(model);
    }
    std::future<Result> submit(const std::string &prompt, int max_tokens) {
        auto r = std::make_shared<Request>();
        r->max_tokens = max_tokens;
        std::vector<int32_t> t(prompt.size() + 8);
        int n = llama_tokenize(vocab, prompt.c_str(), (int32_t)prompt.size(), t.data(), (int32_t)t.size(), true, false);
        t.resize(n > 0 ? n : 0);
        r->prompt = std::move(t);
        auto f = r->done.get_future();
        {
            std::lock_guard<std::mutex> g(mu);
            queue.push_back(r);
        }
        cv.notify_one();
        return f;
    }
    std::string stats_json() {
        std::lock_guard<std::mutex> g(stats_mu);
        return json_text({{"pid", (int)getpid()},
                          {"requests", (unsigned long long)requests},
                          {"restored_tokens", (unsigned long long)st.tokens_restored},
                          {"blocks_stored", (unsigned long long)st.blocks_stored},
                          {"blocks_present", (unsigned long long)st.blocks_present},
                          {"fallbacks", (unsigned long long)st.fallbacks},
                          {"bad_blocks", (unsigned long long)st.bad_blocks}});
    }

private:
    void finish(Slot &s, const std::string &err = "") {
        Result r;
        r.text = s.text;
        r.prompt_tokens = s.req->prompt.size();
        r.completion_tokens = s.generated;
        r.restored = s.restored;
        r.error = err;
        if (cache && err.empty()) {  // the prompt and what was decoded after it
            speckv_llama_store(cache, (int32_t)(&s - slots.data()), s.tokens.data(), s.tokens.size() - 1, nullptr);
        }
        llama_memory_seq_rm(llama_get_memory(ctx), (int32_t)(&s - slots.data()), -1, -1);
        s.req->done.set_value(r);
        s.busy = false;
        s.req.reset();
        std::lock_guard<std::mutex> g(stats_mu);
        requests++;
        if (cache) {
            st.struct_size = sizeof st;
            speckv_llama_stats_get(cache, &st);
        }
    }
    int argmax(int i) {
        const float *l = llama_get_logits_ith(ctx, i);
        int n = llama_vocab_n_tokens(vocab), best = 0;
        for (int k = 1; k < n; ++k)
            if (l[k] > l[best]) best = k;
        return best;
    }
    void emit(Slot &s, int tok) {
        char piece[64];
        int n = llama_token_to_piece(vocab, tok, piece, sizeof piece, 0, false);
        if (n > 0) s.text.append(piece, n);
        s.tokens.push_back(tok);
        s.generated++;
    }
    // Restore what the pool has, prefill the rest, first token.
    void admit(int32_t seq, std::shared_ptr<Request> r) {
        Slot &s = slots[seq];
        s.busy = true;
        s.req = r;
        s.tokens = r->prompt;
        s.generated = 0;
        s.text.clear();
        s.restored = 0;
        const size_t n = r->prompt.size();
        if (n == 0 || n + r->max_tokens > (size_t)opt.n_ctx_slot) return finish(s, "prompt empty or too long for a slot");
        if (cache && speckv_llama_restore(cache, seq, r->prompt.data(), n, &s.restored) != 0)
            s.restored = 0;  // an error (logged by the adapter's message) means: recompute
        llama_batch b = llama_batch_init((int32_t)(n - s.restored), 0, 1);
        for (size_t i = s.restored; i < n; ++i) {
            int k = b.n_tokens++;
            b.token[k] = r->prompt[i];
            b.pos[k] = (llama_pos)i;
            b.n_seq_id[k] = 1;
            b.seq_id[k][0] = seq;
            b.logits[k] = i + 1 == n;
        }
        int rc = llama_decode(ctx, b);
        llama_batch_free(b);
        if (rc != 0) return finish(s, "prefill failed");
        if (cache) speckv_llama_store(cache, seq, r->prompt.data(), n, nullptr);
        emit(s, argmax(-1));
        if (s.generated >= r->max_tokens || llama_vocab_is_eog(vocab, s.tokens.back())) finish(s);
    }
    void loop() {
        for (;;) {
            // admit waiting requests into free slots
            for (size_t i = 0; i < slots.size(); ++i) {
                if (slots[i].busy) continue;
                std::shared_ptr<Request> r;
                {
                    std::unique_lock<std::mutex> g(mu);
                    bool any = false;
                    for (auto &s : slots) any |= s.busy;
                    if (!any) cv.wait(g, [this] { return !queue.empty() || stopping; });
                    if (!any && stopping && queue.empty()) return;
                    if (queue.empty()) break;
                    r = queue.front();
                    queue.pop_front();
                }
                admit((int32_t)i, r);
            }
            // one decode step for every active sequence: the continuous batch
            llama_batch b = llama_batch_init((int32_t)slots.size(), 0, 1);
            std::vector<int> idx;
            for (size_t i = 0; i < slots.size(); ++i) {
                Slot &s = slots[i];
                if (!s.busy) continue;
                int k = b.n_tokens++;
                b.token[k] = s.tokens.back();
                b.pos[k] = (llama_pos)(s.tokens.size() - 1);
                b.n_seq_id[k] = 1;
                b.seq_id[k][0] = (int32_t)i;
                b.logits[k] = 1;
                idx.push_back((int)i);
            }
            if (b.n_tokens > 0) {
                int rc = llama_decode(ctx, b);
                for (size_t k = 0; k < idx.size(); ++k) {
                    Slot &s = slots[idx[k]];
                    if (rc != 0) {
                        finish(s, "decode failed");
                        continue;
                    }
                    emit(s, argmax((int)k));
                    if (s.generated >= s.req->max_tokens || llama_vocab_is_eog(vocab, s.tokens.back())) {
                        finish(s);
                        continue;
                    }
                    // Decode completed a block (the KV holds all tokens but the last):
                    // store it now, so another worker can restore it before this
                    // request ends (and a crash of this one does not lose it).
                    const size_t kv = s.tokens.size() - 1;
                    if (cache && kv % kBlockTokens == 0 && kv > s.req->prompt.size())
                        speckv_llama_store(cache, (int32_t)idx[k], s.tokens.data(), kv, nullptr);
                }
            }
            llama_batch_free(b);
        }
    }

    Options opt;
    llama_model *model = nullptr;
    const llama_vocab *vocab = nullptr;
    llama_context *ctx = nullptr;
    speckv_pool *pool = nullptr;
    speckv_llama *cache = nullptr;
    std::vector<Slot> slots;
    std::deque<std::shared_ptr<Request>> queue;
    std::mutex mu, stats_mu;
    std::condition_variable cv;
    std::thread thread;
    uint64_t requests = 0;
    speckv_llama_stats st{};
    bool stopping = false;
};

void quiet(ggml_log_level, const char *, void *) {}

int worker(const Options &o, int id) {
    llama_log_set(quiet, nullptr);
    ggml_backend_load_all_from_path(SPECKV_LLAMA_LIBDIR);
    llama_backend_init();
    Engine e(o);
    if (!e.start()) {
        std::fprintf(stderr, "worker %d: could not start\n", id);
        return 1;
    }
    httplib::Server svr;  // cpp-httplib sets SO_REUSEPORT: workers may share a port
    svr.Get("/health", [](const httplib::Request &, httplib::Response &res) {
        res.set_content(json_text({{"status", "ok"}}), "application/json");
    });
    svr.Get("/stats", [&](const httplib::Request &, httplib::Response &res) {
        res.set_content(e.stats_json(), "application/json");
    });
    svr.Post("/v1/completions", [&](const httplib::Request &req, httplib::Response &res) {
        Json body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
        if (body.is_discarded() || !body.is_object()) {
            res.status = 400;
            res.set_content(json_error("the request body must be one JSON object"), "application/json");
            return;
        }
        auto p = body.find("prompt");
        if (p == body.end() || !p->is_string()) {
            res.status = 400;
            res.set_content(json_error("a string \"prompt\" is required"), "application/json");
            return;
        }
        const std::string prompt = p->get<std::string>();
        long max_tokens = 16;
        if (auto m = body.find("max_tokens"); m != body.end()) max_tokens = m->is_number_integer() ? m->get<long>() : 0;
        if (max_tokens < 1 || max_tokens > 256) {
            res.status = 400;
            res.set_content(json_error("max_tokens must be 1..256"), "application/json");
            return;
        }
        Result r = e.submit(prompt, (int)max_tokens).get();
        if (!r.error.empty()) {
            res.status = 400;
            res.set_content(json_error(r.error), "application/json");
            return;
        }
        Json out = {{"object", "text_completion"},
                    {"model", o.model},
                    {"choices", Json::array({{{"index", 0}, {"text", r.text}, {"finish_reason", "length"}}})},
                    {"usage",
                     {{"prompt_tokens", r.prompt_tokens},
                      {"completion_tokens", r.completion_tokens},
                      {"total_tokens", r.prompt_tokens + r.completion_tokens}}},
                    {"speckv", {{"restored_tokens", r.restored}, {"worker", (int)getpid()}}}};
        res.set_content(json_text(out), "application/json");
    });
    // SIGTERM/SIGINT (blocked in every thread, inherited from main) stop the server cleanly.
    std::thread sigs([&svr] {
        sigset_t ss;
        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        int sig = 0;
        sigwait(&ss, &sig);
        svr.stop();
    });
    sigs.detach();
    int port = o.port + (o.distinct_ports ? id : 0);
    std::fprintf(stderr, "worker %d (pid %d) on %s:%d\n", id, (int)getpid(), o.host.c_str(), port);
    bool ok = svr.listen(o.host.c_str(), port);
    if (!ok) std::fprintf(stderr, "worker %d: cannot listen on %d\n", id, port);
    e.stop();
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    bool no_cache = false;
    CLI::App app{"A /v1/completions server on libllama with speckv as its prefix cache (examples/llamacpp/README.md)"};
    app.add_option("--model", o.model, "the GGUF model")->required();
    app.add_option("--pool", o.pool, "speckv pool URI");
    app.add_option("--host", o.host, "listen address");
    app.add_option("--port", o.port, "listen port (worker i listens on port + i with --distinct-ports)")
        ->check(CLI::Range(1, 65535));
    app.add_option("--workers", o.workers, "worker processes, 1..64");
    app.add_option("--slots", o.slots, "sequences per worker's batch, 1..64");
    app.add_flag("--distinct-ports", o.distinct_ports, "one port per worker instead of one shared port");
    app.add_flag("--no-cache", no_cache, "serve without speckv (the baseline)");
    app.add_option("--config", o.config, "pool settings (TOML, the keys of README's table), e.g. the codec's");
    app.add_flag("--codec", o.codec,
                 "store K and V as typed blocks so the pool's codec applies (SPECKV_LLAMA_F_CODEC; lossy unless "
                 "codec.key_mode/value_mode are raw)");
    CLI11_PARSE(app, argc, argv);
    o.cache = !no_cache;
    if (o.model.empty() || o.workers < 1 || o.workers > 64 || o.slots < 1 || o.slots > 64) {
        std::fprintf(stderr, "%s: --model is required; workers and slots 1..64\n", argv[0]);
        return 2;
    }
    // The parent forwards SIGTERM/SIGINT to the workers and waits for them;
    // a worker that exits stops the server.
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGINT);
    sigaddset(&ss, SIGCHLD);
    sigprocmask(SIG_BLOCK, &ss, nullptr);
    std::vector<pid_t> kids;
    for (int w = 0; w < o.workers; ++w) {
        pid_t p = fork();
        if (p == 0) _exit(worker(o, w));  // signals stay blocked: the worker sigwaits
        kids.push_back(p);
    }
    int sig = 0;
    sigwait(&ss, &sig);
    for (pid_t p : kids) kill(p, SIGTERM);
    int failed = 0;
    for (pid_t p : kids) {
        int st = 0;
        waitpid(p, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;  // e.g. a worker that could not start
    }
    return failed;
}
