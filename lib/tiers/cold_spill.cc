// SPDX-License-Identifier: Apache-2.0
// The L4 cold tier's spill store (L5; cold_tier.h set_spill, docs/remote.md
// "Demotion to L5"): room is made by moving the oldest extents out of the
// file, items the file cannot take go there whole, reads of their keys are
// served from there, and their copies there are deleted when the keys go.
// Everything here runs under the tier's mutex.
#include <algorithm>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "tiers/cold_tier.h"
#include "util/status.h"

namespace speckv {

namespace {
constexpr uint64_t kMoveBytes = 64ull << 20;  // most bytes one make-room pass reads out of the file
constexpr size_t kMaxValue = 256ull << 20;     // larger items are not sent (Redis takes 512 MB per value)
}

// A key put to the store again: a delete still pending for its old copy
// must not remove the new one.
void ColdTier::unbury(uint64_t key) {
    spill_dead_.erase(std::remove(spill_dead_.begin(), spill_dead_.end(), key), spill_dead_.end());
}

void ColdTier::set_spill(std::shared_ptr<ColdSpill> spill) {
    std::lock_guard lk(mu_);
    spill_ = std::move(spill);
}

bool ColdTier::in_spill(uint64_t key) const {
    std::lock_guard lk(mu_);
    return spilled_.count(key) != 0;
}

void ColdTier::spill_make_room_locked(std::span<PutItem> items) {
    uint64_t need = 0;
    std::unordered_set<uint64_t> batch;
    for (const PutItem &it : items) {
        batch.insert(it.key);
        // One the file could never hold goes to the store whole: no room is made for it.
        if (it.len <= alloc_->total_blocks() * opt_.block && extent_blocks(it.len) <= alloc_->total_blocks())
            need += extent_blocks(it.len);
    }
    need = std::min(need, alloc_->total_blocks());
    if (alloc_->free_blocks() >= need) return;  // (a fragmented file may still refuse one: it goes whole)
    // The oldest copies first (lowest generation): demoted longest ago.
    std::vector<std::pair<uint64_t, uint64_t>> by_gen;
    for (const auto &kv : index_)
        if (!batch.count(kv.first)) by_gen.emplace_back(kv.second.gen, kv.first);
    std::sort(by_gen.begin(), by_gen.end());
    uint64_t have = alloc_->free_blocks(), bytes = 0;
    std::vector<uint64_t> move;
    for (const auto &[gen, key] : by_gen) {
        if (have >= need || bytes >= kMoveBytes) break;
        const Extent &e = index_.at(key);
        move.push_back(key);
        have += e.blocks;
        bytes += e.len;
    }
    if (move.empty()) return;
    std::vector<std::vector<unsigned char>> bufs(move.size());
    std::vector<GetItem> gets;
    for (size_t i = 0; i < move.size(); i++) {
        bufs[i].resize(index_.at(move[i]).len);
        gets.push_back(GetItem{move[i], bufs[i].data(), bufs[i].size()});
    }
    const uint64_t g0 = st_.gets, gf0 = st_.get_failures, br0 = st_.bytes_read;
    (void)get_locked(gets);  // CRC32C checked; a copy that fails stays in the file
    st_.gets = g0, st_.get_failures = gf0, st_.bytes_read = br0;  // internal reads: not the caller's gets
    std::vector<ColdSpill::PutItem> puts;
    for (const GetItem &g : gets)
        if (g.status == SPECKV_OK) puts.push_back(ColdSpill::PutItem{g.key, g.dst, g.len});
    clear_error();
    if (puts.empty()) return;
    spill_->put(puts);
    for (const ColdSpill::PutItem &p : puts) {
        if (!p.ok) continue;
        auto f = index_.find(p.key);
        unbury(p.key);
        spilled_[p.key] = Spilled{f->second.len, f->second.gen, false};  // same generation: forget_if still matches
        forgotten_.push_back(f->second);
        index_.erase(f);
        st_.spilled++;
    }
    (void)flush_forgotten_locked();  // their blocks are free from here
    clear_error();
}

void ColdTier::spill_rest_locked(std::span<PutItem> items, std::vector<int> &status) {
    std::vector<ColdSpill::PutItem> puts;
    std::vector<size_t> at;
    for (size_t i = 0; i < items.size(); i++) {
        if (status[i] != SPECKV_ENOSPC || items[i].len > kMaxValue) continue;
        puts.push_back(ColdSpill::PutItem{items[i].key, items[i].data, items[i].len});
        at.push_back(i);
    }
    if (puts.empty()) return;
    spill_->put(puts);
    for (size_t j = 0; j < puts.size(); j++) {
        if (!puts[j].ok) continue;  // stays SPECKV_ENOSPC: the caller keeps its copy
        status[at[j]] = kInSpill;
        unbury(puts[j].key);
        spilled_[puts[j].key] = Spilled{puts[j].len, next_gen_++, false};
        st_.spilled_direct++;
    }
    clear_error();
}

void ColdTier::spill_get_locked(std::span<GetItem> items, std::vector<int> &status, const std::vector<char> &in_spill) {
    std::vector<ColdSpill::GetItem> gets;
    std::vector<size_t> at;
    for (size_t i = 0; i < items.size(); i++) {
        if (!in_spill[i]) continue;
        GetItem &it = items[i];
        const Spilled &s = spilled_.at(it.key);
        it.len = s.len;
        if (it.cap < s.len || (s.len && !it.dst)) {
            status[i] = fail(SPECKV_ERANGE, "cold tier: key %llu holds %llu bytes, buffer has %zu",
                             (unsigned long long)it.key, (unsigned long long)s.len, it.cap);
            continue;
        }
        if (s.lost) {
            status[i] = fail(SPECKV_ENOENT, "cold tier: the L5 copy of key %llu is gone (evicted or deleted from the "
                                            "cluster): a miss",
                             (unsigned long long)it.key);
            continue;
        }
        gets.push_back(ColdSpill::GetItem{it.key, it.dst, size_t(s.len)});
        at.push_back(i);
    }
    if (gets.empty()) return;
    spill_->get(gets);
    for (size_t j = 0; j < gets.size(); j++) {
        const size_t i = at[j];
        if (gets[j].status == SPECKV_OK) {
            st_.spill_gets++;
            continue;
        }
        if (gets[j].status == SPECKV_ENOENT) {  // gone for good: later gets miss without asking
            spilled_.at(items[i].key).lost = true;
            st_.spill_lost++;
            status[i] = fail(SPECKV_ENOENT, "cold tier: the L5 copy of key %llu is gone (evicted, deleted or "
                                            "overwritten in the cluster): a miss",
                             (unsigned long long)items[i].key);
        } else {
            st_.spill_failures++;
            status[i] = fail(SPECKV_EIO, "cold tier: the L5 copy of key %llu could not be read (no answer from the "
                                         "cluster)",
                             (unsigned long long)items[i].key);
        }
    }
}

bool ColdTier::spill_forget_locked(uint64_t key) {
    auto s = spilled_.find(key);
    if (s == spilled_.end()) return false;
    spilled_.erase(s);
    spill_dead_.push_back(key);
    return true;
}

void ColdTier::spill_flush_locked() {
    if (spill_ && !spill_dead_.empty()) spill_->del(spill_dead_);
    spill_dead_.clear();
}

}  // namespace speckv
