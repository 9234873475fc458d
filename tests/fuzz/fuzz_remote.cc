// SPDX-License-Identifier: Apache-2.0
// Fuzz target: what the remote tier (L5, lib/remote/) reads from outside the
// process: values fetched from the Redis Cluster (written by any host sharing
// it), the cluster's MOVED/ASK errors and CLUSTER SLOTS replies, and the L5
// directory beside an L4 cold file (`<path>.l5`, a crash or a hostile edit).
// Byte 0 picks the part (low 2 bits) and its options; the rest is the input:
//   0  a value; bit 2: re-seal its two CRCs first (so libFuzzer reaches past
//      them), bit 3: check it against its own tenant and hash (else zeros)
//   1  the text of a Redis error reply (parse_redirect)
//   2  a CLUSTER SLOTS reply as a tree, from a small encoding below (parse_slots)
//   3  the L5 directory of an empty cold file: open with recovery, a spill
//      store that has nothing, then every key read back
// Promises checked (abort when broken): an accepted value's data is exactly
// its declared length and nothing else; a redirect or slot range is within
// 0..16383 with a port in 1..65535; a key the directory lists has a length
// the tier would send (≤ 256 MiB) and reading it gives OK with exactly that
// length or a status, never a crash.
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cold_file_options.h"
#include "remote/cluster.h"
#include "remote/value.h"
#include "speckv.h"
#include "tiers/cold_spill.h"
#include "tiers/cold_tier.h"
#include "util/crc32c.h"

namespace {

using namespace speckv;
using namespace speckv::remote;

void fuzz_value(const uint8_t *p, size_t n, uint8_t opt) {
    std::string v(reinterpret_cast<const char *>(p), n);
    if ((opt & 4) && v.size() >= kHeaderBytes) {  // re-seal: the declared length may lie, seal must not read past
        uint64_t declared;
        std::memcpy(&declared, v.data() + 48, 8);
        if (declared == v.size() - kHeaderBytes) seal(&v);
        else {
            const uint32_t hc = crc32c(0, v.data(), 92);
            std::memcpy(v.data() + 92, &hc, 4);
        }
    }
    uint64_t tenant = 0;
    uint8_t hash[32] = {};
    if ((opt & 8) && v.size() >= kHeaderBytes) {
        std::memcpy(&tenant, v.data() + 24, 8);
        std::memcpy(hash, v.data() + 56, 32);
    }
    BlockMeta m;
    std::string_view data;
    if (check_value(v, tenant, hash, &m, &data) != Verdict::ok) return;
    if (v.size() < kHeaderBytes || m.bytes == 0 || data.size() != m.bytes || data.size() != v.size() - kHeaderBytes ||
        data.data() != v.data() + kHeaderBytes || m.tenant != tenant || std::memcmp(m.hash, hash, 32) != 0)
        std::abort();
    // What remote_tier.cc builds from it round-trips through make_value/seal.
    std::string again = make_value(m);
    std::memcpy(again.data() + kHeaderBytes, data.data(), data.size());
    seal(&again);
    BlockMeta m2;
    std::string_view d2;
    if (check_value(again, tenant, hash, &m2, &d2) != Verdict::ok || d2 != data) std::abort();
}

void fuzz_redirect(const uint8_t *p, size_t n) {
    Redirect r;
    if (!parse_redirect(std::string_view(reinterpret_cast<const char *>(p), n), &r)) return;
    if (r.slot < 0 || r.slot >= kSlots || r.port < 1 || r.port > 65535) std::abort();
}

// A reply tree from bytes: a type byte (mod 5: array, integer, string, nil,
// error), then for an array a count byte (at most 8 children, depth at most
// 4), for an integer 8 bytes, for a string or an error a length byte and its
// bytes. Whatever runs out becomes nil.
struct Tree {
    std::deque<redisReply> nodes;
    std::deque<std::vector<redisReply *>> kids;
    std::deque<std::string> strs;
    const uint8_t *p;
    size_t n, at = 0;
    uint8_t byte() { return at < n ? p[at++] : 0; }
    redisReply *make(int depth) {
        redisReply &r = nodes.emplace_back();
        std::memset(&r, 0, sizeof r);
        if (at >= n) {
            r.type = REDIS_REPLY_NIL;
            return &r;
        }
        const uint8_t type = byte() % 5;
        switch (type) {
            case 0: {
                r.type = REDIS_REPLY_ARRAY;
                const size_t c = depth < 4 ? byte() % 9 : 0;
                auto &v = kids.emplace_back();
                for (size_t i = 0; i < c; i++) v.push_back(make(depth + 1));
                r.elements = v.size();
                r.element = v.empty() ? nullptr : v.data();
                break;
            }
            case 1: {
                r.type = REDIS_REPLY_INTEGER;
                long long x = 0;
                for (int i = 0; i < 8; i++) x = static_cast<long long>(static_cast<unsigned long long>(x) << 8 | byte());
                r.integer = x;
                break;
            }
            case 2:
            case 4: {
                r.type = type == 2 ? REDIS_REPLY_STRING : REDIS_REPLY_ERROR;
                const size_t len = byte();
                std::string &s = strs.emplace_back();
                for (size_t i = 0; i < len && at < n; i++) s += static_cast<char>(byte());
                r.str = s.data();
                r.len = s.size();
                break;
            }
            default:
                r.type = REDIS_REPLY_NIL;
        }
        return &r;
    }
};

void fuzz_slots(const uint8_t *p, size_t n) {
    Tree t{{}, {}, {}, p, n};
    const redisReply *root = t.make(0);
    std::vector<SlotRange> ranges;
    if (!parse_slots(root, &ranges)) return;
    for (const SlotRange &r : ranges)
        if (r.lo < 0 || r.hi >= kSlots || r.lo > r.hi || r.port < 1 || r.port > 65535) std::abort();
}

// A store that has lost everything: every get is a miss, puts are refused.
class EmptyStore final : public ColdSpill {
  public:
    void put(std::span<PutItem> items) override {
        for (auto &i : items) i.ok = false;
    }
    void get(std::span<GetItem> items) override {
        for (auto &i : items) i.status = SPECKV_ENOENT;
    }
    void del(std::span<DelItem> items) override {
        for (auto &i : items) i.ok = true;
    }
};

void fuzz_directory(const uint8_t *p, size_t n) {
    const char *tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/speckv-fuzz-l5-XXXXXX";
    int fd = mkstemp(path.data());
    if (fd < 0) return;
    close(fd);
    const std::string dir = path + ".l5";
    fd = ::open(dir.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    bool ok = fd >= 0 && write(fd, p, n) == ssize_t(n);
    if (fd >= 0) close(fd);
    if (ok) {
        const ColdTierOptions o = fuzz_cold_file_options(path);
        std::unique_ptr<ColdTier> t;
        if (ColdTier::open(o, &t) == SPECKV_OK) {
            t->set_spill(std::make_shared<EmptyStore>());
            for (uint64_t k : t->keys()) {
                const int64_t len = t->length(k);
                if (len < 0 || uint64_t(len) > (256ull << 20)) std::abort();  // more than the tier would send
                if (uint64_t(len) > (1u << 20)) continue;
                std::vector<unsigned char> buf(size_t(len) + 1);
                ColdTier::GetItem it{k, buf.data(), buf.size()};
                const int rc = t->get({&it, 1});
                if (rc == SPECKV_OK && it.len != size_t(len)) std::abort();
            }
        }
    }
    unlink(dir.c_str());
    unlink(path.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1u << 20)) return 0;
    const uint8_t opt = data[0];
    switch (opt & 3) {
        case 0: fuzz_value(data + 1, size - 1, opt); break;
        case 1: fuzz_redirect(data + 1, size - 1); break;
        case 2: fuzz_slots(data + 1, size - 1); break;
        default: fuzz_directory(data + 1, size - 1); break;
    }
    return 0;
}
