// SPDX-License-Identifier: Apache-2.0
// The L4 cold tier's I/O engine: a batch of chunks through the staging slots,
// on io_uring (registered buffers when the kernel takes them) or plain
// pread/pwrite, with short transfers resumed and failures per chunk.
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

#include "tiers/cold_disk.h"
#include "tiers/cold_tier.h"
#include "util/status.h"

namespace speckv {
using namespace cold_disk;

// ---- the engine

int ColdTier::execute(bool write, std::vector<Chunk> &ch, const std::function<void(Chunk &, unsigned char *)> &fill,
                      const std::function<void(Chunk &, unsigned char *, int)> &done) {
    std::vector<int> free_slots;
    for (int s = int(opt_.queue_depth) - 1; s >= 0; s--) free_slots.push_back(s);
    std::vector<size_t> resubmit;
    std::vector<std::pair<size_t, int>> completed;
    size_t next = 0, inflight = 0, queued = 0;
    const char *what = write ? "write" : "read";
    auto slot_ptr = [&](const Chunk &c) { return staging_ + size_t(c.slot) * opt_.slot_bytes; };

    auto issue = [&](size_t ci) {
        Chunk &c = ch[ci];
        unsigned char *buf = slot_ptr(c) + c.done;
        uint32_t n = c.len - c.done;
        uint64_t off = c.file_off + c.done;
        if (!ring_) {
            ssize_t r;
            do r = write ? ::pwrite(fd_, buf, n, off) : ::pread(fd_, buf, n, off);
            while (r < 0 && errno == EINTR);
            completed.emplace_back(ci, r < 0 ? -errno : int(r));
            return;
        }
        io_uring_sqe *sqe = io_uring_get_sqe(&ring_->ring);  // never NULL: inflight <= queue_depth
        if (fixed_) {
            if (write) io_uring_prep_write_fixed(sqe, fd_, buf, n, off, 0);
            else io_uring_prep_read_fixed(sqe, fd_, buf, n, off, 0);
        } else {
            if (write) io_uring_prep_write(sqe, fd_, buf, n, off);
            else io_uring_prep_read(sqe, fd_, buf, n, off);
        }
        io_uring_sqe_set_data64(sqe, ci);
        inflight++;
        queued++;
    };
    auto finish = [&](Chunk &c, int res) {  // res < 0: a failure; frees the slot
        done(c, slot_ptr(c), res);
        free_slots.push_back(c.slot);
        c.slot = -1;
    };

    int fatal = 0;
    for (;;) {
        for (size_t ci : resubmit) issue(ci);
        resubmit.clear();
        while (next < ch.size() && !free_slots.empty()) {
            Chunk &c = ch[next];
            c.slot = free_slots.back();
            free_slots.pop_back();
            if (write) fill(c, slot_ptr(c));
            issue(next++);
        }
        if (ring_ && queued) {
            int r;
            do r = io_uring_submit(&ring_->ring);
            while (r == -EINTR);
            if (r < 0) {
                fatal = r;
                break;
            }
            st_.submissions++;
            queued = 0;
        }
        if (ring_ && inflight) {
            io_uring_cqe *cqe;
            int r;
            do r = io_uring_wait_cqe(&ring_->ring, &cqe);
            while (r == -EINTR);
            if (r < 0) {
                fatal = r;
                break;
            }
            do {
                completed.emplace_back(size_t(io_uring_cqe_get_data64(cqe)), cqe->res);
                io_uring_cqe_seen(&ring_->ring, cqe);
                inflight--;
            } while (io_uring_peek_cqe(&ring_->ring, &cqe) == 0);
        }
        if (completed.empty() && resubmit.empty()) {
            if (next >= ch.size() && inflight == 0) break;
            continue;
        }
        for (auto [ci, res] : completed) {
            Chunk &c = ch[ci];
            uint32_t want = c.len - c.done;
            completions_++;
            st_.completions++;
            if (hook_) res = hook_(ColdCompletion{write, completions_, c.file_off + c.done, want, res});
            if (res < 0) {
                st_.io_errors++;
                if (is_nospace(-res)) st_.enospc++;
                int code = is_nospace(-res) ? SPECKV_ENOSPC : SPECKV_EIO;
                fail(code, "cold tier %s of %u bytes at offset %llu in %s: %s", what, want,
                     (unsigned long long)(c.file_off + c.done), opt_.path.c_str(), strerror(-res));
                finish(c, code);
            } else if (res == 0 || (uint32_t(res) < want && c.retries >= 3)) {
                st_.short_transfers++;
                fail(SPECKV_EIO, "cold tier: short %s at offset %llu in %s: %u of %u bytes", what,
                     (unsigned long long)(c.file_off + c.done), opt_.path.c_str(), unsigned(res), want);
                finish(c, SPECKV_EIO);
            } else if (uint32_t(res) < want) {
                st_.short_transfers++;
                c.done += uint32_t(res);
                c.retries++;
                resubmit.push_back(ci);
            } else {
                c.done = c.len;
                finish(c, SPECKV_OK);
            }
        }
        completed.clear();
    }
    if (fatal) {
        // The ring itself failed: what is in flight may still land in the
        // staging slots, so drain what we can and fail every unfinished chunk.
        fail(SPECKV_EIO, "cold tier: io_uring failed: %s", strerror(-fatal));
        if (ring_) {
            io_uring_queue_exit(&ring_->ring);
            ring_.reset();
            fixed_ = false;
            reason_ += reason_.empty() ? "io_uring failed: pread/pwrite" : "; io_uring failed: pread/pwrite";
        }
        for (auto &c : ch)
            if (c.slot >= 0 || c.done < c.len) done(c, nullptr, SPECKV_EIO);
        return SPECKV_EIO;
    }
    return SPECKV_OK;
}

}  // namespace speckv
