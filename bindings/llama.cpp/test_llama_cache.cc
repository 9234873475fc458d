// SPDX-License-Identifier: Apache-2.0
// Tests of the llama.cpp adapter (label llama) on stories260K.gguf:
//   llama_cache_test CASE MODEL.gguf TMPDIR
// CASE: identity identity_fa sharing wrong_model kv_type forged corrupt bad_input evict l4,
// kill SPECKV_CLI (and `child`, `worker`: processes the others start). Exit 0 pass, 1 fail.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"
#include "speckv_llama.h"

namespace {

int g_fail = 0;
#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            g_fail = 1;                                                           \
        }                                                                         \
    } while (0)
#define REQUIRE(c)                                                                \
    do {                                                                          \
        if (!(c)) {                                                               \
            std::fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #c); \
            std::exit(1);                                                         \
        }                                                                         \
    } while (0)

#define COMMON_START \
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her " \
    "mom and dad. Every morning she would wake up early, eat her breakfast and run to the window to see the sun. "
const char *kText1 =
    COMMON_START
    "friend Tom. One day, they saw a big red ball under a tree. Lily said, \"Let's play with the ball!\"";
const char *kText2 =
    COMMON_START
    "dog Max. Max was a happy dog who liked to run and jump. One day, Max found a stick";
constexpr int kGen = 24;
constexpr uint32_t kBlock = 16;

std::string g_model;
bool g_fa = false;  // flash attention: V rows not transposed in the state
llama_model *g_m = nullptr;

void quiet(ggml_log_level level, const char *text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR && std::getenv("SPECKV_LLAMA_TEST_VERBOSE")) std::fputs(text, stderr);
}

void init(const std::string &model) {
    g_model = model;
    llama_log_set(quiet, nullptr);
    ggml_backend_load_all_from_path(SPECKV_LLAMA_LIBDIR);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    g_m = llama_model_load_from_file(model.c_str(), mp);
    REQUIRE(g_m);
}

llama_context *new_ctx(uint32_t n_ctx = 512, uint32_t n_seq = 2, ggml_type tk = GGML_TYPE_F16) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_seq_max = n_seq;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn_type = g_fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = tk;
    llama_context *c = llama_init_from_model(g_m, cp);
    REQUIRE(c);
    return c;
}

std::vector<int32_t> tokenize(const char *text) {
    const llama_vocab *v = llama_model_get_vocab(g_m);
    std::vector<int32_t> t(std::strlen(text) + 8);
    int n = llama_tokenize(v, text, (int32_t)std::strlen(text), t.data(), (int32_t)t.size(), true, false);
    REQUIRE(n > 0);
    t.resize(n);
    return t;
}

void decode(llama_context *c, int32_t seq, const int32_t *tok, size_t n, size_t pos0) {
    llama_batch b = llama_batch_init((int32_t)n, 0, 1);
    for (size_t i = 0; i < n; ++i) {
        b.token[i] = tok[i];
        b.pos[i] = (llama_pos)(pos0 + i);
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq;
        b.logits[i] = i + 1 == n;
    }
    b.n_tokens = (int32_t)n;
    REQUIRE(llama_decode(c, b) == 0);
    llama_batch_free(b);
}

int argmax(llama_context *c) {
    const float *l = llama_get_logits_ith(c, -1);
    int n = llama_vocab_n_tokens(llama_model_get_vocab(g_m)), best = 0;
    for (int i = 1; i < n; ++i)
        if (l[i] > l[best]) best = i;
    return best;
}

// One request: restore (when a != NULL), prefill the rest, store, then greedy decode.
std::vector<int> run(llama_context *c, speckv_llama *a, int32_t seq, const std::vector<int32_t> &p, size_t *restored) {
    llama_memory_seq_rm(llama_get_memory(c), seq, -1, -1);
    size_t r = 0;
    if (a) {
        int rc = speckv_llama_restore(a, seq, p.data(), p.size(), &r);
        if (rc) std::fprintf(stderr, "restore: %d %s\n", rc, speckv_llama_errmsg(a));
        REQUIRE(rc == 0);
    }
    if (restored) *restored = r;
    decode(c, seq, p.data() + r, p.size() - r, r);
    if (a) {
        int rc = speckv_llama_store(a, seq, p.data(), p.size(), nullptr);
        if (rc) std::fprintf(stderr, "store: %d %s\n", rc, speckv_llama_errmsg(a));
        REQUIRE(rc == 0);
    }
    std::vector<int> out;
    for (int i = 0; i < kGen; ++i) {
        int t = argmax(c);
        out.push_back(t);
        decode(c, seq, &t, 1, p.size() + i);
    }
    llama_memory_seq_rm(llama_get_memory(c), seq, -1, -1);
    return out;
}

speckv_pool *open_pool(const std::string &path, bool fresh) {
    if (fresh) unlink(path.c_str());
    speckv_pool *p = nullptr;
    int rc = speckv_pool_open(("file:" + path + "?size=64M").c_str(), nullptr, &p);
    if (rc) std::fprintf(stderr, "pool_open %s: %s %s\n", path.c_str(), speckv_strerror(rc), speckv_errmsg());
    REQUIRE(rc == 0);
    return p;
}

speckv_llama_params params(const char *kv = nullptr) {
    if (!kv) kv = g_fa ? "f16/f16/fa=1" : "f16/f16/fa=0";
    speckv_llama_params pr{};
    pr.struct_size = sizeof pr;
    pr.tenant = 7;
    pr.block_tokens = kBlock;
    REQUIRE(speckv_llama_model_id_file(g_model.c_str(), pr.model_id) == 0);
    pr.kv_desc = kv;
    return pr;
}

speckv_llama *open_adapter(speckv_pool *p, llama_context *c, const speckv_llama_params &pr) {
    speckv_llama *a = nullptr;
    REQUIRE(speckv_llama_open(p, c, &pr, &a) == 0);
    return a;
}

speckv_llama_stats stats(speckv_llama *a) {
    speckv_llama_stats s{};
    s.struct_size = sizeof s;
    REQUIRE(speckv_llama_stats_get(a, &s) == 0);
    return s;
}

speckv_pool_stats pstats(speckv_pool *p) {
    speckv_pool_stats s{};
    s.struct_size = sizeof s;
    REQUIRE(speckv_stats(p, &s) == 0);
    return s;
}

std::string join(const std::vector<int> &v) {
    std::string s;
    for (int t : v) s += std::to_string(t) + " ";
    return s;
}

size_t expect_restore(size_t n) { return (n - 1) / kBlock * kBlock; }

int case_child(const std::string &pool_path) {
    // Another process: restore from the pool, print "restored generated...".
    llama_context *c = new_ctx();
    speckv_pool *p = open_pool(pool_path, false);
    speckv_llama *a = open_adapter(p, c, params());
    auto prompt = tokenize(kText1);
    size_t r = 0;
    auto out = run(c, a, 1, prompt, &r);
    std::printf("%zu %s\n", r, join(out).c_str());
    speckv_llama_close(a);
    speckv_pool_close(p);
    llama_free(c);
    return 0;
}

int case_identity(const std::string &tmp, const char *self) {
    const std::string pool_path = tmp + (g_fa ? "/identity_fa.pool" : "/identity.pool");
    auto prompt = tokenize(kText1);
    REQUIRE(prompt.size() > 3 * kBlock);
    llama_context *c = new_ctx();
    auto base = run(c, nullptr, 0, prompt, nullptr);  // cache off
    std::printf("prompt %zu tokens; greedy: %s\n", prompt.size(), join(base).c_str());

    speckv_pool *p = open_pool(pool_path, true);
    speckv_llama *a = open_adapter(p, c, params());
    size_t r = 99;
    auto cold = run(c, a, 0, prompt, &r);
    CHECK(r == 0);
    CHECK(cold == base);
    CHECK(stats(a).blocks_stored == prompt.size() / kBlock);

    auto warm = run(c, a, 1, prompt, &r);  // same process, another sequence
    std::printf("warm: restored %zu\n", r);
    CHECK(r == expect_restore(prompt.size()));
    CHECK(warm == base);
    CHECK(stats(a).tokens_restored == r);
    CHECK(stats(a).blocks_stored == prompt.size() / kBlock);  // nothing stored twice

    // Another process.
    std::string cmd = std::string(self) + (g_fa ? " child_fa " : " child ") + g_model + " " + tmp + " " + pool_path;
    FILE *f = popen(cmd.c_str(), "r");
    REQUIRE(f);
    char line[4096] = {0};
    REQUIRE(std::fgets(line, sizeof line, f));
    CHECK(pclose(f) == 0);
    std::string want = std::to_string(expect_restore(prompt.size())) + " " + join(base) + "\n";
    std::printf("child: %s", line);
    CHECK(want == line);

    // Pool closed and reopened (the blocks live in the file).
    speckv_llama_close(a);
    CHECK(speckv_pool_close(p) == 0);
    p = open_pool(pool_path, false);
    a = open_adapter(p, c, params());
    auto reopened = run(c, a, 0, prompt, &r);
    CHECK(r == expect_restore(prompt.size()));
    CHECK(reopened == base);
    CHECK(stats(a).fallbacks == 0 && stats(a).bad_blocks == 0);
    speckv_llama_close(a);
    speckv_pool_close(p);
    llama_free(c);
    return g_fail;
}

int case_sharing(const std::string &tmp) {
    auto p1 = tokenize(kText1), p2 = tokenize(kText2);
    size_t common = 0;
    while (common < p1.size() && common < p2.size() && p1[common] == p2[common]) ++common;
    const size_t shared_blocks = common / kBlock;
    std::printf("prompts %zu and %zu tokens, %zu in common (%zu blocks)\n", p1.size(), p2.size(), common,
                shared_blocks);
    REQUIRE(shared_blocks >= 3);
    llama_context *c = new_ctx();
    speckv_pool *p = open_pool(tmp + "/sharing.pool", true);
    speckv_llama *a = open_adapter(p, c, params());
    auto base2 = run(c, nullptr, 0, p2, nullptr);
    const uint64_t before = pstats(p).shared_bytes;
    run(c, a, 0, p1, nullptr);
    const uint64_t after1 = pstats(p).shared_bytes;
    const uint64_t per_block = (after1 - before) / (p1.size() / kBlock);
    CHECK((after1 - before) % (p1.size() / kBlock) == 0);
    size_t r = 0;
    auto out2 = run(c, a, 1, p2, &r);
    const uint64_t after2 = pstats(p).shared_bytes;
    std::printf("pool bytes: +%llu after prompt 1, +%llu after prompt 2 (%llu per block); restored %zu of prompt 2\n",
                (unsigned long long)(after1 - before), (unsigned long long)(after2 - after1),
                (unsigned long long)per_block, r);
    CHECK(r == shared_blocks * kBlock);
    CHECK(out2 == base2);
    // Prompt 2 adds only its blocks that prompt 1 does not have.
    CHECK(after2 - after1 == per_block * (p2.size() / kBlock - shared_blocks));
    CHECK(pstats(p).blocks_published == p1.size() / kBlock + p2.size() / kBlock - shared_blocks);
    CHECK(stats(a).blocks_present == shared_blocks);
    speckv_llama_close(a);
    speckv_pool_close(p);
    llama_free(c);
    return g_fail;
}

int case_wrong_model(const std::string &tmp) {
    auto prompt = tokenize(kText1);
    llama_context *c = new_ctx();
    speckv_pool *p = open_pool(tmp + "/wrong_model.pool", true);
    speckv_llama *a = open_adapter(p, c, params());
    run(c, a, 0, prompt, nullptr);
    // Another model id (the id of another file), another KV description, another tenant: no hit.
    speckv_llama_params other = params();
    REQUIRE(speckv_llama_model_id_file((g_model.substr(0, g_model.rfind('/')) + "/tok512.bin").c_str(),
                                       other.model_id) == 0);
    speckv_llama_params kv = params("q8_0/f16/fa=0");
    speckv_llama_params ten = params();
    ten.tenant = 8;
    for (auto *pr : {&other, &kv, &ten}) {
        speckv_llama *b = open_adapter(p, c, *pr);
        size_t r = 99;
        run(c, b, 1, prompt, &r);
        CHECK(r == 0);
        speckv_llama_close(b);
    }
    // and the right one does hit
    size_t r = 0;
    run(c, a, 1, prompt, &r);
    CHECK(r == expect_restore(prompt.size()));
    speckv_llama_close(a);
    speckv_pool_close(p);
    llama_free(c);
    return g_fail;
}

int case_kv_type(const std::string &tmp) {
    // A pool written with an f16 K cache, read by a q8_0 K cache context whose
    // engine (wrongly) claims the same kv_desc: llama.cpp's own type and row
    // size checks refuse the state; the adapter falls back and counts it.
    auto prompt = tokenize(kText1);
    llama_context *c16 = new_ctx();
    llama_context *c8 = new_ctx(512, 2, GGML_TYPE_Q8_0);
    speckv_pool *p = open_pool(tmp + "/kv_type.pool", true);
    speckv_llama *a = open_adapter(p, c16, params());
    run(c16, a, 0, prompt, nullptr);
    auto base8 = run(c8, nullptr, 0, prompt, nullptr);
    speckv_llama *b = open_adapter(p, c8, params());
    size_t r = 99;
    auto out = run(c8, b, 0, prompt, &r);
    CHECK(r == 0);
    CHECK(stats(b).fallbacks == 1);
    CHECK(out == base8);
    std::printf("q8_0 context over f16 blocks: restored %zu, fallbacks %llu (%s)\n", r,
                (unsigned long long)stats(b).fallbacks, speckv_llama_errmsg(b));
    speckv_llama_close(a);
    speckv_llama_close(b);
    speckv_pool_close(p);
    llama_free(c16);
    llama_free(c8);
    return g_fail;
}

int case_forged(const std::string &tmp) {
    // A block published under the right key whose bytes are not a valid block
    // (a writer bug, or another adapter version): rejected, counted, recomputed.
    auto prompt = tokenize(kText1);
    llama_context *c = new_ctx();
    auto base = run(c, nullptr, 0, prompt, nullptr);
    speckv_pool *p = open_pool(tmp + "/forged.pool", true);
    speckv_llama *a = open_adapter(p, c, params());
    uint8_t key[SPECKV_HASH_BYTES];
    REQUIRE(speckv_llama_block_keys(a, prompt.data(), prompt.size(), key, 1) == 1);
    std::vector<uint8_t> junk(4000, 0x5a);
    speckv_hint h{};
    h.struct_size = sizeof h;
    h.tenant = 7;
    speckv_handle hd = 0;
    REQUIRE(speckv_alloc(p, junk.size(), SPECKV_DTYPE_OPAQUE, &h, &hd) == 0);
    REQUIRE(speckv_write(p, hd, 0, junk.data(), junk.size()) == 0);
    REQUIRE(speckv_publish(p, hd, key, nullptr) == 0);
    size_t r = 99;
    auto out = run(c, a, 0, prompt, &r);
    CHECK(r == 0);
    CHECK(stats(a).bad_blocks == 1);
    CHECK(out == base);
    std::printf("forged block 0: restored %zu, bad_blocks %llu (%s)\n", r, (unsigned long long)stats(a).bad_blocks,
                speckv_llama_errmsg(a));
    speckv_llama_close(a);
    speckv_pool_close(p);
    llama_free(c);
    return g_fail;
}

int case_corrupt(const std::string &tmp) {
    // A stored block's bytes flipped in the pool file: the pool's checksum
    // catches it, the adapter restores only the blocks before it.
    const std::string path = tmp + "/corrupt.pool";
    auto prompt = tokenize(kText1);
    llama_context *c = new_ctx();
    auto base = run(c, nullptr, 0, prompt, nullptr);
    speckv_pool *p = open_pool(path, true);
    speckv_llama *a = open_adapter(p, c, params());
    run(c, a, 0, prompt, nullptr);
    speckv_llama_close(a);
    REQUIRE(speckv_pool_close(p) == 0);
    // Find block 1 (its header names block_index 1) and flip a payload byte.
    int fd = open(path.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    struct stat sb;
    REQUIRE(fstat(fd, &sb) == 0);
    std::vector<uint8_t> img(sb.st_size);
    REQUIRE(pread(fd, img.data(), img.size(), 0) == (ssize_t)img.size());
    size_t at = 0;
    for (size_t i = 0; i + 72 < img.size() && !at; ++i)
        if (std::memcmp(&img[i], "SKVLLAM1", 8) == 0) {
            uint64_t idx;
            std::memcpy(&idx, &img[i + 32], 8);
            if (idx == 1) at = i;
        }
    REQUIRE(at);
    uint8_t byte = img[at + 600] ^ 0x01;
    REQUIRE(pwrite(fd, &byte, 1, at + 600) == 1);
    close(fd);
    p = open_pool(path, false);
    a = open_adapter(p, c, params());
    size_t r = 99;
    auto out = run(c, a, 0, prompt, &r);
    std::printf("block 1 corrupted: restored %zu, bad_blocks %llu (%s)\n", r, (unsigned long long)stats(a).bad_blocks,
                speckv_llama_errmsg(a));
    CHECK(r == kBlock);  // block 0 only
    CHECK(stats(a).bad_blocks == 1);
    CHECK(out == base);
    speckv_llama_close(a);
    speckv_pool_close(p);
    llama_free(c);
    return g_fail;
}

int case_bad_input(const std::string &tmp) {
    auto prompt = tokenize(kText1);
    llama_context *small = new_ctx(64, 1);
    speckv_pool *p = open_pool(tmp + "/bad_input.pool", true);
    speckv_llama *a = open_adapter(p, small, params());
    size_t r = 0;
    std::vector<int32_t> longp;
    while (longp.size() <= llama_n_ctx_seq(small)) longp.insert(longp.end(), prompt.begin(), prompt.end());
    int rc = speckv_llama_restore(a, 0, longp.data(), longp.size(), &r);
    std::printf("context too small: %d (%s)\n", rc, speckv_llama_errmsg(a));
    CHECK(rc == SPECKV_LLAMA_ECTX);
    rc = speckv_llama_restore(a, 5, prompt.data(), 10, &r);
    std::printf("bad seq id: %d (%s)\n", rc, speckv_llama_errmsg(a));
    CHECK(rc == SPECKV_LLAMA_EINVAL);
    CHECK(speckv_llama_restore(a, -1, prompt.data(), 10, &r) == SPECKV_LLAMA_EINVAL);
    CHECK(speckv_llama_store(a, 3, prompt.data(), 10, nullptr) == SPECKV_LLAMA_EINVAL);
    CHECK(speckv_llama_restore(a, 0, nullptr, 10, &r) == SPECKV_LLAMA_EINVAL);
    CHECK(speckv_llama_restore(nullptr, 0, prompt.data(), 10, &r) == SPECKV_LLAMA_EINVAL);
    // store of tokens the sequence does not hold
    rc = speckv_llama_store(a, 0, prompt.data(), 40, nullptr);
    std::printf("store of an empty sequence: %d (%s)\n", rc, speckv_llama_errmsg(a));
    CHECK(rc == SPECKV_LLAMA_EINVAL);
    // restore into a sequence in use
    decode(small, 0, prompt.data(), 40, 0);
    rc = speckv_llama_restore(a, 0, prompt.data(), 40, &r);
    std::printf("sequence in use: %d (%s)\n", rc, speckv_llama_errmsg(a));
    CHECK(rc == SPECKV_LLAMA_EBUSY);
    CHECK(llama_memory_seq_pos_max(llama_get_memory(small), 0) == 39);  // untouched
    speckv_llama_params bad = params();
    bad.struct_size = 3;
    speckv_llama *x = nullptr;
    CHECK(speckv_llama_open(p, small, &bad, &x) == SPECKV_LLAMA_EINVAL && !x);
    CHECK(speckv_llama_model_id_file("/nonexistent/model.gguf", bad.model_id) == SPECKV_LLAMA_EINVAL);
    // the pool is intact
    CHECK(pstats(p).blocks_live == 0);
    speckv_llama_close(a);
    speckv_pool_close(p);
    llama_free(small);
    return g_fail;
}

// 60 random prompts of 129 tokens (8 blocks of 10.5 KB each: 5 MB in all).
std::vector<std::vector<int32_t>> random_prompts(uint64_t x) {
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 60; ++i) {
        std::vector<int32_t> q;
        for (int k = 0; k < 129; ++k) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            q.push_back((int32_t)(3 + x % 500));
        }
        prompts.push_back(q);
    }
    return prompts;
}

// Prefills each prompt in sequence 0 and stores its blocks (every store must succeed).
void store_all(llama_context *c, speckv_llama *a, const std::vector<std::vector<int32_t>> &prompts) {
    for (auto &q : prompts) {
        llama_memory_seq_rm(llama_get_memory(c), 0, -1, -1);
        decode(c, 0, q.data(), q.size(), 0);
        int rc = speckv_llama_store(a, 0, q.data(), q.size(), nullptr);
        if (rc) std::fprintf(stderr, "store: %s\n", speckv_llama_errmsg(a));
        REQUIRE(rc == 0);
    }
}

// A pool too small for every prompt: stores evict the least recently used
// unreferenced blocks instead of failing; what is still there restores, what
// was evicted is recomputed; outputs never change.
int case_evict(const std::string &tmp) {
    llama_context *c = new_ctx();
    auto base_prompt = tokenize(kText1);
    unlink((tmp + "/evict.pool").c_str());
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + tmp + "/evict.pool?size=4M").c_str(), nullptr, &p) == 0);
    speckv_llama *a = open_adapter(p, c, params());
    auto prompts = random_prompts(12345);
    auto first_base = run(c, nullptr, 0, prompts[0], nullptr);
    auto last_base = run(c, nullptr, 0, prompts.back(), nullptr);
    store_all(c, a, prompts);
    speckv_pool_stats ps = pstats(p);
    size_t r_last = 0, r_first = 0;
    CHECK(run(c, a, 0, prompts.back(), &r_last) == last_base);
    CHECK(run(c, a, 0, prompts[0], &r_first) == first_base);
    std::printf("4 MB pool, 480 blocks stored: %llu evictions, %llu published now; last prompt restored %zu, "
                "first %zu\n",
                (unsigned long long)ps.evictions, (unsigned long long)ps.blocks_published, r_last, r_first);
    CHECK(ps.evictions > 0);
    CHECK(r_last == 128);                      // the most recent blocks are there
    CHECK(r_first < 128);                      // the oldest were evicted (least recently used first)
    CHECK(stats(a).bad_blocks == 0 && stats(a).fallbacks == 0);
    speckv_llama_close(a);
    speckv_pool_close(p);
    llama_free(c);
    return g_fail;
}

// The L4 tier under the adapter: a 4 MB pool with `cold.path` set takes 5 MB
// of blocks by demoting the coldest to the L4 file instead of evicting them,
// and a restore of the oldest prompt promotes its blocks back: the whole
// prefix is restored and the greedy output is the uncached one.
int case_l4(const std::string &tmp) {
    llama_context *c = new_ctx();
    const std::string pool_path = tmp + "/l4.pool", cold_path = tmp + "/l4.cold";
    unlink(pool_path.c_str());
    unlink(cold_path.c_str());
    speckv_config *cfg = nullptr;
    REQUIRE(speckv_config_new(&cfg) == 0);
    REQUIRE(speckv_config_set_str(cfg, "cold.path", cold_path.c_str()) == 0);
    // A block in L4 keeps its slot: enough slots for all 480 blocks, pages for 128.
    REQUIRE(speckv_config_set_int(cfg, "pool.max_blocks", 1024) == 0);
    speckv_pool *p = nullptr;
    int rc = speckv_pool_open(("file:" + pool_path + "?size=4M").c_str(), cfg, &p);
    if (rc) std::fprintf(stderr, "pool_open: %s %s\n", speckv_strerror(rc), speckv_errmsg());
    REQUIRE(rc == 0);
    speckv_config_free(cfg);
    speckv_llama *a = open_adapter(p, c, params());
    auto prompts = random_prompts(777);
    auto first_base = run(c, nullptr, 0, prompts[0], nullptr);
    auto last_base = run(c, nullptr, 0, prompts.back(), nullptr);
    store_all(c, a, prompts);
    speckv_pool_stats before = pstats(p);
    size_t r_last = 0, r_first = 0;
    CHECK(run(c, a, 0, prompts.back(), &r_last) == last_base);
    CHECK(run(c, a, 0, prompts[0], &r_first) == first_base);
    speckv_pool_stats after = pstats(p);
    std::printf("4 MB pool + L4, 480 blocks stored: %llu demotions, %llu in L4, %llu evictions; restored last %zu, "
                "first %zu; %llu promotions\n",
                (unsigned long long)before.l4_demotions, (unsigned long long)before.l4_blocks,
                (unsigned long long)before.evictions, r_last, r_first, (unsigned long long)after.l4_promotions);
    CHECK(before.l4_demotions > 0);          // the pool overflowed into L4 ...
    CHECK(before.evictions == 0);            // ... instead of dropping blocks
    CHECK(r_last == 128 && r_first == 128);  // every prompt is still whole
    CHECK(after.l4_promotions > before.l4_promotions);  // the oldest came back from L4
    CHECK(stats(a).bad_blocks == 0 && stats(a).fallbacks == 0);
    speckv_llama_close(a);
    speckv_pool_close(p);
    llama_free(c);
    return g_fail;
}

// SPECKV_LLAMA_F_CODEC: each block is a header block plus its K and V rows as
// typed blocks hinted KEYS / VALUES. With the pool's codec at `raw` (its
// default) the split form restores exactly, also into an adapter without the
// flag; with lossy presets the pool stores fewer bytes and the prefix is still
// restored whole, never counted bad.
speckv_pool *open_codec_pool(const std::string &path, const char *kmode, const char *vmode) {
    unlink(path.c_str());
    speckv_config *cfg = nullptr;
    REQUIRE(speckv_config_new(&cfg) == 0);
    if (kmode) REQUIRE(speckv_config_set_str(cfg, "codec.key_mode", kmode) == 0);
    if (vmode) REQUIRE(speckv_config_set_str(cfg, "codec.value_mode", vmode) == 0);
    // The codec's scales group by channel: one K/V row of the model (docs/llamacpp.md "The codec").
    const int64_t kv_width =
        (int64_t)llama_model_n_embd(g_m) / llama_model_n_head(g_m) * llama_model_n_head_kv(g_m);
    REQUIRE(speckv_config_set_int(cfg, "codec.channels", kv_width) == 0);
    speckv_pool *p = nullptr;
    int rc = speckv_pool_open(("file:" + path + "?size=64M").c_str(), cfg, &p);
    if (rc) std::fprintf(stderr, "pool_open: %s %s\n", speckv_strerror(rc), speckv_errmsg());
    REQUIRE(rc == 0);
    speckv_config_free(cfg);
    return p;
}

int case_codec(const std::string &tmp) {
    llama_context *c = new_ctx(), *c2 = new_ctx();
    const auto prompt = tokenize(kText1);
    const size_t nb = prompt.size() / kBlock, want = expect_restore(prompt.size());
    const auto base = run(c, nullptr, 0, prompt, nullptr);
    speckv_llama_params pc = params();
    pc.flags = SPECKV_LLAMA_F_CODEC;
    for (int lossy = 0; lossy < 2; ++lossy) {
        speckv_pool *p = open_codec_pool(tmp + "/codec.pool", lossy ? "k8" : nullptr, lossy ? "v8" : nullptr);
        speckv_llama *w = open_adapter(p, c, pc);
        // The reader: without the flag in the exact case (it reads either form), with it otherwise.
        speckv_llama *r = open_adapter(p, c2, lossy ? pc : params());
        size_t got = 1;
        CHECK(run(c, w, 0, prompt, &got) == base);  // a cold cache: computed, then stored
        CHECK(got == 0);
        speckv_pool_stats ps = pstats(p);
        CHECK(ps.blocks_published == 3 * nb);  // header, K and V per block
        CHECK(stats(w).blocks_stored == nb);
        std::vector<int> out = run(c2, r, 0, prompt, &got);
        CHECK(got == want);
        CHECK(stats(r).bad_blocks == 0 && stats(r).fallbacks == 0);
        size_t same = 0;
        while (same < out.size() && out[same] == base[same]) ++same;
        std::printf("%s: %zu blocks as %llu pool blocks; %llu pages coded, %llu -> %llu bytes; restored %zu tokens; "
                    "greedy output equal for %zu of %d tokens\n",
                    lossy ? "k8/v8" : "raw", nb, (unsigned long long)ps.blocks_published,
                    (unsigned long long)ps.codec_pages_encoded, (unsigned long long)ps.codec_raw_bytes,
                    (unsigned long long)ps.codec_stored_bytes, got, same, kGen);
        if (!lossy) {
            CHECK(out == base);  // the split form is exact
            CHECK(ps.codec_stored_bytes == ps.codec_raw_bytes);
        } else {
            CHECK(ps.codec_pages_encoded > 0);
            CHECK(ps.codec_stored_bytes < ps.codec_raw_bytes);
            CHECK(same >= 1);  // 8-bit K and V keep at least the first greedy token (21 of 24 here)
        }
        // A second store of the same prompt finds all three pieces present and adds nothing.
        decode(c, 0, prompt.data(), prompt.size(), 0);
        size_t stored = 99;
        CHECK(speckv_llama_store(w, 0, prompt.data(), prompt.size(), &stored) == 0 && stored == 0);
        CHECK(pstats(p).blocks_published == 3 * nb);
        llama_memory_seq_rm(llama_get_memory(c), 0, -1, -1);
        speckv_llama_close(r);
        speckv_llama_close(w);
        speckv_pool_close(p);
    }
    // A caller built before `flags` existed passes the shorter struct; an unknown flag is refused.
    speckv_pool *p = open_pool(tmp + "/codec.pool", true);
    speckv_llama_params old = params();
    old.struct_size = offsetof(speckv_llama_params, flags);
    speckv_llama *a = nullptr;
    CHECK(speckv_llama_open(p, c, &old, &a) == 0);
    speckv_llama_close(a);
    speckv_llama_params bad = params();
    bad.flags = 0x80;
    a = nullptr;
    CHECK(speckv_llama_open(p, c, &bad, &a) == SPECKV_LLAMA_EINVAL && a == nullptr);
    speckv_pool_close(p);
    llama_free(c2);
    llama_free(c);
    return g_fail;
}

// A worker: iterations of a new prompt (kText1 + its own suffix: new blocks to
// store) and, every 4th, kText1 itself, whose greedy output must equal the
// uncached one. Exit 0 if it always did.
int case_worker(const std::string &pool_path, int id) {
    llama_context *c = new_ctx();
    auto prompt = tokenize(kText1);
    auto base = run(c, nullptr, 0, prompt, nullptr);
    speckv_pool *p = open_pool(pool_path, false);
    speckv_llama *a = open_adapter(p, c, params());
    uint64_t x = 0x9e3779b97f4a7c15ull * (id + 1);
    for (int it = 0; it < 40; ++it) {
        std::vector<int32_t> q = prompt;
        for (int k = 0; k < 64; ++k) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            q.push_back((int32_t)(3 + x % 500));
        }
        size_t r = 0;
        llama_memory_seq_rm(llama_get_memory(c), 0, -1, -1);
        REQUIRE(speckv_llama_restore(a, 0, q.data(), q.size(), &r) == 0);
        decode(c, 0, q.data() + r, q.size() - r, r);
        REQUIRE(speckv_llama_store(a, 0, q.data(), q.size(), nullptr) == 0);
        if (it % 4 == 3 && run(c, a, 1, prompt, nullptr) != base) {
            std::fprintf(stderr, "worker %d: output differs at iteration %d\n", id, it);
            return 1;
        }
    }
    speckv_llama_close(a);
    speckv_pool_close(p);
    llama_free(c);
    return 0;
}

int case_kill(const std::string &tmp, const char *self, const char *cli) {
    // Two workers on one pool; one is SIGKILLed while storing. The other keeps
    // serving identical output; afterwards restores are whole and
    // `speckv pool check` finds the pool clean.
    const std::string path = tmp + "/kill.pool";
    auto prompt = tokenize(kText1);
    llama_context *c = new_ctx();
    auto base = run(c, nullptr, 0, prompt, nullptr);
    speckv_pool_close(open_pool(path, true));
    const int delays_ms[] = {120, 250, 400};
    for (int round = 0; round < 3; ++round) {
        pid_t pid[2];
        for (int w = 0; w < 2; ++w) {
            pid[w] = fork();
            REQUIRE(pid[w] >= 0);
            if (pid[w] == 0) {
                std::string id = std::to_string(round * 2 + w);
                execl(self, self, "worker", g_model.c_str(), tmp.c_str(), path.c_str(), id.c_str(), (char *)nullptr);
                _exit(127);
            }
        }
        usleep(delays_ms[round] * 1000);
        kill(pid[0], SIGKILL);
        int st0 = 0, st1 = 0;
        waitpid(pid[0], &st0, 0);
        waitpid(pid[1], &st1, 0);
        std::printf("round %d: killed worker after %d ms (%s); survivor exit %d\n", round, delays_ms[round],
                    WIFSIGNALED(st0) ? "killed" : "had finished", WIFEXITED(st1) ? WEXITSTATUS(st1) : -1);
        CHECK(WIFEXITED(st1) && WEXITSTATUS(st1) == 0);
    }
    speckv_pool *p = open_pool(path, false);
    speckv_llama *a = open_adapter(p, c, params());
    size_t r = 0;
    auto out = run(c, a, 0, prompt, &r);
    CHECK(r == expect_restore(prompt.size()));
    CHECK(out == base);
    CHECK(stats(a).bad_blocks == 0 && stats(a).fallbacks == 0);
    std::printf("after the kills: restored %zu, %llu blocks published\n", r,
                (unsigned long long)pstats(p).blocks_published);
    speckv_llama_close(a);
    speckv_pool_close(p);
    std::string cmd = std::string(cli) + " pool check --quiet file:" + path;
    int rc = std::system(cmd.c_str());
    std::printf("%s: exit %d\n", cmd.c_str(), WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    llama_free(c);
    return g_fail;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s CASE MODEL.gguf TMPDIR\n", argv[0]);
        return 2;
    }
    std::string cs = argv[1], tmp = argv[3];
    mkdir(tmp.c_str(), 0755);
    init(argv[2]);
    int rc;
    if (cs == "child") rc = case_child(argv[4]);
    else if (cs == "child_fa") {
        g_fa = true;
        rc = case_child(argv[4]);
    }
    else if (cs == "worker") rc = case_worker(argv[4], std::atoi(argv[5]));
    else if (cs == "kill") rc = argc > 4 ? case_kill(tmp, argv[0], argv[4]) : 2;
    else if (cs == "identity") rc = case_identity(tmp, argv[0]);
    else if (cs == "evict") rc = case_evict(tmp);
    else if (cs == "l4") rc = case_l4(tmp);
    else if (cs == "codec") rc = case_codec(tmp);
    else if (cs == "identity_fa") {
        g_fa = true;
        rc = case_identity(tmp, argv[0]);
    }
    else if (cs == "sharing") rc = case_sharing(tmp);
    else if (cs == "wrong_model") rc = case_wrong_model(tmp);
    else if (cs == "kv_type") rc = case_kv_type(tmp);
    else if (cs == "forged") rc = case_forged(tmp);
    else if (cs == "corrupt") rc = case_corrupt(tmp);
    else if (cs == "bad_input") rc = case_bad_input(tmp);
    else {
        std::fprintf(stderr, "unknown case %s\n", cs.c_str());
        return 2;
    }
    llama_model_free(g_m);
    llama_backend_free();
    if (rc == 0) std::printf("PASS %s\n", cs.c_str());
    return rc;
}
