// SPDX-License-Identifier: Apache-2.0
#include "remote/spill.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "remote/value.h"
#include "speckv.h"

namespace speckv::remote {

namespace {
constexpr size_t kBatch = 32;  // commands per pipelined round
}

Spill::Spill(std::vector<Endpoint> seeds, int timeout_ms, int64_t ttl_s)
    : cluster_(std::move(seeds), timeout_ms), ttl_s_(ttl_s) {
    std::random_device rd;
    id_ = (uint64_t(rd()) << 32) ^ rd();
}

std::string Spill::key(uint64_t k) const {
    static const char *hex = "0123456789abcdef";
    std::string s = "skv:l4:{";
    for (int i = 60; i >= 0; i -= 4) s += hex[(id_ >> i) & 15];
    s += ':';
    for (int i = 60; i >= 0; i -= 4) s += hex[(k >> i) & 15];
    s += '}';
    return s;
}

// The value's "tenant" is the store id and its "hash" names the tier key:
// check_value then refuses another store's or another key's value.
void Spill::ident(uint64_t k, uint8_t hash[32]) const {
    std::memset(hash, 0, 32);
    std::memcpy(hash, &k, 8);
    std::memcpy(hash + 8, &id_, 8);
    std::memcpy(hash + 16, "speckv-L4-spill", 15);
}

void Spill::put(std::span<PutItem> items) {
    for (size_t at = 0; at < items.size(); at += kBatch) {
        const size_t n = std::min(kBatch, items.size() - at);
        std::vector<Command> cmds(n);
        for (size_t j = 0; j < n; j++) {
            const PutItem &it = items[at + j];
            BlockMeta m;
            m.tenant = id_;
            ident(it.key, m.hash);
            m.dtype = SPECKV_DTYPE_OPAQUE;
            m.bytes = it.len;
            std::string v = make_value(m);
            if (it.len) std::memcpy(v.data() + kHeaderBytes, it.data, it.len);
            seal(&v);
            cmds[j].key = key(it.key);
            cmds[j].args.reserve(ttl_s_ > 0 ? 5 : 3);  // not an initializer list: that would copy the value
            cmds[j].args.emplace_back("SET");
            cmds[j].args.push_back(cmds[j].key);
            cmds[j].args.push_back(std::move(v));
            if (ttl_s_ > 0) {
                cmds[j].args.push_back("EX");
                cmds[j].args.push_back(std::to_string(ttl_s_));
            }
        }
        std::lock_guard g(mu_);
        std::vector<Reply> rs = cluster_.exec(cmds);
        for (size_t j = 0; j < n; j++) {
            items[at + j].ok = rs[j].kind == Reply::kOk;
            if (items[at + j].ok) {
                st_.puts++;
                st_.put_bytes += items[at + j].len;
            } else {
                st_.errors++;
            }
        }
    }
}

void Spill::get(std::span<GetItem> items) {
    for (size_t at = 0; at < items.size(); at += kBatch) {
        const size_t n = std::min(kBatch, items.size() - at);
        std::vector<Command> cmds(n);
        for (size_t j = 0; j < n; j++) {
            cmds[j].key = key(items[at + j].key);
            cmds[j].args = {"GET", cmds[j].key};
            cmds[j].view = true;  // read in place: Reply::bytes()
        }
        std::lock_guard g(mu_);
        std::vector<Reply> rs = cluster_.exec(cmds);
        for (size_t j = 0; j < n; j++) {
            GetItem &it = items[at + j];
            const Reply &r = rs[j];
            if (r.kind == Reply::kNil) {
                it.status = SPECKV_ENOENT;
                st_.lost++;
                continue;
            }
            if (r.kind != Reply::kValue) {
                it.status = SPECKV_EIO;
                st_.errors++;
                continue;
            }
            uint8_t h[32];
            ident(it.key, h);
            BlockMeta m;
            std::string_view data;
            if (check_value(r.bytes(), id_, h, &m, &data) != Verdict::ok || data.size() != it.len) {
                it.status = SPECKV_ENOENT;  // never data that does not verify
                st_.lost++;
                st_.checksum_failures++;
                continue;
            }
            if (it.len) std::memcpy(it.dst, data.data(), it.len);
            it.status = SPECKV_OK;
            st_.gets++;
            st_.get_bytes += it.len;
        }
    }
}

void Spill::bind(uint64_t store_id) {
    std::lock_guard g(mu_);
    id_ = store_id;
}

void Spill::del(std::span<DelItem> items) {
    for (size_t at = 0; at < items.size(); at += kBatch) {
        const size_t n = std::min(kBatch, items.size() - at);
        std::vector<Command> cmds(n);
        for (size_t j = 0; j < n; j++) {
            cmds[j].key = key(items[at + j].key);
            cmds[j].args = {"DEL", cmds[j].key};
        }
        std::lock_guard g(mu_);
        std::vector<Reply> rs = cluster_.exec(cmds);
        for (size_t j = 0; j < n; j++) {
            items[at + j].ok = rs[j].kind == Reply::kOk;  // an integer: 1 deleted, 0 was not there
            (items[at + j].ok ? st_.dels : st_.errors)++;
        }
    }
}

SpillStats Spill::stats() const {
    std::lock_guard g(mu_);
    return st_;
}

}  // namespace speckv::remote
