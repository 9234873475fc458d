// SPDX-License-Identifier: Apache-2.0
// L5 against a real Redis Cluster (started by tests/remote/cluster.sh, which
// sets SPECKV_TEST_REDIS_*). One scenario per run: test_remote SCENARIO.
// Each pool here is a separate anonymous pool; "two hosts" are two processes.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pool/pool.h"
#include "remote/cluster.h"
#include "remote/value.h"
#include "speckv.h"

using namespace speckv::remote;

namespace {
int g_failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s (errmsg: %s)\n", __FILE__, __LINE__, #cond, \
                         speckv_errmsg());                                           \
            g_failures++;                                                            \
        }                                                                            \
    } while (0)

constexpr uint64_t kTenant = 7;

std::string env(const char *n) {
    const char *v = std::getenv(n);
    return v ? v : "";
}
std::vector<int> env_ints(const char *n) {
    std::vector<int> out;
    std::istringstream s(env(n));
    int v;
    while (s >> v) out.push_back(v);
    return out;
}

void hash_of(int i, uint8_t h[32]) {
    for (int k = 0; k < 32; k++) h[k] = static_cast<uint8_t>(k * 7 + 0x5a);
    for (int k = 0; k < 4; k++) h[k] = static_cast<uint8_t>(static_cast<uint32_t>(i) >> (8 * k));
}
std::vector<uint8_t> data_of(int i, size_t n) {
    std::vector<uint8_t> d(n);
    std::mt19937_64 rng(1000 + i);
    for (auto &b : d) b = static_cast<uint8_t>(rng());
    return d;
}

speckv_pool *open_pool(const std::string &uri, const char *write = "through", int timeout_ms = 1000) {
    speckv_config *cfg = nullptr;
    speckv_config_new(&cfg);
    if (!uri.empty()) CHECK(speckv_config_set_str(cfg, "remote.uri", uri.c_str()) == SPECKV_OK);
    CHECK(speckv_config_set_str(cfg, "remote.write", write) == SPECKV_OK);
    CHECK(speckv_config_set_int(cfg, "remote.timeout_ms", timeout_ms) == SPECKV_OK);
    speckv_pool *p = nullptr;
    int rc = speckv_pool_open("anon:?size=128M", cfg, &p);
    CHECK(rc == SPECKV_OK);
    speckv_config_free(cfg);
    return p;
}

int publish_block(speckv_pool *p, int i, size_t n) {
    speckv_hint h{};
    h.struct_size = sizeof h;
    h.tenant = kTenant;
    h.layer = static_cast<uint32_t>(i % 32);
    h.token_pos = 16u * i;
    h.token_count = 16;
    speckv_handle b = 0;
    int rc = speckv_alloc(p, n, SPECKV_DTYPE_OPAQUE, &h, &b);
    if (rc != SPECKV_OK) return rc;
    auto d = data_of(i, n);
    if ((rc = speckv_write(p, b, 0, d.data(), d.size())) != SPECKV_OK) return rc;
    uint8_t hash[32];
    hash_of(i, hash);
    return speckv_publish(p, b, hash, nullptr);
}

// 1: found with identical bytes; 0: a miss; -1: anything else (a failure).
int lookup_block(speckv_pool *p, int i, size_t n) {
    uint8_t hash[32];
    hash_of(i, hash);
    speckv_handle b = 0;
    int rc = speckv_lookup(p, kTenant, hash, &b);
    if (rc == SPECKV_ENOENT) return 0;
    if (rc != SPECKV_OK) {
        std::fprintf(stderr, "lookup %d: %s (%s)\n", i, speckv_strerror(rc), speckv_errmsg());
        return -1;
    }
    std::vector<uint8_t> got(n + 1);
    speckv_block_meta m{};
    m.struct_size = sizeof m;
    int ok = speckv_block_info(p, b, &m) == SPECKV_OK && m.bytes == n && m.tenant == kTenant &&
             m.layer == static_cast<uint32_t>(i % 32) && m.token_pos == 16u * i;
    ok = ok && speckv_access(p, b, 0, got.data(), n, 0) == SPECKV_OK;
    got.resize(n);
    ok = ok && got == data_of(i, n);
    speckv_free(p, b);
    if (!ok) std::fprintf(stderr, "lookup %d: WRONG DATA or metadata\n", i);
    return ok ? 1 : -1;
}

uint64_t stat(speckv_pool *p, const char *field) {
    std::string buf(8192, '\0');
    size_t need = 0;
    if (speckv_stats_json(p, buf.data(), buf.size(), &need) != SPECKV_OK) return ~uint64_t(0);
    std::string key = std::string("\"") + field + "\":";
    size_t at = buf.find(key);
    if (at == std::string::npos) return ~uint64_t(0);
    return std::strtoull(buf.c_str() + at + key.size(), nullptr, 10);
}

void check_pool_clean(speckv_pool *p) {
    speckv::CheckReport r;
    CHECK(p->rep->check(&r) == SPECKV_OK);
    for (const auto &s : r.problems) std::fprintf(stderr, "pool check: %s\n", s.c_str());
    CHECK(r.problems.empty());
}

// The engine keeps running: a block of its own still allocates, writes, reads.
void check_engine_runs(speckv_pool *p) {
    speckv_handle b = 0;
    CHECK(speckv_alloc(p, 8192, SPECKV_DTYPE_OPAQUE, nullptr, &b) == SPECKV_OK);
    std::vector<uint8_t> d(8192, 0x3c), got(8192);
    CHECK(speckv_write(p, b, 0, d.data(), d.size()) == SPECKV_OK);
    CHECK(speckv_access(p, b, 0, got.data(), got.size(), 0) == SPECKV_OK);
    CHECK(got == d);
    CHECK(speckv_free(p, b) == SPECKV_OK);
}

// Runs fn in a child process (its own pool: another host); true if it passed.
bool in_process(const std::function<void()> &fn) {
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        std::fflush(nullptr);
        _exit(g_failures ? 1 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

std::vector<Endpoint> nodes() {
    std::vector<Endpoint> e;
    for (int p : env_ints("SPECKV_TEST_REDIS_PORTS")) e.push_back(Endpoint{"127.0.0.1", p});
    return e;
}

// ------------------------------------------------------------------ scenarios

int scenario_slots() {
    // Published vectors (Redis Cluster spec): CRC16/XMODEM("123456789") = 0x31c3.
    CHECK(crc16("123456789", 9) == 0x31c3);
    CHECK(key_slot("foo") == 12182);
    CHECK(key_slot("{user1000}.following") == key_slot("user1000"));
    CHECK(key_slot("foo{}{bar}") == crc16("foo{}{bar}", 10) % 16384);  // empty tag: the whole key
    uint8_t h[32];
    hash_of(3, h);
    std::string k = key_of(kTenant, h);
    CHECK(k.size() == 5 + 16 + 1 + 64 + 1 && k.rfind("skv:{", 0) == 0 && k.back() == '}');
    // Against the server's own CLUSTER KEYSLOT.
    Cluster c(nodes(), 1000);
    std::mt19937 rng(5);
    int compared = 0;
    for (int i = 0; i < 300; i++) {
        std::string key;
        int len = 1 + rng() % 40;
        for (int j = 0; j < len; j++) key += "ab{}:xyz0123456789"[rng() % 18];
        if (i % 3 == 0) key = key_of(rng(), h);
        Reply r = c.exec_on(nodes()[0], {"CLUSTER", "KEYSLOT", key});
        CHECK(r.kind == Reply::kOk);
        if (r.kind == Reply::kOk) {
            CHECK(std::stoi(r.data) == key_slot(key));
            compared++;
        }
    }
    CHECK(compared == 300);
    // URIs: the good and the bad; a bad one fails open with EINVAL.
    std::vector<Endpoint> eps;
    std::string err;
    CHECK(parse_uri("redis://a:1,b.example:65535", &eps, &err) && eps.size() == 2 && eps[1].port == 65535);
    for (const char *bad : {"", "redis://", "http://a:1", "redis://a", "redis://a:0", "redis://a:70000", "redis://:5",
                            "redis://a:1,", "redis://a:1x"})
        CHECK(!parse_uri(bad, &eps, &err));
    // Redirects: what the cluster sends, and what it must not be taken for.
    Redirect rd;
    CHECK(parse_redirect("MOVED 3999 127.0.0.1:6381", &rd) && !rd.ask && rd.slot == 3999 && rd.host == "127.0.0.1" &&
          rd.port == 6381);
    CHECK(parse_redirect("ASK 16383 :7000", &rd) && rd.ask && rd.slot == 16383 && rd.host.empty() && rd.port == 7000);
    for (const char *bad : {"MOVED 16384 h:1", "MOVED -1 h:1", "MOVED 1 h:0", "MOVED 1 h:65536", "MOVED x h:1",
                            "MOVED 1", "ASK 5 h", "MOVED  h:1", "TRYAGAIN", "moved 1 h:1"})
        CHECK(!parse_redirect(bad, &rd));
    // CLUSTER SLOTS from the server itself: ranges that cover every slot once.
    {
        redisContext *rc = redisConnect("127.0.0.1", nodes()[0].port);
        CHECK(rc && !rc->err);
        if (rc && !rc->err) {
            auto *rep = static_cast<redisReply *>(redisCommand(rc, "CLUSTER SLOTS"));
            std::vector<SlotRange> ranges;
            CHECK(parse_slots(rep, &ranges));
            int covered = 0;
            for (const SlotRange &sr : ranges) {
                covered += sr.hi - sr.lo + 1;
                CHECK(sr.port >= 1);
            }
            CHECK(covered == kSlots);
            // The same reply with one range's port made impossible is refused whole.
            if (rep && rep->elements > 0 && rep->element[0]->elements > 2) {
                redisReply *master = rep->element[0]->element[2];
                long long keep = master->element[1]->integer;
                master->element[1]->integer = 70000;
                CHECK(!parse_slots(rep, &ranges));
                master->element[1]->integer = keep;
            }
            if (rep) freeReplyObject(rep);
        }
        if (rc) redisFree(rc);
        std::vector<SlotRange> none;
        CHECK(!parse_slots(nullptr, &none));
    }
    speckv_config *cfg = nullptr;
    speckv_config_new(&cfg);
    CHECK(speckv_config_set_str(cfg, "remote.uri", "redis://nowhere") == SPECKV_OK);
    CHECK(speckv_config_set_str(cfg, "remote.write", "sideways") == SPECKV_EINVAL);
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open("anon:?size=16M", cfg, &p) == SPECKV_EINVAL && p == nullptr);
    speckv_config_free(cfg);
    // A value round trip and its verdicts.
    BlockMeta m;
    m.tenant = kTenant;
    std::memcpy(m.hash, h, 32);
    m.bytes = 1000;
    std::string v = make_value(m);
    std::memset(v.data() + kHeaderBytes, 0x11, 1000);
    seal(&v);
    BlockMeta got;
    std::string_view data;
    CHECK(check_value(v, kTenant, h, &got, &data) == Verdict::ok && data.size() == 1000);
    CHECK(check_value(v, kTenant + 1, h, &got, &data) == Verdict::wrong_block);
    CHECK(check_value(v.substr(0, v.size() - 1), kTenant, h, &got, &data) == Verdict::bad_checksum);
    CHECK(check_value(v.substr(0, 10), kTenant, h, &got, &data) == Verdict::bad_format);
    std::string flipped = v;
    flipped[kHeaderBytes + 500] ^= 1;
    CHECK(check_value(flipped, kTenant, h, &got, &data) == Verdict::bad_checksum);
    return g_failures;
}

int scenario_share() {
    const std::string uri = env("SPECKV_TEST_REDIS_URI");
    const size_t sizes[] = {4096, 65536, 512 * 1024, 2 << 20};
    bool wrote = in_process([&] {
        speckv_pool *p = open_pool(uri, "through");
        for (int i = 0; i < 12; i++) CHECK(publish_block(p, i, sizes[i % 4]) == SPECKV_OK);
        CHECK(stat(p, "remote_puts") == 12);
        CHECK(stat(p, "remote_errors") == 0);
        check_pool_clean(p);
        CHECK(speckv_pool_close(p) == SPECKV_OK);
    });
    CHECK(wrote);
    bool read = in_process([&] {
        speckv_pool *p = open_pool(uri, "off");
        for (int i = 0; i < 12; i++) CHECK(lookup_block(p, i, sizes[i % 4]) == 1);
        CHECK(stat(p, "remote_hits") == 12);
        // Now in this pool: found there, not fetched again.
        CHECK(lookup_block(p, 0, sizes[0]) == 1);
        CHECK(stat(p, "remote_hits") == 12);
        // Other tenants and unknown hashes miss.
        uint8_t h[32];
        hash_of(1, h);
        speckv_handle b = 0;
        CHECK(speckv_lookup(p, kTenant + 1, h, &b) == SPECKV_ENOENT);
        CHECK(lookup_block(p, 99, 4096) == 0);
        CHECK(stat(p, "remote_misses") == 2);
        CHECK(stat(p, "remote_checksum_failures") == 0);
        check_pool_clean(p);
        CHECK(speckv_pool_close(p) == SPECKV_OK);
    });
    CHECK(read);
    // Write-through from 4 threads at once: publishers batch each other's blocks.
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri, "through");
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; t++)
            ts.emplace_back([&, t] {
                for (int i = 0; i < 8; i++) CHECK(publish_block(p, 400 + t * 8 + i, 65536) == SPECKV_OK);
            });
        for (auto &t : ts) t.join();
        CHECK(stat(p, "remote_puts") == 32);
        speckv_pool_close(p);
    }));
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri, "off");
        for (int i = 400; i < 432; i++) CHECK(lookup_block(p, i, 65536) == 1);
        speckv_pool_close(p);
    }));
    // Write-back: the queue is sent before close returns.
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri, "back");
        for (int i = 100; i < 110; i++) CHECK(publish_block(p, i, 65536) == SPECKV_OK);
        CHECK(speckv_pool_close(p) == SPECKV_OK);
    }));
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri, "off");
        for (int i = 100; i < 110; i++) CHECK(lookup_block(p, i, 65536) == 1);
        speckv_pool_close(p);
    }));
    return g_failures;
}

// Whether some connection to 127.0.0.1:port has bytes its server has not
// read (/proc/net/tcp: state 01 ESTABLISHED, rx_queue > 0): a request in flight.
bool request_waiting(int port) {
    for (const char *f : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        FILE *in = std::fopen(f, "r");
        if (!in) continue;
        char line[512];
        bool found = false;
        while (!found && std::fgets(line, sizeof line, in)) {
            char local[128], remote[128], st[8];
            unsigned tx = 0, rx = 0;
            if (std::sscanf(line, " %*d: %127s %127s %7s %x:%x", local, remote, st, &tx, &rx) != 5) continue;
            const char *colon = std::strrchr(local, ':');
            if (colon && std::strtol(colon + 1, nullptr, 16) == port && std::strcmp(st, "01") == 0 && rx > 0)
                found = true;
        }
        std::fclose(in);
        if (found) return true;
    }
    return false;
}

int scenario_node_kill() {
    const std::string uri = env("SPECKV_TEST_REDIS_URI");
    auto pids = env_ints("SPECKV_TEST_REDIS_PIDS");
    auto eps = nodes();
    constexpr int kBlocks = 24;
    constexpr size_t kBytes = 64 * 1024;
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri);
        for (int i = 0; i < kBlocks; i++) CHECK(publish_block(p, i, kBytes) == SPECKV_OK);
        CHECK(stat(p, "remote_puts") == kBlocks);
        speckv_pool_close(p);
    }));
    // Which blocks live on the victim (node 1): it answers EXISTS only for its own slots.
    std::vector<int> on_victim;
    {
        Cluster admin(eps, 2000);
        for (int i = 0; i < kBlocks; i++) {
            uint8_t h[32];
            hash_of(i, h);
            if (admin.exec_on(eps.at(1), {"EXISTS", key_of(kTenant, h)}).data == "1") on_victim.push_back(i);
        }
    }
    CHECK(!on_victim.empty() && on_victim.size() < size_t(kBlocks));
    if (on_victim.empty()) return g_failures;
    CHECK(in_process([&] {
        // A long timeout: the kill, not the timeout, must end the lookup in flight.
        speckv_pool *p = open_pool(uri, "through", 20000);
        // The other nodes' blocks: hits (each now also in this pool).
        int hits = 0;
        for (int i = 0; i < kBlocks; i++)
            if (std::find(on_victim.begin(), on_victim.end(), i) == on_victim.end()) hits += lookup_block(p, i, kBytes) == 1;
        CHECK(hits == kBlocks - static_cast<int>(on_victim.size()));
        // The victim stops answering; a lookup of one of its blocks sends its
        // GET, which waits unread in the node's socket; only then the node is
        // killed (deterministic: the request is known to be in flight).
        CHECK(kill(pids.at(1), SIGSTOP) == 0);
        int in_flight = -2;
        std::thread looker([&] { in_flight = lookup_block(p, on_victim[0], kBytes); });
        bool waiting = false;
        for (int t = 0; t < 3000 && !waiting; t++) {  // up to 30 s on a loaded machine
            waiting = request_waiting(eps.at(1).port);
            if (!waiting) usleep(10000);
        }
        CHECK(waiting);
        CHECK(kill(pids.at(1), SIGKILL) == 0);
        looker.join();
        CHECK(in_flight == 0);  // a miss, not an error and not data
        // The victim's other blocks are misses now.
        int misses = 1;
        for (size_t k = 1; k < on_victim.size(); k++) misses += lookup_block(p, on_victim[k], kBytes) == 0;
        std::fprintf(stderr, "node kill: %d hits, %d misses, errors counted %llu\n", hits, misses,
                     (unsigned long long)stat(p, "remote_errors"));
        CHECK(misses == static_cast<int>(on_victim.size()));
        CHECK(stat(p, "remote_errors") > 0);
        CHECK(stat(p, "remote_checksum_failures") == 0);
        // Publishing goes on; blocks for the dead node's slots are counted errors.
        for (int i = 200; i < 206; i++) CHECK(publish_block(p, i, 65536) == SPECKV_OK);
        check_engine_runs(p);
        check_pool_clean(p);
        speckv_pool_close(p);
    }));
    return g_failures;
}

int free_port() {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(s, reinterpret_cast<sockaddr *>(&a), &len);
    close(s);
    return ntohs(a.sin_port);
}

int scenario_down() {
    // Down at open: nothing listens. Open works; publishes and lookups go on.
    {
        std::string uri = "redis://127.0.0.1:" + std::to_string(free_port());
        speckv_pool *p = open_pool(uri, "through", 200);
        CHECK(p != nullptr);
        if (p) {
            for (int i = 0; i < 4; i++) CHECK(publish_block(p, i, 65536) == SPECKV_OK);
            CHECK(lookup_block(p, 0, 65536) == 1);   // from the pool
            CHECK(lookup_block(p, 50, 65536) == 0);  // a miss, not an error
            CHECK(stat(p, "remote_errors") >= 5);
            CHECK(stat(p, "remote_puts") == 0);
            check_engine_runs(p);
            check_pool_clean(p);
            CHECK(speckv_pool_close(p) == SPECKV_OK);
        }
    }
    // Down mid-run: the whole cluster dies between publish and lookup.
    const std::string uri = env("SPECKV_TEST_REDIS_URI");
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri);
        for (int i = 0; i < 8; i++) CHECK(publish_block(p, i, 65536) == SPECKV_OK);
        CHECK(stat(p, "remote_puts") == 8);
        speckv_pool_close(p);
    }));
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri, "through", 200);
        CHECK(lookup_block(p, 0, 65536) == 1);  // the cluster is up
        for (int pid : env_ints("SPECKV_TEST_REDIS_PIDS")) kill(pid, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        for (int i = 1; i < 8; i++) CHECK(lookup_block(p, i, 65536) == 0);
        CHECK(lookup_block(p, 0, 65536) == 1);  // still in this pool
        for (int i = 300; i < 304; i++) CHECK(publish_block(p, i, 65536) == SPECKV_OK);
        CHECK(stat(p, "remote_errors") >= 7);
        check_engine_runs(p);
        check_pool_clean(p);
        CHECK(speckv_pool_close(p) == SPECKV_OK);
    }));
    return g_failures;
}

// Hash indexes whose keys fall in `slot` (searching from `from`).
std::vector<int> in_slot(int slot, int count, int from) {
    std::vector<int> out;
    for (int i = from; out.size() < static_cast<size_t>(count); i++) {
        uint8_t h[32];
        hash_of(i, h);
        if (key_slot(key_of(kTenant, h)) == slot) out.push_back(i);
    }
    return out;
}

int scenario_migrate() {
    const std::string uri = env("SPECKV_TEST_REDIS_URI");
    auto eps = nodes();
    Cluster admin(eps, 2000);
    // The slot of block 0, its owner A and another node B.
    uint8_t h0[32];
    hash_of(0, h0);
    const int slot = key_slot(key_of(kTenant, h0));
    auto keys = in_slot(slot, 3, 0);  // block 0 and two more in its slot
    CHECK(keys.size() == 3 && keys[0] == 0);
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri);
        for (int i : keys) CHECK(publish_block(p, i, 65536) == SPECKV_OK);
        speckv_pool_close(p);
    }));
    int a = -1;
    std::vector<std::string> ids;
    for (size_t n = 0; n < eps.size(); n++) {
        Reply r = admin.exec_on(eps[n], {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)});
        if (r.kind == Reply::kOk && r.data == "3") a = static_cast<int>(n);
        ids.push_back(admin.exec_on(eps[n], {"CLUSTER", "MYID"}).data);
    }
    CHECK(a >= 0);
    if (a < 0) return g_failures;
    const int b = (a + 1) % 3;
    auto key = [&](int i) {
        uint8_t h[32];
        hash_of(i, h);
        return key_of(kTenant, h);
    };
    auto ok = [&](const Reply &r) { return r.kind == Reply::kOk; };
    // The reader (another host) loads its slot map before the move.
    int status = 0;
    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    int gofd[2];
    CHECK(pipe(gofd) == 0);
    std::fflush(nullptr);
    pid_t reader = fork();
    if (reader == 0) {
        speckv_pool *p = open_pool(uri);
        CHECK(lookup_block(p, 999, 4096) == 0);  // loads the map: slot -> A
        char c = 0;
        CHECK(write(pipefd[1], "r", 1) == 1);
        CHECK(read(gofd[0], &c, 1) == 1);  // slot migrating; keys[0] moved to B: ASK
        CHECK(lookup_block(p, keys[0], 65536) == 1);
        CHECK(stat(p, "remote_redirects") == 1);  // the ASK
        CHECK(write(pipefd[1], "a", 1) == 1);
        CHECK(read(gofd[0], &c, 1) == 1);  // slot now B's: MOVED
        CHECK(lookup_block(p, keys[1], 65536) == 1);
        CHECK(lookup_block(p, keys[2], 65536) == 1);
        CHECK(stat(p, "remote_redirects") >= 2);
        CHECK(stat(p, "remote_checksum_failures") == 0 && stat(p, "remote_misses") == 1);
        check_pool_clean(p);
        speckv_pool_close(p);
        std::fflush(nullptr);
        _exit(g_failures ? 1 : 0);
    }
    char c = 0;
    CHECK(read(pipefd[0], &c, 1) == 1);
    const std::string s = std::to_string(slot);
    CHECK(ok(admin.exec_on(eps[b], {"CLUSTER", "SETSLOT", s, "IMPORTING", ids[a]})));
    CHECK(ok(admin.exec_on(eps[a], {"CLUSTER", "SETSLOT", s, "MIGRATING", ids[b]})));
    auto migrate = [&](int i) {
        return admin.exec_on(eps[a], {"MIGRATE", "127.0.0.1", std::to_string(eps[b].port), key(i), "0", "2000"});
    };
    CHECK(ok(migrate(keys[0])));
    CHECK(admin.exec_on(eps[a], {"GET", key(keys[0])}).data.rfind("ASK ", 0) == 0);
    CHECK(write(gofd[1], "g", 1) == 1);
    CHECK(read(pipefd[0], &c, 1) == 1);  // the reader's ASK lookup is done
    CHECK(ok(migrate(keys[1])));
    CHECK(ok(migrate(keys[2])));
    for (int n = 0; n < 3; n++) CHECK(ok(admin.exec_on(eps[n], {"CLUSTER", "SETSLOT", s, "NODE", ids[b]})));
    CHECK(admin.exec_on(eps[a], {"GET", key(keys[1])}).data.rfind("MOVED ", 0) == 0);
    CHECK(write(gofd[1], "g", 1) == 1);
    waitpid(reader, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return g_failures;
}

int scenario_corrupt() {
    const std::string uri = env("SPECKV_TEST_REDIS_URI");
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri);
        for (int i = 0; i < 6; i++) CHECK(publish_block(p, i, 65536) == SPECKV_OK);
        speckv_pool_close(p);
    }));
    Cluster other(nodes(), 2000);  // another writer
    auto key = [&](int i) {
        uint8_t h[32];
        hash_of(i, h);
        return key_of(kTenant, h);
    };
    auto get = [&](int i) { return other.exec({Command{{"GET", key(i)}, key(i)}})[0]; };
    auto set = [&](int i, const std::string &v) {
        return other.exec({Command{{"SET", key(i), v}, key(i)}})[0].kind == Reply::kOk;
    };
    Reply v0 = get(0), v4 = get(4);
    CHECK(v0.kind == Reply::kValue && v4.kind == Reply::kValue);
    CHECK(set(0, v0.data.substr(0, v0.data.size() / 2)));  // truncated
    Reply v1 = get(1);
    v1.data[kHeaderBytes + 777] ^= 0x40;  // one bit of the data
    CHECK(set(1, v1.data));
    CHECK(set(2, v4.data));     // another block's sound value
    CHECK(set(3, "hello"));     // not ours at all
    Reply v5 = get(5);
    v5.data[50] ^= 1;           // the header (token_count)
    CHECK(set(5, v5.data));
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri, "off");
        for (int i : {0, 1, 2, 3, 5}) CHECK(lookup_block(p, i, 65536) == 0);
        CHECK(lookup_block(p, 4, 65536) == 1);
        CHECK(stat(p, "remote_checksum_failures") == 5);
        CHECK(stat(p, "remote_misses") == 5);
        CHECK(stat(p, "remote_hits") == 1);
        speckv_pool_stats st{};
        st.struct_size = sizeof st;
        CHECK(speckv_stats(p, &st) == SPECKV_OK && st.blocks_published == 1);  // nothing of the bad ones
        uint64_t v = 0;
        CHECK(speckv_stat(p, "remote_checksum_failures", &v) == SPECKV_OK && v == 5);
        check_engine_runs(p);
        check_pool_clean(p);
        speckv_pool_close(p);
    }));
    return g_failures;
}

int scenario_evict() {
    const std::string uri = env("SPECKV_TEST_REDIS_URI");
    auto eps = nodes();
    Cluster admin(eps, 2000);
    // Room for about 1 MiB of values per node above what it uses now.
    for (const auto &e : eps) {
        Reply info = admin.exec_on(e, {"INFO", "memory"});
        size_t at = info.data.find("used_memory:");
        uint64_t used = at == std::string::npos ? 0 : std::strtoull(info.data.c_str() + at + 12, nullptr, 10);
        CHECK(used > 0);
        CHECK(admin.exec_on(e, {"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}).kind == Reply::kOk);
        CHECK(admin.exec_on(e, {"CONFIG", "SET", "maxmemory", std::to_string(used + (1 << 20))}).kind == Reply::kOk);
    }
    constexpr int kBlocks = 48;
    constexpr size_t kBytes = 128 * 1024;  // 6 MiB over 3 x ~1 MiB of room: some must go
    speckv_pool *writer = nullptr;
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri);
        for (int i = 0; i < kBlocks; i++) CHECK(publish_block(p, i, kBytes) == SPECKV_OK);
        // The writer's pool still lists every block, whatever Redis evicted.
        for (int i = 0; i < kBlocks; i++) CHECK(lookup_block(p, i, kBytes) == 1);
        speckv_pool_close(p);
    }));
    (void)writer;
    uint64_t evicted = 0;
    for (const auto &e : eps) {
        Reply r = admin.exec_on(e, {"INFO", "stats"});
        size_t at = r.data.find("evicted_keys:");
        if (at != std::string::npos) evicted += std::strtoull(r.data.c_str() + at + 13, nullptr, 10);
    }
    std::fprintf(stderr, "evict: redis evicted %llu keys\n", (unsigned long long)evicted);
    CHECK(evicted > 0);
    // And one deleted by hand.
    uint8_t h[32];
    hash_of(kBlocks - 1, h);
    std::string k = key_of(kTenant, h);
    admin.exec({Command{{"DEL", k}, k}});
    CHECK(in_process([&] {
        speckv_pool *p = open_pool(uri, "off");
        int hits = 0, misses = 0, bad = 0;
        for (int i = 0; i < kBlocks; i++) {
            int r = lookup_block(p, i, kBytes);
            (r == 1 ? hits : r == 0 ? misses : bad)++;
        }
        std::fprintf(stderr, "evict: %d hits, %d misses\n", hits, misses);
        CHECK(bad == 0 && hits > 0 && misses > 0);
        CHECK(lookup_block(p, kBlocks - 1, kBytes) == 0);
        CHECK(stat(p, "remote_checksum_failures") == 0 && stat(p, "remote_errors") == 0);
        check_pool_clean(p);
        speckv_pool_close(p);
    }));
    return g_failures;
}
// ---------------------------------------------------------- L5 behind L4

// A 4 MiB pool (L3) with a 1 MiB L4 file in front of the cluster: most of
// the blocks written must leave for L5. Publishing does not write to L5
// here (remote.write = off): what is there came by demotion.
struct TieredPool {
    speckv_pool *p = nullptr;
    std::string dir;
    ~TieredPool() {
        if (p) speckv_pool_close(p);
        if (!dir.empty() && std::system(("rm -rf '" + dir + "'").c_str()) != 0) std::fprintf(stderr, "cannot remove %s\n", dir.c_str());
    }
};

// A handle on the tiered pool in `dir`: the L4 holder (cold.path and L5
// behind it, the defaults of remote.demote) or, with holder = false, a plain
// handle without either (it asks the holder for blocks in L4 or L5).
speckv_pool *open_tiered_in(const std::string &uri, const std::string &dir, bool holder) {
    speckv_config *cfg = nullptr;
    speckv_config_new(&cfg);
    if (holder) {
        CHECK(speckv_config_set_str(cfg, "remote.uri", uri.c_str()) == SPECKV_OK);
        CHECK(speckv_config_set_str(cfg, "remote.write", "off") == SPECKV_OK);
        CHECK(speckv_config_set_int(cfg, "remote.timeout_ms", 5000) == SPECKV_OK);
        CHECK(speckv_config_set_str(cfg, "cold.path", (dir + "/l4").c_str()) == SPECKV_OK);
        CHECK(speckv_config_set_int(cfg, "cold.capacity", 1 << 20) == SPECKV_OK);
    }
    CHECK(speckv_config_set_int(cfg, "prefetch.policy", 1) == SPECKV_OK);  // exactly the unit a hint names
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open(("file:" + dir + "/pool?size=4M&max_blocks=1024").c_str(), cfg, &p) == SPECKV_OK);
    speckv_config_free(cfg);
    return p;
}

void open_tiered(const std::string &uri, TieredPool *t) {
    std::string tmpl = (env("TMPDIR").empty() ? std::string("/tmp") : env("TMPDIR")) + "/speckv-l5.XXXXXX";
    CHECK(mkdtemp(tmpl.data()) != nullptr);
    t->dir = tmpl;
    t->p = open_tiered_in(uri, t->dir, true);
}

// Keys in the whole cluster (each test starts its own).
uint64_t cluster_keys() {
    Cluster admin(nodes(), 2000);
    uint64_t n = 0;
    for (const auto &e : nodes()) {
        Reply r = admin.exec_on(e, {"DBSIZE"});
        CHECK(r.kind == Reply::kOk);
        n += std::strtoull(r.data.c_str(), nullptr, 10);
    }
    return n;
}

speckv_hint unit_hint(int i, uint64_t pos, uint64_t count) {
    speckv_hint h{};
    h.struct_size = sizeof h;
    h.tenant = kTenant;
    h.request = 100 + static_cast<uint64_t>(i);
    h.token_pos = pos;
    h.token_count = count;
    return h;
}

speckv_handle put_unit(speckv_pool *p, int i, size_t n) {
    speckv_hint h = unit_hint(i, 0, 16);
    speckv_handle b = 0;
    if (speckv_alloc(p, n, SPECKV_DTYPE_OPAQUE, &h, &b) != SPECKV_OK) return 0;
    auto d = data_of(i, n);
    return speckv_write(p, b, 0, d.data(), d.size()) == SPECKV_OK ? b : 0;
}

// 1: the block's bytes under its handle; 0: a miss (SPECKV_ENOENT); -1: else.
int read_unit(speckv_pool *p, speckv_handle b, int i, size_t n) {
    std::vector<uint8_t> got(n);
    int rc = speckv_access(p, b, 0, got.data(), n, 0);
    if (rc == SPECKV_ENOENT) return 0;
    if (rc != SPECKV_OK) {
        std::fprintf(stderr, "read %d: %s (%s)\n", i, speckv_strerror(rc), speckv_errmsg());
        return -1;
    }
    if (got != data_of(i, n)) {
        std::fprintf(stderr, "read %d: WRONG DATA\n", i);
        return -1;
    }
    return 1;
}

uint64_t l4_promotions(speckv_pool *p) {
    speckv_pool_stats st{};
    st.struct_size = sizeof st;
    return speckv_stats(p, &st) == SPECKV_OK ? st.l4_promotions : 0;
}

int scenario_demote() {
    const std::string uri = env("SPECKV_TEST_REDIS_URI");
    constexpr int kBlocks = 36;
    constexpr size_t kBytes = 256 * 1024;  // 9 MiB into 4 MiB of pool and 1 MiB of L4
    TieredPool t;
    open_tiered(uri, &t);
    if (!t.p) return g_failures + 1;
    speckv::ColdTier *l4 = t.p->rep->l4_tier();
    CHECK(l4 != nullptr);
    if (!l4) return g_failures;
    std::vector<speckv_handle> hs(kBlocks);
    for (int i = 0; i < kBlocks; i++) CHECK((hs[i] = put_unit(t.p, i, kBytes)) != 0);
    std::vector<int> in_l5;
    for (int i = 0; i < kBlocks; i++)
        if (l4->in_spill(hs[i])) in_l5.push_back(i);
    const speckv::ColdTierStats cs = l4->stats();
    std::fprintf(stderr, "demote: %zu blocks in L5 (%llu moved out of L4, %llu straight from L3), %llu in the L4 file\n",
                 in_l5.size(), (unsigned long long)cs.spilled, (unsigned long long)cs.spilled_direct,
                 (unsigned long long)(cs.keys - cs.spill_keys));
    CHECK(in_l5.size() >= 10);
    CHECK(cs.spilled > 0);  // L4 -> L5
    CHECK(stat(t.p, "remote_demoted") >= in_l5.size());
    if (in_l5.empty()) return g_failures;
    // A prefetch hint past a block in L5 brings it back ahead of its use,
    // through the path L4 uses (the prefetch thread; nothing read here).
    const int ip = in_l5.front();
    const uint64_t got0 = stat(t.p, "remote_promoted");
    speckv_hint next = unit_hint(ip, 16, 1);
    CHECK(speckv_prefetch(t.p, &next) == SPECKV_OK);
    for (int k = 0; k < 3000 && l4->in_spill(hs[ip]); k++) usleep(10000);  // up to 30 s
    CHECK(!l4->in_spill(hs[ip]));
    CHECK(stat(t.p, "remote_promoted") > got0);
    // Every block comes back under its own handle, with its bytes.
    for (int i = 0; i < kBlocks; i++) CHECK(read_unit(t.p, hs[i], i, kBytes) == 1);
    CHECK(stat(t.p, "remote_promoted") >= in_l5.size());
    CHECK(stat(t.p, "remote_lost") == 0 && stat(t.p, "remote_demote_checksum_failures") == 0);
    CHECK(l4_promotions(t.p) >= in_l5.size());
    check_pool_clean(t.p);
    check_engine_runs(t.p);
    for (int i = 0; i < kBlocks; i++) CHECK(speckv_free(t.p, hs[i]) == SPECKV_OK);
    check_pool_clean(t.p);
    return g_failures;
}

// The L5 copies of demoted blocks outlive the handle that holds L4: after it
// closes, a new holder (this process again, then another process with a
// plain handle beside it) reads every block back bit-exact under its handle.
// Freeing the blocks deletes the copies: the cluster ends empty.
int scenario_demote_reopen() {
    const std::string uri = env("SPECKV_TEST_REDIS_URI");
    constexpr int kBlocks = 36;
    constexpr size_t kBytes = 256 * 1024;
    TieredPool t;
    open_tiered(uri, &t);
    if (!t.p) return g_failures + 1;
    std::vector<speckv_handle> hs(kBlocks);
    for (int i = 0; i < kBlocks; i++) CHECK((hs[i] = put_unit(t.p, i, kBytes)) != 0);
    std::vector<int> in_l5;
    for (int i = 0; i < kBlocks; i++)
        if (t.p->rep->l4_tier()->in_spill(hs[i])) in_l5.push_back(i);
    CHECK(in_l5.size() >= 10);
    const uint64_t keys0 = cluster_keys();
    CHECK(keys0 == in_l5.size());
    CHECK(speckv_pool_close(t.p) == SPECKV_OK);
    t.p = nullptr;
    std::fprintf(stderr, "demote-reopen: %zu blocks in L5 at close, %llu keys in the cluster after it\n", in_l5.size(),
                 (unsigned long long)cluster_keys());
    CHECK(cluster_keys() == keys0);  // the close deleted nothing
    // A new holder in this process: every block still in L5, half of them read back.
    speckv_pool *p = open_tiered_in(uri, t.dir, true);
    CHECK(p != nullptr);
    if (!p) return g_failures;
    for (int i : in_l5) CHECK(p->rep->l4_tier()->in_spill(hs[i]));
    for (size_t k = 0; k < in_l5.size(); k += 2) CHECK(read_unit(p, hs[in_l5[k]], in_l5[k], kBytes) == 1);
    CHECK(stat(p, "remote_lost") == 0 && stat(p, "remote_demote_checksum_failures") == 0);
    check_pool_clean(p);
    CHECK(speckv_pool_close(p) == SPECKV_OK);
    // Another process takes L4; a plain handle beside it (no cold.path, no
    // L5) reads the rest of the L5 blocks through it, the holder every block.
    CHECK(in_process([&] {
        speckv_pool *h = open_tiered_in(uri, t.dir, true);
        speckv_pool *q = open_tiered_in(uri, t.dir, false);
        CHECK(h && q);
        if (!h || !q) return;
        for (size_t k = 1; k < in_l5.size(); k += 2) CHECK(read_unit(q, hs[in_l5[k]], in_l5[k], kBytes) == 1);
        for (int i = 0; i < kBlocks; i++) CHECK(read_unit(h, hs[i], i, kBytes) == 1);
        CHECK(stat(h, "remote_lost") == 0 && stat(h, "remote_demote_checksum_failures") == 0);
        check_pool_clean(h);
        CHECK(speckv_pool_close(q) == SPECKV_OK);
        CHECK(speckv_pool_close(h) == SPECKV_OK);
    }));
    // A holder that dies without closing, after demotions of its own, leaves
    // the copies listed too: the next holder reads every block back. (Its
    // own blocks, unpublished, are reclaimed by the pool's recovery: their
    // copies are deleted, which the empty cluster at the end shows.)
    int fds[2];
    CHECK(pipe(fds) == 0);
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        speckv_pool *h = open_tiered_in(uri, t.dir, true);
        std::vector<speckv_handle> more(12);
        for (int i = 0; i < 12; i++) more[i] = h ? put_unit(h, kBlocks + i, kBytes) : 0;
        const bool ok = write(fds[1], more.data(), more.size() * sizeof more[0]) == ssize_t(more.size() * sizeof more[0]);
        _exit(ok && h ? 0 : 1);  // no close: as if killed
    }
    close(fds[1]);
    std::vector<speckv_handle> more(12);
    CHECK(read(fds[0], more.data(), more.size() * sizeof more[0]) == ssize_t(more.size() * sizeof more[0]));
    close(fds[0]);
    int wst = 0;
    waitpid(pid, &wst, 0);
    CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    // Freed, the blocks' copies leave the cluster: nothing is left behind.
    p = open_tiered_in(uri, t.dir, true);
    CHECK(p != nullptr);
    if (!p) return g_failures;
    int after_crash = 0;
    for (int i = 0; i < kBlocks; i++) after_crash += p->rep->l4_tier()->in_spill(hs[i]);
    std::fprintf(stderr, "demote-reopen: %d blocks in L5 after a holder died without closing\n", after_crash);
    CHECK(after_crash >= 10);
    for (int i = 0; i < 12; i++) CHECK(more[i] != 0);
    for (int i = 0; i < kBlocks; i++) CHECK(read_unit(p, hs[i], i, kBytes) == 1);
    CHECK(stat(p, "remote_lost") == 0);
    CHECK(speckv_pool_close(p) == SPECKV_OK);
    p = open_tiered_in(uri, t.dir, true);
    CHECK(p != nullptr);
    if (!p) return g_failures;
    for (int i = 0; i < kBlocks; i++) CHECK(speckv_free(p, hs[i]) == SPECKV_OK);
    check_pool_clean(p);
    CHECK(speckv_pool_close(p) == SPECKV_OK);
    std::fprintf(stderr, "demote-reopen: %llu keys in the cluster after every block was freed\n",
                 (unsigned long long)cluster_keys());
    CHECK(cluster_keys() == 0);
    return g_failures;
}

// A pool reset forgets every block: the next L4 holder deletes the L5 copies
// that no block names any more (and a handle with cold.path but no L5 in
// between keeps them listed until one that has L5 comes).
int scenario_demote_reset() {
    const std::string uri = env("SPECKV_TEST_REDIS_URI");
    TieredPool t;
    open_tiered(uri, &t);
    if (!t.p) return g_failures + 1;
    for (int i = 0; i < 36; i++) CHECK(put_unit(t.p, i, 256 * 1024) != 0);
    CHECK(speckv_pool_close(t.p) == SPECKV_OK);
    t.p = nullptr;
    const uint64_t keys0 = cluster_keys();
    CHECK(keys0 >= 10);
    CHECK(speckv::Pool::reset_uri("file:" + t.dir + "/pool?size=4M&max_blocks=1024", true) == SPECKV_OK);
    speckv_pool *p = open_tiered_in(uri, t.dir, true);
    CHECK(p != nullptr);
    if (p) CHECK(speckv_pool_close(p) == SPECKV_OK);
    std::fprintf(stderr, "demote-reset: %llu keys in the cluster before the reset, %llu after the next open\n",
                 (unsigned long long)keys0, (unsigned long long)cluster_keys());
    CHECK(cluster_keys() == 0);
    return g_failures;
}

int scenario_demote_evict() {
    const std::string uri = env("SPECKV_TEST_REDIS_URI");
    auto eps = nodes();
    Cluster admin(eps, 2000);
    for (const auto &e : eps) {  // about 1 MiB of room per node above what it uses now
        Reply info = admin.exec_on(e, {"INFO", "memory"});
        size_t at = info.data.find("used_memory:");
        uint64_t used = at == std::string::npos ? 0 : std::strtoull(info.data.c_str() + at + 12, nullptr, 10);
        CHECK(used > 0);
        CHECK(admin.exec_on(e, {"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}).kind == Reply::kOk);
        CHECK(admin.exec_on(e, {"CONFIG", "SET", "maxmemory", std::to_string(used + (1 << 20))}).kind == Reply::kOk);
    }
    constexpr int kBlocks = 36;
    constexpr size_t kBytes = 256 * 1024;  // ~7 MiB to L5 over ~3 MiB of room: Redis evicts some
    TieredPool t;
    open_tiered(uri, &t);
    if (!t.p) return g_failures + 1;
    std::vector<speckv_handle> hs(kBlocks);
    for (int i = 0; i < kBlocks; i++) CHECK((hs[i] = put_unit(t.p, i, kBytes)) != 0);
    int hits = 0, misses = 0, bad = 0;
    std::vector<int> lost;
    for (int i = 0; i < kBlocks; i++) {
        int r = read_unit(t.p, hs[i], i, kBytes);
        (r == 1 ? hits : r == 0 ? misses : bad)++;
        if (r == 0) lost.push_back(i);
    }
    std::fprintf(stderr, "demote-evict: %d hits, %d misses (remote_lost %llu)\n", hits, misses,
                 (unsigned long long)stat(t.p, "remote_lost"));
    CHECK(bad == 0 && hits > 0 && misses > 0);
    CHECK(stat(t.p, "remote_lost") == uint64_t(misses));
    CHECK(stat(t.p, "remote_demote_checksum_failures") == 0);
    // A lost block stays a miss (asked once), the pool checks clean with it
    // listed, the engine goes on, and freeing it is clean too.
    if (!lost.empty()) CHECK(read_unit(t.p, hs[lost[0]], lost[0], kBytes) == 0);
    CHECK(stat(t.p, "remote_lost") == uint64_t(misses));
    check_pool_clean(t.p);
    check_engine_runs(t.p);
    for (int i = 0; i < kBlocks; i++) CHECK(speckv_free(t.p, hs[i]) == SPECKV_OK);
    check_pool_clean(t.p);
    return g_failures;
}
}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: test_remote slots|share|node-kill|down|migrate|corrupt|evict|demote|demote-evict|demote-reopen|demote-reset\n");
        return 2;
    }
    if (env("SPECKV_TEST_REDIS_URI").empty()) {
        std::printf("SKIP: no cluster (run under tests/remote/cluster.sh)\n");
        return 77;
    }
    signal(SIGPIPE, SIG_IGN);
    std::string s = argv[1];
    int f = s == "slots"       ? scenario_slots()
            : s == "share"     ? scenario_share()
            : s == "node-kill" ? scenario_node_kill()
            : s == "down"      ? scenario_down()
            : s == "migrate"   ? scenario_migrate()
            : s == "corrupt"   ? scenario_corrupt()
            : s == "evict"     ? scenario_evict()
            : s == "demote"    ? scenario_demote()
            : s == "demote-evict" ? scenario_demote_evict()
            : s == "demote-reopen" ? scenario_demote_reopen()
            : s == "demote-reset" ? scenario_demote_reset()
                               : -1;
    if (f < 0) {
        std::fprintf(stderr, "unknown scenario %s\n", argv[1]);
        return 2;
    }
    std::printf("%s: %s\n", argv[1], f ? "FAILED" : "passed");
    return f ? 1 : 0;
}
