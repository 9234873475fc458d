// SPDX-License-Identifier: Apache-2.0
// The L4 cold tier's recovery: the index rebuilt from the extent headers in
// the file, newest generation first, each payload checked against its CRC32C.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "tiers/cold_disk.h"
#include "tiers/cold_tier.h"
#include "util/status.h"

namespace speckv {
using namespace cold_disk;

// ---- recovery: the index from the headers in the file

int ColdTier::recover() {
    struct stat st;
    if (fstat(fd_, &st) != 0) return fail(SPECKV_EIO, "cold tier: fstat: %s", strerror(errno));
    const uint32_t blk = opt_.block;
    uint64_t nblocks = std::min<uint64_t>(uint64_t(st.st_size) / blk, alloc_->total_blocks());
    unsigned char *buf = staging_;  // slot 0 (slot_bytes >= block)
    auto read_at = [&](uint64_t off, uint32_t n) -> bool {
        uint32_t got = 0;
        while (got < n) {
            ssize_t r = ::pread(fd_, buf + got, n - got, off + got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return false;
            got += uint32_t(r);
        }
        return true;
    };
    std::unordered_map<uint64_t, Extent> best;
    for (uint64_t b = 0; b < nblocks;) {
        if (!read_at(b * blk, blk)) return fail(SPECKV_EIO, "cold tier: reading %s at block %llu: %s", opt_.path.c_str(),
                                                 (unsigned long long)b, strerror(errno));
        DiskHeader h;
        uint64_t nb = 0;
        const char *why = nullptr;
        bool intact = false;
        if (decode_header({buf, blk}, blk, b, nblocks, &h, &nb, &why, &intact) != SPECKV_OK) {
            // Zeroed (dropped, never written) blocks and payload bytes are
            // the common case; a header with a valid CRC that describes no
            // valid extent is counted.
            if (intact) st_.bad_headers++;
            b++;
            continue;
        }
        // Check the payload CRC, reading the extent slot by slot.
        uint32_t crc = 0;
        uint64_t bytes = nb * blk;
        bool ok = true;
        for (uint64_t s = 0; s < bytes && ok; s += opt_.slot_bytes) {
            uint32_t n = uint32_t(std::min<uint64_t>(opt_.slot_bytes, bytes - s));
            if (!read_at(b * blk + s, n)) {
                ok = false;
                break;
            }
            uint64_t lo, hi;
            if (payload_part(s, n, h.len, &lo, &hi)) crc = crc32c(crc, buf + (lo - s), hi - lo);
        }
        if (ok && crc == h.crc) {
            auto [pos, ins] = best.try_emplace(h.key, Extent{b, nb, h.len, h.gen, h.crc});
            if (!ins && pos->second.gen < h.gen) pos->second = Extent{b, nb, h.len, h.gen, h.crc};
            next_gen_ = std::max(next_gen_, h.gen + 1);
            b += nb;
        } else {
            b++;
        }
    }
    // Newest first: an older extent (of any key) that overlaps a newer one is
    // stale — its header survived, its blocks were reused.
    std::vector<std::pair<uint64_t, Extent>> order(best.begin(), best.end());
    std::sort(order.begin(), order.end(), [](const auto &a, const auto &b) { return a.second.gen > b.second.gen; });
    for (auto &[k, e] : order) {
        if (!alloc_->reserve(e.first_block, e.blocks)) continue;  // overlaps a newer extent: stale
        index_.emplace(k, e);
    }
    return SPECKV_OK;
}

}  // namespace speckv
