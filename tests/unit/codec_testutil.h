// SPDX-License-Identifier: Apache-2.0
// Helpers of the tests of the codec in the pool and of packed blocks
// (test_codec_pool.cc, test_pack.cc): K/V-shaped FP16 values, block
// allocation and reads through the C API, and a raw view of a pool file.
#pragma once
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "pool/pool.h"
#include "pool/pool_format.h"
#include "speckv.h"

namespace codec_testutil {

// FP16 values shaped like K/V: smooth per channel, a few large channels.
inline std::vector<uint16_t> kv_values(size_t n, uint32_t seed, size_t channels = 64) {
    std::vector<uint16_t> v(n);
    for (size_t i = 0; i < n; i++) {
        size_t c = i % channels, t = i / channels;
        float x = std::sin(0.37f * float(c) + 0.011f * float(t) + float(seed)) * (c % 17 == 3 ? 6.0f : 0.8f) +
                  0.05f * std::cos(float(i * 7 + seed));
        v[i] = speckv::codec::fp32_to_fp16_rne(x);
    }
    return v;
}

inline speckv_pool_stats stats_of(speckv_pool *p) {
    speckv_pool_stats s{};
    s.struct_size = sizeof s;
    REQUIRE(speckv_stats(p, &s) == SPECKV_OK);
    return s;
}

inline speckv_handle alloc_fp16(speckv_pool *p, size_t bytes, uint64_t req = 1, uint32_t layer = 0, uint32_t flags = 0) {
    speckv_hint h{};
    h.struct_size = sizeof h;
    h.request = req;
    h.layer = layer;
    h.token_count = 16;
    h.flags = flags;
    speckv_handle b = 0;
    REQUIRE_MESSAGE(speckv_alloc(p, bytes, SPECKV_DTYPE_FP16, &h, &b) == SPECKV_OK, speckv_errmsg());
    return b;
}

inline std::vector<unsigned char> read_all(speckv_pool *p, speckv_handle b, size_t bytes) {
    std::vector<unsigned char> v(bytes);
    REQUIRE_MESSAGE(speckv_access(p, b, 0, v.data(), bytes, 0) == SPECKV_OK, speckv_errmsg());
    return v;
}

inline speckv::BlockInfo info_of(speckv_pool *p, speckv_handle b) {
    std::vector<speckv::BlockInfo> all;
    REQUIRE(p->rep->list_blocks(&all) == SPECKV_OK);
    for (auto &i : all)
        if (i.handle == b) return i;
    FAIL("block not listed");
    return {};
}

// A second, raw view of a pool file: its bytes as on media.
struct Raw {
    int fd = -1;
    unsigned char *base = nullptr;
    size_t size = 0;
    explicit Raw(const std::string &path) {
        fd = ::open(path.c_str(), O_RDWR);
        REQUIRE(fd >= 0);
        size = static_cast<size_t>(lseek(fd, 0, SEEK_END));
        base = static_cast<unsigned char *>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        REQUIRE(base != MAP_FAILED);
    }
    ~Raw() {
        munmap(base, size);
        ::close(fd);
    }
    speckv::fmt::Superblock &sb() const { return *reinterpret_cast<speckv::fmt::Superblock *>(base); }
    speckv::fmt::PageEntry &entry(uint64_t p) {
        return reinterpret_cast<speckv::fmt::PageEntry *>(base + sb().page_table_off)[p];
    }
    unsigned char *page(uint64_t p) { return base + sb().data_off + p * sb().page_size; }
    // The codec record of logical page pg of a block, wherever it is: at the
    // start of its page, or in the block's packed image (null: not coded).
    unsigned char *record(const speckv::BlockInfo &bi, uint64_t pg) {
        if (!bi.packed_pages)
            return (entry(bi.first_page + pg).flags.load() & speckv::fmt::kPageCoded) ? page(bi.first_page + pg) : nullptr;
        speckv::fmt::PackEntry e;
        std::memcpy(&e, page(bi.first_page) + sizeof(speckv::fmt::PackHead) + pg * sizeof e, sizeof e);
        return (e.flags & speckv::fmt::kPageCoded) ? page(bi.first_page) + e.off : nullptr;
    }
    // The preset id in the header of logical page pg's record (it must be coded).
    int record_mode(const speckv::BlockInfo &bi, uint64_t pg) {
        unsigned char *rec = record(bi, pg);
        REQUIRE(rec != nullptr);
        speckv::codec::Header hd;
        REQUIRE(speckv::codec::peek_header(rec, 4096, &hd) == SPECKV_OK);
        return int(hd.mode);
    }
    // The directory of a packed block's image.
    speckv::fmt::PackEntry *dir(const speckv::BlockInfo &bi) {
        return reinterpret_cast<speckv::fmt::PackEntry *>(page(bi.first_page) + sizeof(speckv::fmt::PackHead));
    }
};

}  // namespace codec_testutil
