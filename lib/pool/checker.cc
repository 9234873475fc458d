// SPDX-License-Identifier: Apache-2.0
// `speckv pool check` (pool/checker.h): PoolChecker::run and its steps, in report order.
#include "pool/checker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>

#include "codec/codec.h"
#include "util/crc32c.h"
#include "backend/prefault.h"
#include "share/index_key.h"
#include "util/flush.h"
#include "util/log_env.h"
#include "select/nmp.h"
#include "util/status.h"
#include "config/uri.h"

#include "util/seqlock.h"

#include "pool/packed_image.h"
#include "pool/pool_internal.h"

namespace speckv {

using namespace fmt;

namespace {
// One line of `speckv pool check`'s report.
__attribute__((format(printf, 2, 3))) void problem(CheckReport *rep, const char *f, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    rep->problems.emplace_back(buf);
}
}  // namespace

// What check() counts while it walks the block table, then compares with
// the shared counters.
struct PoolChecker::CheckTally {
    uint64_t hwm = 0;
    std::vector<uint64_t> owned;  // pages some block holds (bitmap)
    std::vector<unsigned char> buf, dec;
    uint64_t live = 0, used = 0, published = 0, shared = 0, cold_n = 0, cold_b = 0;
    uint64_t live_mask = 0;
    std::vector<uint64_t> live_ids;
    uint32_t nt = 0;
    std::vector<uint64_t> tenant_pages;
};

int PoolChecker::run(CheckReport *rep) const {
    const Superblock &s = *sb();
    CheckTally t;
    check_lock_state(rep);
    t.hwm = sh()->slot_hwm;
    if (t.hwm > s.max_blocks) {
        problem(rep, "slot high-water mark %" PRIu64 " exceeds max_blocks %" PRIu64, t.hwm, s.max_blocks);
        t.hwm = s.max_blocks;
    }
    t.owned.assign((s.n_pages + 63) / 64, 0);
    t.buf.resize(s.page_size);
    t.dec.resize(s.page_size);
    for (uint32_t i = 0; i < kMaxAttach; i++) {
        const AttachRecord &a = sh()->attach[i];
        if (a.pid.load() && process_alive(a.pid.load(), a.start_time)) {
            t.live_mask |= uint64_t(1) << i;
            t.live_ids.push_back(a.id);
        }
    }
    t.nt = std::min<uint32_t>(sh()->tenants_used, kMaxTenants);
    t.tenant_pages.assign(t.nt, 0);
    for (uint64_t i = 0; i < s.max_blocks; i++) check_block(i, &t, rep);
    check_counters(t, rep);
    check_free_list(t.hwm, rep);
    for (const auto &a : sh()->attach) {
        uint32_t pid = a.pid.load();
        if (pid && !process_alive(pid, a.start_time))
            problem(rep, "process %u is recorded as attached but is gone (recovered on the next open)", pid);
    }
    share_.check(t.hwm, t.published, &rep->problems);
    xlate_index_.check(t.hwm, &rep->problems);
    check_shared_counters(t, rep);
    return SPECKV_OK;
}

void PoolChecker::check_lock_state(CheckReport *rep) const {
    const SharedHeader *h = sh();
    if (h->lock_magic != kLockMagic) problem(rep, "the pool lock is not initialised (metadata corrupt)");
    // The robust lock's word: the kernel marks it FUTEX_OWNER_DIED when its
    // holder dies. Whatever that holder was changing (an alloc, a publish,
    // recovery itself rebuilding the bitmap and index) is half-done; the next
    // locker recovers it. Read without taking the lock (check changes nothing).
    constexpr int kFutexOwnerDied = 0x40000000;
    if (h->lock_magic == kLockMagic &&
        (__atomic_load_n(&h->lock.__data.__lock, __ATOMIC_ACQUIRE) & kFutexOwnerDied)) {
        rep->recovery_pending = true;
        problem(rep, "a process died holding the pool lock (perhaps inside recovery): what it was changing is half-done "
                "and is recovered at the next open (or `speckv pool check --repair`); the problems below may be that");
    }
    if (h->move_slot.load())
        problem(rep, "a move of block slot %" PRIu64 " was cut short by a crash (repair finishes it)", h->move_slot.load() - 1);
}

void PoolChecker::check_block(uint64_t i, CheckTally *t, CheckReport *rep) const {
    const Superblock &s = *sb();
    const BlockRecord &r = blocks()[i];
    uint64_t hd = r.handle.load();
    if (!hd) return;
    if (i >= t->hwm) {
        problem(rep, "block slot %" PRIu64 " is live above the high-water mark", i);
        return;
    }
    rep->blocks_checked++;
    if ((hd & ((1u << kSlotBits) - 1)) != i + 1 || (hd >> kSlotBits) != r.generation) {
        problem(rep, "block slot %" PRIu64 ": handle 0x%" PRIx64 " does not match the slot", i, hd);
        return;
    }
    if (record_crc(r) != r.crc) {
        problem(rep, "block 0x%" PRIx64 ": record checksum mismatch", hd);
        return;
    }
    const bool cold = r.tier_seq.load() & 1;  // in L4: its pages are in the L4 file, not here
    const uint64_t np = r.packed_pages ? r.packed_pages : r.npages;  // packed: its image's pages
    if (!record_geometry_ok(s, r.first_page, r.packed_pages, r.npages, r.bytes, r.dtype, cold)) {
        problem(rep, "block 0x%" PRIx64 ": geometry out of bounds", hd);
        return;
    }
    t->live++;
    if (cold) {
        t->cold_n++;
        t->cold_b += r.bytes;
    } else {
        t->used += np;
        for (uint32_t k = 0; k < t->nt; k++)
            if (tenants()[k].tenant == r.tenant) t->tenant_pages[k] += np;
    }
    uint64_t holders = r.holders.load();
    if (r.state & kBlockPublished) {
        t->published++;
        t->shared += r.bytes;
        if (holders & kHoldersDying) problem(rep, "block 0x%" PRIx64 ": an eviction was cut short (repair finishes it)", hd);
        if (holders & ~kHoldersDying & ~t->live_mask)
            problem(rep, "block 0x%" PRIx64 ": holds references of processes that are gone (repair drops them)", hd);
        if (share_.find_published_locked(r.tenant, r.content_hash) != i + 1)
            problem(rep, "block 0x%" PRIx64 " is published but the hash index does not find it", hd);
    } else {
        if (holders & ~t->live_mask)
            problem(rep, "block 0x%" PRIx64 " is unpublished and pinned by processes that are gone (repair drops them)", hd);
        if (r.owner && std::find(t->live_ids.begin(), t->live_ids.end(), r.owner) == t->live_ids.end())
            problem(rep, "block 0x%" PRIx64 " is an unpublished block of a process that is gone (repair reclaims it)", hd);
    }
    if (!cold && r.packed_pages) check_packed(r, hd, rep);
    for (uint64_t p = r.first_page; !cold && p < r.first_page + np; p++) check_block_page(r, hd, p, t, rep);
}

void PoolChecker::check_block_page(const BlockRecord &r, uint64_t hd, uint64_t p, CheckTally *t, CheckReport *rep) const {
    const Superblock &s = *sb();
    if (t->owned[p / 64] >> (p % 64) & 1) problem(rep, "page %" PRIu64 " belongs to two blocks", p);
    t->owned[p / 64] |= uint64_t(1) << (p % 64);
    if (!(bitmap()[p / 64] >> (p % 64) & 1)) problem(rep, "page %" PRIu64 " is used by block 0x%" PRIx64 " but marked free", p, hd);
    const PageEntry &pe = pages()[p];
    uint64_t q = pe.seq.load();
    uint32_t fl = pe.flags.load();
    if (q & 1) {
        problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 ": a write is in progress or was torn by a crash", p, hd);
        return;
    }
    if (fl & kPageQuarantined) problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 " is quarantined", p, hd);
    if (bool(fl & kPagePacked) != bool(r.packed_pages))
        problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 " %s", p, hd,
            fl & kPagePacked ? "is flagged as a packed image's, but its block is not packed"
                             : "is not flagged as a packed image's, but its block is packed");
    if (fl & kPageZero) return;
    copy_from_pool(t->buf.data(), page_data(p), s.page_size);
    uint32_t got = crc32c(0, t->buf.data(), s.page_size);
    rep->pages_verified++;
    if (got != pe.crc.load() && pe.seq.load() == q) {
        problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 ": CRC32C mismatch (stored %08x, computed %08x)", p, hd,
                pe.crc.load(), got);
        return;
    }
    if ((fl & kPageSummary) && summaries_) {
        const unsigned char *sm = summaries_ + p * summary_bytes_;
        uint32_t ch = uint32_t(sm[8]) | uint32_t(sm[9]) << 8;
        size_t need = nmp::summary_size(ch);
        if ((need > summary_bytes_ || nmp::check_summary(sm, need, ch) != SPECKV_OK) && pe.seq.load() == q)
            problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 ": its summary fails its checks (%s)", p, hd,
                    need > summary_bytes_ ? "channel count too large" : last_error());
        clear_error();
    }
    if (fl & kPageCoded) {
        codec::Header ch;
        size_t n = 0;
        int rc = codec::peek_header(t->buf.data(), s.page_size, &ch);
        if (rc == SPECKV_OK) rc = codec::decode(t->buf.data(), ch.record_len(), t->dec.data(), t->dec.size(), &n);
        if (rc != SPECKV_OK && pe.seq.load() == q)
            problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 ": codec record does not decode (%s)", p, hd, last_error());
        clear_error();
    }
}

void PoolChecker::check_counters(const CheckTally &t, CheckReport *rep) const {
    const SharedHeader *h = sh();
    uint64_t leaked = 0;
    for (uint64_t w = 0; w < t.owned.size(); w++) leaked += __builtin_popcountll(bitmap()[w] & ~t.owned[w]);
    if (leaked) problem(rep, "%" PRIu64 " pages are marked used but belong to no block (reclaimed by recovery)", leaked);
    if (h->blocks_live.load() != t.live)
        problem(rep, "live-block counter says %" PRIu64 ", the block table holds %" PRIu64, h->blocks_live.load(), t.live);
    if (h->pages_used.load() != t.used + leaked)
        problem(rep, "used-page counter says %" PRIu64 ", the bitmap holds %" PRIu64, h->pages_used.load(), t.used + leaked);
    if (h->cold_blocks.load() != t.cold_n || h->cold_bytes.load() != t.cold_b)
        problem(rep, "L4 counters say %" PRIu64 " blocks / %" PRIu64 " bytes, the block table holds %" PRIu64 " / %" PRIu64,
                h->cold_blocks.load(), h->cold_bytes.load(), t.cold_n, t.cold_b);
}

void PoolChecker::check_free_list(uint64_t hwm, CheckReport *rep) const {
    const Superblock &s = *sb();
    uint64_t n = 0;
    for (uint64_t f = sh()->slot_free_head; f; n++) {
        if (f > hwm || n > s.max_blocks) {
            problem(rep, "free-slot list is damaged");
            break;
        }
        if (blocks()[f - 1].handle.load()) {
            problem(rep, "free-slot list holds live slot %" PRIu64, f - 1);
            break;
        }
        f = blocks()[f - 1].next_free;
    }
}

void PoolChecker::check_shared_counters(const CheckTally &t, CheckReport *rep) const {
    const SharedHeader *h = sh();
    if (h->blocks_published.load() != t.published || h->shared_bytes.load() != t.shared)
        problem(rep, "published-block counters say %" PRIu64 " blocks / %" PRIu64 " bytes, the table holds %" PRIu64 " / %" PRIu64,
                h->blocks_published.load(), h->shared_bytes.load(), t.published, t.shared);
    for (uint32_t k = 0; k < t.nt; k++)
        if (tenants()[k].used_pages.load() != t.tenant_pages[k])
            problem(rep, "tenant %" PRIu64 ": usage counter says %" PRIu64 " pages, its blocks hold %" PRIu64,
                    tenants()[k].tenant, tenants()[k].used_pages.load(), t.tenant_pages[k]);
}

// pool check of a packed block's image: a copy of it, through PackedImage's checks.
void PoolChecker::check_packed(const BlockRecord &r, uint64_t hd, CheckReport *rep) const {
    auto problem = [&](const char *f, auto... a) {
        char buf[512];
        std::snprintf(buf, sizeof buf, f, a...);
        rep->problems.emplace_back(buf);
    };
    const size_t ps = page_size_;
    const uint32_t np = r.npages;
    const uint64_t P = r.packed_pages;
    const size_t cap = size_t(P) * ps;
    std::vector<unsigned char> img(cap), dec(ps);
    copy_from_pool(img.data(), page_data(r.first_page), cap);
    PackHead ph;
    std::memcpy(&ph, img.data(), sizeof ph);
    const size_t sb = ph.summary_bytes;
    if (!PackedImage::head_ok(ph, hd, np, r.bytes, cap, uint32_t(ps), summary_bytes_)) {
        problem("block 0x%" PRIx64 ": its packed image header does not match the block (pool pages %" PRIu64 "..%" PRIu64 ")",
                hd, r.first_page, r.first_page + P - 1);
        return;
    }
    PackHead z = ph;
    z.dir_crc = 0;
    std::memcpy(img.data(), &z, sizeof z);
    if (crc32c(0, img.data(), PackedImage::dir_bytes(np)) != ph.dir_crc) {
        problem("block 0x%" PRIx64 ": its packed directory fails its CRC32C", hd);
        return;
    }
    std::memcpy(img.data(), &ph, sizeof ph);
    size_t end = PackedImage::meta_bytes(ph);  // beyond entry_ok: records in page order, none overlapping
    for (uint32_t i = 0; i < np; i++) {
        PackEntry e;
        std::memcpy(&e, img.data() + sizeof(PackHead) + size_t(i) * sizeof(PackEntry), sizeof e);
        const bool zero = e.flags & kPageZero;
        if (!PackedImage::entry_ok(e, ph) || (!zero && e.off < end)) {
            problem("block 0x%" PRIx64 " page %u: its packed directory entry is out of bounds", hd, i);
            continue;
        }
        if (!zero) end = e.off + e.len;
        if (!zero && (e.flags & kPageCoded)) {
            size_t n = 0;
            if (codec::decode(img.data() + e.off, e.len, dec.data(), ps, &n) != SPECKV_OK)
                problem("block 0x%" PRIx64 " page %u (packed): codec record does not decode (%s)", hd, i, last_error());
            else if (n != std::min<uint64_t>(ps, r.bytes - uint64_t(i) * ps))
                problem("block 0x%" PRIx64 " page %u (packed): its record decodes to %zu bytes, not the page's", hd, i, n);
            clear_error();
        } else if (!zero && crc32c(0, img.data() + e.off, ps) != e.crc) {
            problem("block 0x%" PRIx64 " page %u (packed, in clear): CRC32C mismatch", hd, i);
        }
        if (sb && (e.flags & kPageSummary)) {
            const unsigned char *sm = img.data() + PackedImage::dir_bytes(np) + size_t(i) * sb;
            uint32_t ch = uint32_t(sm[8]) | uint32_t(sm[9]) << 8;
            size_t need = nmp::summary_size(ch);
            if (need > sb || nmp::check_summary(sm, need, ch) != SPECKV_OK)
                problem("block 0x%" PRIx64 " page %u (packed): its summary fails its checks (%s)", hd, i,
                        need > sb ? "channel count too large" : last_error());
            clear_error();
        }
    }
}

}  // namespace speckv
