// SPDX-License-Identifier: Apache-2.0
// The fast paths added for speed (issue #3) against independent models:
// FP16 kernels of every table (with and without the AVX-512 VBMI/FP16
// extensions) against the scalar definitions, and the RLE / Rice streams of
// real records against a plain bit-serial model written from docs §6.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "codec_test_util.h"
#include "util/crc32c.h"
#include "speckv.h"
#include "util/status.h"

namespace c = speckv::codec;

namespace {

std::vector<const c::Kernels *> tables() {
    std::vector<const c::Kernels *> v{&c::kScalarKernels};
    if (c::avx2_kernels()) v.push_back(c::avx2_kernels());
    if (c::avx512_kernels()) v.push_back(c::avx512_kernels());
    return v;
}

// FP16 bit patterns of several kinds; kind 0 may hold NaN/Inf.
std::vector<uint16_t> fp16_page(std::mt19937_64 &rng, size_t n, int kind) {
    std::vector<uint16_t> h(n);
    for (auto &x : h) {
        uint16_t r = uint16_t(rng());
        switch (kind) {
            case 0: x = r; break;                                           // anything
            case 1: x = uint16_t((r & 0x8000) | ((r & 0x7FFF) % 0x7C00)); break;  // finite
            case 2: x = uint16_t(r & 0x83FF); break;                        // subnormals, +-0
            case 3: x = (r & 1) ? 0x8000 : 0; break;                        // zeros, -0
            case 4: x = uint16_t((r & 0x8000) | ((r % 3) ? 0x7BFF : (r & 0x03FF))); break;  // +-65504, subnormal
            default: x = uint16_t((r & 0x8000) | (((r >> 3) % 4 + 13) << 10) | (r & 0x3FF)); break;  // narrow
        }
    }
    if (kind == 5 && n > 3) h[n / 2] = 0x0001;  // min subnormal among normals
    return h;
}

// docs §3.2 (the same integer steps as codec_ref.cc's make_scale).
bool scale_for(uint32_t A, unsigned bits, uint32_t *es, uint32_t *r) {
    if (A < 0x800000u) return *es = 0, *r = 0, true;
    uint32_t Em = A >> 23, Mm = 0x8000u | ((A >> 8) & 0x7FFFu), L = bits - 1, Q = (1u << L) - 1, j = L;
    if (Em < 27 || Em > 226) return false;
    uint32_t Ms = ((Mm << j) + 256 * Q - 1) / (256 * Q);
    if (Ms >= 256) j = L - 1, Ms = ((Mm << j) + 256 * Q - 1) / (256 * Q);
    *es = Em - j, *r = 0x7FFFFFu / Ms;
    return true;
}

struct ExtGuard {  // restores the AVX-512 extensions whatever a test did
    ~ExtGuard() { c::avx512_extensions(1); }
};

// decode() of a bad record on every implementation (and, on AVX-512, with
// and without the extensions), into dst at every offset of a 64-byte line
// with a cap past the decoded size: the reference's return code and
// message, and nothing written outside [dst, dst + cap). What dst holds on
// an error is unspecified (codec.h), so that is all a test may ask.
void check_rejected_alike(const std::vector<uint8_t> &bad, size_t decoded) {
    ExtGuard guard;
    std::vector<uint8_t> ref(decoded);
    size_t n = 0;
    const int rc0 = c::decode(bad.data(), bad.size(), ref.data(), ref.size(), &n, c::Impl::scalar);
    REQUIRE(rc0 == SPECKV_ECORRUPT);
    const std::string e0 = speckv::last_error();
    const size_t cap = decoded + 24;
    std::vector<uint8_t> buf(cap + 192);
    for (c::Impl impl : {c::Impl::scalar, c::Impl::avx2, c::Impl::avx512, c::Impl::best}) {
        if (!c::impl_available(impl)) continue;
        for (int ext : {1, 0}) {
            c::avx512_extensions(ext);
            for (size_t off : {size_t(64), size_t(65), size_t(80), size_t(94), size_t(96), size_t(127)}) {
                INFO("impl " << c::impl_name(impl) << " ext " << ext << " dst offset " << off % 64);
                std::fill(buf.begin(), buf.end(), uint8_t(0xCD));
                REQUIRE(c::decode(bad.data(), bad.size(), buf.data() + off, cap, &n, impl) == rc0);
                REQUIRE(std::string(speckv::last_error()) == e0);
                REQUIRE(std::count(buf.begin(), buf.begin() + long(off), uint8_t(0xCD)) == long(off));
                REQUIRE(std::count(buf.begin() + long(off + cap), buf.end(), uint8_t(0xCD)) == long(buf.size() - off - cap));
            }
        }
    }
}

}  // namespace

TEST_CASE("codec fast: FP16 absmax / quantiser / dequantiser / undelta equal the scalar definitions") {
    ExtGuard guard;
    std::mt19937_64 rng(2024);
    const size_t sizes[] = {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 129, 2048};
    for (int ext = 1; ext >= 0; ext--) {
        c::avx512_extensions(ext);
        for (const c::Kernels *K : tables()) {
            INFO("table " << K->name << " ext " << ext);
            for (int it = 0; it < 400; it++) {
                const size_t n = sizes[rng() % 14];
                const int kind = int(rng() % 6);
                auto h = fp16_page(rng, n, kind);
                std::vector<uint32_t> u(n);
                const bool fin = c::canon_scalar(SPECKV_DTYPE_FP16, h.data(), n, u.data());
                uint32_t A0 = 0, A1 = 0xDEAD;
                for (uint32_t x : u) A0 = std::max(A0, x & 0x7FFFFF00u);
                REQUIRE(K->absmax_fp16(h.data(), n, &A1) == fin);
                if (!fin) continue;
                REQUIRE(A1 == A0);
                const unsigned bits = 3 + unsigned(rng() % 6);
                const uint32_t Q = (1u << (bits - 1)) - 1;
                uint32_t es, r;
                if (!scale_for(A0, bits, &es, &r)) continue;
                std::vector<int8_t> q0(n), q1(n, 99);
                for (size_t i = 0; i < n; i++) q0[i] = int8_t(c::quant_one(u[i], es, r, Q));
                K->quant_const_fp16(h.data(), n, es, r, Q, q1.data());
                REQUIRE(q0 == q1);
            }
            for (int it = 0; it < 400; it++) {
                const size_t n = sizes[rng() % 14];
                // every scale exponent (incl. the FP16-normal window 113..142 and its edges), and 0
                const uint32_t E = it < 220 ? 20 + uint32_t(it) % 207 : 110 + uint32_t(rng() % 36);
                const uint16_t scale = (it % 37 == 0) ? 0 : uint16_t((E << 7) | (rng() & 0x7F));
                const uint32_t Q = (it % 3) ? 127 : 3 + uint32_t(rng() % 60);
                std::vector<int8_t> q(n);
                for (auto &x : q) x = int8_t(int(rng() % (2 * Q + 1)) - int(Q));
                if (n > 2) q[0] = int8_t(Q), q[1] = int8_t(-int(Q)), q[2] = 0;
                for (int dt : {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32}) {
                    std::vector<uint8_t> o0(4 * n), o1(4 * n, 0xAB);
                    c::dequant_const_scalar(q.data(), n, scale, dt, o0.data());
                    K->dequant_const(q.data(), n, scale, dt, o1.data());
                    REQUIRE(std::memcmp(o0.data(), o1.data(), n * c::dtype_size(dt)) == 0);
                }
            }
            for (int it = 0; it < 300; it++) {
                const size_t n = sizes[rng() % 14] + size_t(rng() % 3);
                std::vector<uint8_t> b(n);
                const uint32_t Q = (it % 4 == 0) ? 127 : 3 + uint32_t(rng() % 125);
                for (auto &x : b) x = (it % 2) ? uint8_t(rng() % 3 - 1) : uint8_t(rng());
                const bool delta = rng() & 1;
                std::vector<int8_t> s0(n), s1(n);
                const bool ok0 = c::undelta_scalar(b.data(), n, delta, Q, s0.data());
                REQUIRE(K->undelta(b.data(), n, delta, Q, s1.data()) == ok0);
                REQUIRE(s0 == s1);
            }
        }
    }
}

TEST_CASE("codec fast: range_ok of every table equals the scalar check") {
    std::mt19937_64 rng(4242);
    const size_t sizes[] = {0, 1, 15, 16, 17, 31, 32, 63, 64, 65, 127, 128, 129, 200, 2047, 2048, 2049};
    for (const c::Kernels *K : tables()) {
        INFO("table " << K->name);
        for (int it = 0; it < 3000; it++) {
            const size_t n = sizes[rng() % 17];
            const uint32_t Q = (it % 3 == 0) ? 127 : 3 + uint32_t(rng() % 125);
            std::vector<uint8_t> b(n);
            for (auto &x : b) x = uint8_t(int(rng() % (2 * Q + 1)) - int(Q));
            // one out-of-range byte (or none) at a random place, incl. the tail
            if (n && (it & 1)) {
                const int v = (rng() & 1) ? int(Q) + 1 + int(rng() % (128 - Q)) : -int(Q) - 1 - int(rng() % (129 - Q));
                b[rng() % n] = uint8_t(int8_t(v));
            }
            bool ok0 = true;
            for (uint8_t x : b) ok0 &= int8_t(x) <= int(Q) && int8_t(x) >= -int(Q);
            REQUIRE(c::range_ok_scalar(b.data(), n, Q) == ok0);
            REQUIRE(K->range_ok(b.data(), n, Q) == ok0);
        }
    }
}

TEST_CASE("codec fast: int8 decode rejects an out-of-range value on every path, as the reference does") {
    std::mt19937_64 rng(99);
    std::vector<uint16_t> h = fp16_page(rng, 2048, 1);
    std::vector<uint8_t> rec(c::max_record_size(4096));
    size_t len = 0;
    REQUIRE(c::encode(c::Mode::int8, SPECKV_DTYPE_FP16, h.data(), 4096, {32}, rec.data(), rec.size(), &len) == SPECKV_OK);
    rec.resize(len);
    REQUIRE(rec[3] == uint8_t(c::Mode::int8));
    for (size_t pos : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(1000), size_t(2040), size_t(2047)}) {
        std::vector<uint8_t> bad = rec;
        bad[c::kHeaderSize + 2 + pos] = 0x80;  // -128 > Q = 127
        const uint32_t crc = speckv::crc32c(speckv::crc32c(0, bad.data(), 20), bad.data() + c::kHeaderSize, len - c::kHeaderSize);
        for (int k = 0; k < 4; k++) bad[20 + size_t(k)] = uint8_t(crc >> (8 * k));
        check_rejected_alike(bad, 4096);
        REQUIRE(std::string(speckv::last_error()).find("value -128 at " + std::to_string(pos)) != std::string::npos);
    }
}

TEST_CASE("codec fast: records identical with and without the AVX-512 extensions") {
    ExtGuard guard;
    if (!c::avx512_extensions(-1)) {
        MESSAGE("no AVX-512 VBMI/FP16 on this CPU");
        return;
    }
    std::mt19937_64 rng(77);
    const c::Mode modes[] = {c::Mode::int8, c::Mode::paper, c::Mode::vp6, c::Mode::vp5, c::Mode::k6, c::Mode::k5,
                             c::Mode::v8, c::Mode::p8r};
    for (int it = 0; it < 600; it++) {
        const size_t n = (it % 5) ? 2048 : 1 + rng() % 300;
        auto h = fp16_page(rng, n, int(rng() % 6));
        std::vector<uint8_t> src(2 * n);
        std::memcpy(src.data(), h.data(), 2 * n);
        const c::Mode m = modes[rng() % 8];
        for (int ext : {0, 1}) {
            c::avx512_extensions(ext);
            codec_test::cross_check(c::Impl::avx512, m, SPECKV_DTYPE_FP16, src, 32);
        }
    }
}

// ---- a plain model of §6.1 / §6.2, one bit at a time

namespace {

struct Bits {
    const uint8_t *p;
    size_t len, pos = 0;  // pos in bits
    bool over = false;
    uint32_t get(unsigned n) {
        uint32_t v = 0;
        for (unsigned i = 0; i < n; i++, pos++) {
            if (pos >= 8 * len) {
                over = true;
                continue;
            }
            v |= uint32_t((p[pos / 8] >> (pos % 8)) & 1) << i;
        }
        return v;
    }
};

// Returns false where the spec says corrupt.
bool model_rice_decode(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, std::vector<int> *s) {
    const int Q = (1 << (bits - 1)) - 1;
    Bits br{p, len};
    int prev = 0;
    for (size_t b0 = 0; b0 < n; b0 += 64) {
        unsigned k = br.get(3);
        for (size_t i = b0; i < std::min(n, b0 + 64); i++) {
            unsigned u = 0;
            while (u < 15 && br.get(1)) u++;
            uint32_t z = u < 15 ? (u << k) | br.get(k) : br.get(bits + 1);
            if (br.over || z > uint32_t(4 * Q)) return false;
            int d = (z & 1) ? -int(z >> 1) - 1 : int(z >> 1);
            int v = d + (delta ? prev : 0);
            if (v > Q || v < -Q) return false;
            s->push_back(v);
            prev = v;
        }
    }
    if ((br.pos + 7) / 8 != len) return false;
    while (br.pos % 8)
        if (br.get(1)) return false;
    return true;
}

std::vector<uint8_t> model_rice_encode(const std::vector<int> &s, bool delta, unsigned bits) {
    std::vector<uint8_t> out;
    size_t nbit = 0;
    auto put = [&](uint32_t v, unsigned n) {
        for (unsigned i = 0; i < n; i++, nbit++) {
            if (nbit % 8 == 0) out.push_back(0);
            out.back() |= uint8_t(((v >> i) & 1) << (nbit % 8));
        }
    };
    int prev = 0;
    std::vector<uint32_t> z;
    for (int v : s) {
        int d = v - (delta ? prev : 0);
        z.push_back(d >= 0 ? uint32_t(2 * d) : uint32_t(-2 * d - 1));
        prev = v;
    }
    for (size_t b0 = 0; b0 < z.size(); b0 += 64) {
        const size_t e = std::min(z.size(), b0 + 64);
        unsigned bk = 0;
        uint64_t best = ~0ull;
        for (unsigned k = 0; k < 8; k++) {
            uint64_t cost = 0;
            for (size_t i = b0; i < e; i++) cost += (z[i] >> k) < 15 ? (z[i] >> k) + 1 + k : 15 + bits + 1;
            if (cost < best) best = cost, bk = k;
        }
        put(bk, 3);
        for (size_t i = b0; i < e; i++) {
            uint32_t u = z[i] >> bk;
            if (u < 15) {
                put((1u << u) - 1, u + 1);
                put(z[i] & ((1u << bk) - 1), bk);
            } else {
                put(0x7FFF, 15);
                put(z[i], bits + 1);
            }
        }
    }
    return out;
}

std::vector<uint8_t> model_rle_encode(const std::vector<uint8_t> &b) {
    std::vector<uint8_t> o;
    const size_t n = b.size();
    auto run3 = [&](size_t j) { return j + 2 < n && b[j] == b[j + 1] && b[j] == b[j + 2]; };
    for (size_t i = 0; i < n;) {
        if (run3(i)) {
            size_t r = 3;
            while (i + r < n && r < 130 && b[i + r] == b[i]) r++;
            o.push_back(uint8_t(0x80 | (r - 3)));
            o.push_back(b[i]);
            i += r;
        } else {
            size_t j = i + 1;
            while (j < n && j - i < 128 && !run3(j)) j++;
            o.push_back(uint8_t(j - i - 1));
            o.insert(o.end(), b.begin() + long(i), b.begin() + long(j));
            i = j;
        }
    }
    return o;
}

void fix_crc(std::vector<uint8_t> &rec) {
    uint32_t crc = speckv::crc32c(0, rec.data(), 20);
    crc = speckv::crc32c(crc, rec.data() + 24, rec.size() - 24);
    std::memcpy(&rec[20], &crc, 4);
}

}  // namespace

TEST_CASE("codec fast: Rice and RLE streams equal a bit-serial model; corrupt streams rejected alike") {
    std::mt19937_64 rng(99);
    const c::Mode modes[] = {c::Mode::vp6, c::Mode::vp5, c::Mode::k6, c::Mode::k5, c::Mode::vp8, c::Mode::v6,
                             c::Mode::k4, c::Mode::p8r, c::Mode::paper, c::Mode::k10, c::Mode::k12};
    size_t checked = 0;
    for (int it = 0; it < 500; it++) {
        const size_t n = (it % 4) ? 2048 : 1 + rng() % 400;
        const int dt = (it % 3 == 0) ? SPECKV_DTYPE_BF16 : SPECKV_DTYPE_FP16;
        auto src = codec_test::random_page(rng, dt, n, int(rng() % 4));
        const c::Mode m = modes[rng() % 11];
        const c::Impl impl = (it & 1) ? c::Impl::best : c::Impl::scalar;
        std::vector<uint8_t> rec(c::max_record_size(src.size()));
        size_t len = 0;
        REQUIRE(c::encode(m, dt, src.data(), src.size(), {32}, rec.data(), rec.size(), &len, impl) == SPECKV_OK);
        rec.resize(len);
        c::Header hd;
        REQUIRE(c::peek_header(rec.data(), len, &hd) == SPECKV_OK);
        if (hd.mode == c::Mode::raw) continue;
        const size_t G = hd.params.group == 0 ? 1 : hd.params.group == 1 ? hd.channels : hd.count / hd.channels;
        const size_t off = 24 + 2 * G, slen = len - off;
        const bool delta = hd.params.order != 0;
        if (hd.params.entropy == 2) {
            std::vector<int> s;
            REQUIRE(model_rice_decode(rec.data() + off, slen, hd.count, delta, hd.params.bits, &s));
            auto again = model_rice_encode(s, delta, hd.params.bits);
            REQUIRE(again.size() == slen);
            REQUIRE(std::memcmp(again.data(), rec.data() + off, slen) == 0);
            // Corrupt the stream: the codec rejects exactly when the model does.
            for (int f = 0; f < 6; f++) {
                auto bad = rec;
                const int how = int(rng() % 3);
                if (how == 0) bad[off + rng() % slen] ^= uint8_t(1u << (rng() % 8));
                else if (how == 1) bad[off + rng() % slen] = uint8_t(rng());
                else if (slen > 1) {  // truncate the stream (header length fixed up)
                    size_t cut = 1 + rng() % std::min<size_t>(slen - 1, 40);
                    bad.resize(bad.size() - cut);
                    uint32_t pl = uint32_t(bad.size() - 24);
                    std::memcpy(&bad[16], &pl, 4);
                }
                fix_crc(bad);
                std::vector<int> s2;
                const size_t bl = bad.size() - off;
                const bool model_ok = model_rice_decode(bad.data() + off, bl, hd.count, delta, hd.params.bits, &s2);
                std::vector<uint8_t> out(hd.decoded_bytes());
                size_t ob = 0;
                for (c::Impl di : {c::Impl::scalar, c::Impl::best}) {
                    int rc = c::decode(bad.data(), bad.size(), out.data(), out.size(), &ob, di);
                    INFO("mode " << c::mode_name(m) << " how " << how);
                    CHECK((rc == SPECKV_OK) == model_ok);
                }
            }
            checked++;
        } else if (hd.params.entropy == 1) {
            // Rebuild the delta bytes from the decoded stream's RLE model: decode
            // the record's RLE, re-encode with the model, compare.
            std::vector<uint8_t> bytes;
            const uint8_t *p = rec.data() + off;
            for (size_t i = 0; i < slen;) {
                uint8_t t = p[i++];
                if (t < 0x80) bytes.insert(bytes.end(), p + i, p + i + t + 1), i += size_t(t) + 1;
                else bytes.insert(bytes.end(), size_t(t & 0x7F) + 3, p[i++]);
            }
            REQUIRE(bytes.size() == hd.count);
            auto again = model_rle_encode(bytes);
            REQUIRE(again.size() == slen);
            REQUIRE(std::memcmp(again.data(), p, slen) == 0);
            checked++;
        }
    }
    CHECK(checked > 200);
}

// ---- the FP16 quantiser's fast path (16-bit lanes, vpmulhrsw rounding) on
// every FP16 value, and the division-free scale of make_scale.

namespace {

// docs §3.2 with the scale field too (make_scale's division-free form is
// compared with this plain one through the records).
bool scale_field_for(uint32_t A, unsigned bits, uint16_t *field) {
    if (A < 0x800000u) return *field = 0, true;
    uint32_t Em = A >> 23, Mm = 0x8000u | ((A >> 8) & 0x7FFFu), L = bits - 1, Q = (1u << L) - 1, j = L;
    if (Em < 27 || Em > 226) return false;
    uint32_t Ms = ((Mm << j) + 256 * Q - 1) / (256 * Q);
    if (Ms >= 256) j = L - 1, Ms = ((Mm << j) + 256 * Q - 1) / (256 * Q);
    *field = uint16_t(((Em - j) << 7) | (Ms & 0x7F));
    return true;
}

}  // namespace

TEST_CASE("codec fast: FP16 quantiser on every FP16 value below every page maximum") {
    ExtGuard guard;
    std::mt19937_64 rng(31337);
    // Page maxima: every exponent field 0..30 (subnormal, the Es >= 114 fast
    // path and below it) with a low, middle and top fraction.
    std::vector<uint16_t> maxima;
    for (uint16_t e = 0; e <= 30; e++)
        for (uint16_t f : {uint16_t(1), uint16_t(0x155), uint16_t(0x3FF)}) maxima.push_back(uint16_t((e << 10) | f));
    for (int ext = 1; ext >= 0; ext--) {
        c::avx512_extensions(ext);
        for (const c::Kernels *K : tables()) {
            INFO("table " << K->name << " ext " << ext);
            for (uint16_t hm : maxima) {
                const unsigned bits = hm % 3 == 0 ? 8 : hm % 3 == 1 ? 5 : 3;
                // all values with |h| <= hm, both signs, in a shuffled order;
                // zero padding to a multiple of 64 for some (no masked tail)
                std::vector<uint16_t> h;
                for (uint32_t a = 0; a <= hm; a++) h.push_back(uint16_t(a)), h.push_back(uint16_t(a | 0x8000));
                std::shuffle(h.begin(), h.end(), rng);
                if (hm & 2) h.resize((h.size() + 63) / 64 * 64, 0);
                const size_t n = h.size();
                std::vector<uint32_t> u(n);
                REQUIRE(c::canon_scalar(SPECKV_DTYPE_FP16, h.data(), n, u.data()));
                uint32_t A0 = 0, A1 = 0;
                for (uint32_t x : u) A0 = std::max(A0, x & 0x7FFFFF00u);
                REQUIRE(K->absmax_fp16(h.data(), n, &A1));
                REQUIRE(A1 == A0);
                const uint32_t Q = (1u << (bits - 1)) - 1;
                uint32_t es, r;
                REQUIRE(scale_for(A0, bits, &es, &r));
                std::vector<int8_t> q0(n), q1(n, 99);
                for (size_t i = 0; i < n; i++) q0[i] = int8_t(c::quant_one(u[i], es, r, Q));
                K->quant_const_fp16(h.data(), n, es, r, Q, q1.data());
                REQUIRE(q0 == q1);
            }
        }
    }
}

TEST_CASE("codec fast: the scale of an int8 record for every FP16 page maximum and b 3..8") {
    // A 4-value page [m, -m/2, 0, smallest subnormal] for every finite FP16
    // magnitude m: the record's scale field against docs §3.2 by division,
    // and every implementation's record against the scalar one.
    std::vector<uint8_t> rec(c::max_record_size(8)), r1(rec.size());
    for (uint32_t m = 0; m < 0x7C00; m++) {
        const uint16_t page[4] = {uint16_t(m), uint16_t(0x8000 | (m >> 1)), 0, 1};
        uint32_t A = 0;
        for (uint16_t x : page) A = std::max(A, c::fp16_bits_to_u32(x) & 0x7FFFFF00u);
        for (unsigned bits = 3; bits <= 8; bits++) {
            const c::Params P{uint8_t(bits), c::kGroupPage, c::kOrderNone, c::kEntropyBytes};
            size_t len = 0;
            REQUIRE(c::encode_params(c::Mode::int8, P, SPECKV_DTYPE_FP16, page, 8, {1}, rec.data(), rec.size(), &len,
                                     c::Impl::scalar) == SPECKV_OK);
            uint16_t want;
            REQUIRE(scale_field_for(A, bits, &want));
            if (rec[3] != 0) {  // not bypassed (a 4-value page always fits: 2 + 4 < 8)
                uint16_t got;
                std::memcpy(&got, &rec[24], 2);
                REQUIRE(got == want);
            }
            for (c::Impl impl : codec_test::simd_impls()) {
                size_t l1 = 0;
                REQUIRE(c::encode_params(c::Mode::int8, P, SPECKV_DTYPE_FP16, page, 8, {1}, r1.data(), r1.size(), &l1,
                                         impl) == SPECKV_OK);
                REQUIRE(l1 == len);
                REQUIRE(std::memcmp(r1.data(), rec.data(), len) == 0);
            }
        }
    }
}

TEST_CASE("codec fast: delta bytes and RLE run starts of every table equal the definitions") {
    std::mt19937_64 rng(2718);
    for (const c::Kernels *K : tables()) {
        INFO("table " << K->name);
        for (int it = 0; it < 3000; it++) {
            const size_t n = (it % 7 == 0) ? 2048 : 1 + rng() % 300;
            const bool delta = rng() & 1;
            // runs of equal values, of equal steps (equal deltas), and noise
            std::vector<uint8_t> s(n);
            for (size_t i = 0; i < n;) {
                const size_t len = 1 + rng() % 9;
                const int kind = int(rng() % 3);
                const uint8_t v = uint8_t(rng() % 5), st = uint8_t(rng() % 3);
                for (size_t j = 0; j < len && i < n; j++, i++)
                    s[i] = kind == 0 ? v : kind == 1 ? uint8_t(v + st * j) : uint8_t(rng());
            }
            std::vector<uint8_t> d0(n), d1(n + 64, 0xEE);
            for (size_t i = 0; i < n; i++) d0[i] = delta ? uint8_t(s[i] - (i ? s[i - 1] : 0)) : s[i];
            const size_t words = n / 64 + 1;
            std::vector<uint64_t> r0(words, 0), r1(words, 0x5A5A5A5A5A5A5A5Aull);
            for (size_t j = 0; j + 2 < n; j++)
                if (d0[j] == d0[j + 1] && d0[j] == d0[j + 2]) r0[j / 64] |= uint64_t(1) << (j % 64);
            K->delta_runs(s.data(), n, delta, d1.data(), r1.data());
            REQUIRE(std::equal(d0.begin(), d0.end(), d1.begin()));
            REQUIRE(d1[n] == 0xEE);  // nothing written past n
            REQUIRE(r0 == r1);
            std::vector<uint8_t> d2(n);
            K->delta_runs(s.data(), n, delta, d2.data(), nullptr);
            REQUIRE(d0 == d2);
        }
    }
}

// Every (q, scale) a decoder can meet: q in [-127, 127] (both signs, 0), every
// valid scale field (0, and exponent 20..226 with each of the 128
// significands), through every table's dequant_const, with and without the
// AVX-512 extensions: the FP16 lookup table (pages of >= 256 values), the
// FP32 route (shorter runs: token groups, tails) and the AVX512-FP16 path
// where the CPU has it; BF16 and FP32 outputs too. The q of a page are the
// 255 values in a different order per scale, at several lengths and offsets
// (masked tails, unaligned q and output).
TEST_CASE("codec fast: dequantiser on every q and every scale field, every table, FP16/BF16/FP32") {
    ExtGuard guard;
    std::mt19937_64 rng(5150);
    std::vector<uint16_t> scales{0};
    for (uint32_t e = 20; e <= 226; e++)
        for (uint32_t m = 0; m < 128; m++) scales.push_back(uint16_t((e << 7) | m));
    const size_t lens[] = {2048, 255, 256, 300, 64, 31, 1};
    std::vector<int8_t> perm(255);
    for (int i = 0; i < 255; i++) perm[size_t(i)] = int8_t(i - 127);
    std::vector<int8_t> qbuf(2048 + 64);
    std::vector<uint8_t> want(4 * 2048), got(4 * 2048 + 64);
    size_t compared = 0;
    for (int ext = 1; ext >= 0; ext--) {
        c::avx512_extensions(ext);
        for (const c::Kernels *K : tables()) {
            INFO("table " << K->name << " ext " << ext);
            for (const uint16_t scale : scales) {
                std::shuffle(perm.begin(), perm.end(), rng);
                const size_t off = rng() % 64;  // q and output at any alignment
                for (size_t i = 0; i < 2048; i++) qbuf[off + i] = perm[i % 255];
                for (const int dt : {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32}) {
                    // BF16 and FP32 (kernels not specific to this CPU): two lengths.
                    for (const size_t n : lens) {
                        if (dt != SPECKV_DTYPE_FP16 && n != 2048 && n != 255) continue;
                        const size_t esz = c::dtype_size(dt);
                        c::dequant_const_scalar(qbuf.data() + off, n, scale, dt, want.data());
                        std::memset(got.data(), 0xA5, got.size());
                        K->dequant_const(qbuf.data() + off, n, scale, dt, got.data() + off);
                        if (std::memcmp(want.data(), got.data() + off, n * esz) != 0) {
                            for (size_t i = 0; i < n; i++) {
                                char msg[160];
                                std::snprintf(msg, sizeof msg, "table %s ext %d scale 0x%04x dtype %d n %zu q %d", K->name,
                                              ext, unsigned(scale), dt, n, int(qbuf[off + i]));
                                REQUIRE_MESSAGE(std::memcmp(want.data() + i * esz, got.data() + off + i * esz, esz) == 0,
                                                msg);
                            }
                        }
                        // nothing written outside [0, n)
                        REQUIRE(std::count(got.begin(), got.begin() + long(off), uint8_t(0xA5)) == long(off));
                        REQUIRE(got[off + n * esz] == 0xA5);
                        compared += n;
                    }
                }
            }
        }
    }
    MESSAGE("dequantised values compared: " << compared);
}

// range_ok reads aligned vectors around [b, b + n): every start offset in a
// 64-byte line, lengths that end inside the first line, on a line boundary or
// past it, and an out-of-range byte at the first, the last or any position.
TEST_CASE("codec fast: range_ok at every alignment and length, a bad byte anywhere") {
    std::mt19937_64 rng(31337);
    alignas(64) static uint8_t buf[64 * 40];
    const size_t lens[] = {1, 2, 5, 63, 64, 65, 100, 127, 128, 129, 191, 192, 193, 1000, 2048};
    for (const c::Kernels *K : tables()) {
        INFO("table " << K->name);
        for (size_t off = 0; off < 64; off++)
            for (const size_t n : lens)
                for (int it = 0; it < 8; it++) {
                    const uint32_t Q = (it & 1) ? 127 : 3 + uint32_t(rng() % 125);
                    // bytes just outside [off, off + n) are out of range: they must not count
                    std::memset(buf, 0x80, sizeof buf);
                    for (size_t i = 0; i < n; i++) buf[off + i] = uint8_t(int(rng() % (2 * Q + 1)) - int(Q));
                    bool ok0 = true;
                    if (it >= 2) {
                        const size_t pos = it == 2 ? 0 : it == 3 ? n - 1 : rng() % n;
                        const int v = (rng() & 1) ? int(Q) + 1 + int(rng() % (128 - Q)) : -int(Q) - 1 - int(rng() % (128 - Q));
                        buf[off + pos] = uint8_t(int8_t(v));
                        ok0 = false;
                    }
                    REQUIRE(c::range_ok_scalar(buf + off, n, Q) == ok0);
                    REQUIRE(K->range_ok(buf + off, n, Q) == ok0);
                }
    }
}

// The one-pass int8 kernels (where a table has them) against the separate
// steps: the CRC32C of every length and alignment against speckv::crc32c, the
// values against the scalar quantiser and dequantiser, *written exactly when
// the CRC and the range pass, and nothing written outside the n values.
TEST_CASE("codec fast: one-pass int8 encode/decode kernels equal the separate steps") {
    ExtGuard guard;
    std::mt19937_64 rng(8086);
    int tested = 0;
    for (int ext : {1, 0})  // with VBMI the decoder's one pass; without it, CRC and range, then the values
    for (const c::Kernels *K : tables()) {
        c::avx512_extensions(ext);
        if (!K->int8_decode_fp16 && !K->int8_encode_fp16) continue;
        INFO("table " << K->name << " ext " << ext);
        tested++;
        std::vector<uint8_t> buf(2 + 5000 + 128), out(2 * 5000 + 128), want(2 * 5000);
        const size_t lens[] = {1, 7, 63, 64, 65, 200, 255, 256, 257, 300, 511, 512, 513, 1000, 2047, 2048, 2049, 4096, 5000};
        for (int it = 0; it < 3000; it++) {
            const size_t n = it < 19 * 20 ? lens[it % 19] : 1 + rng() % 5000;
            const size_t off = rng() % 64;  // the payload's alignment
            const unsigned bits = 3 + unsigned(rng() % 6);
            const uint32_t Q = (1u << (bits - 1)) - 1;
            // encode: FP16 values of one kind, their scale as make_scale does it
            auto h = fp16_page(rng, n, 1 + int(rng() % 5));
            std::vector<uint32_t> u(n);
            c::canon_scalar(SPECKV_DTYPE_FP16, h.data(), n, u.data());
            uint32_t A = 0;
            for (uint32_t x : u) A = std::max(A, x & 0x7FFFFF00u);
            uint32_t es, r;
            if (!scale_for(A, bits, &es, &r)) continue;
            const uint32_t crc_in = uint32_t(rng());
            std::vector<int8_t> q0(n);
            c::quant_const_fp16_scalar(h.data(), n, es, r, Q, q0.data());
            if (K->int8_encode_fp16) {
                std::vector<int8_t> q1(n + 64, 0x55);
                const uint16_t field = uint16_t(rng());
                const uint8_t fb[2] = {uint8_t(field), uint8_t(field >> 8)};
                REQUIRE(K->int8_encode_fp16(h.data(), n, es, r, Q, field, q1.data() + off % 8, crc_in) ==
                        speckv::crc32c(speckv::crc32c(crc_in, fb, 2), q0.data(), n));
                REQUIRE(std::memcmp(q0.data(), q1.data() + off % 8, n) == 0);
                REQUIRE(q1[off % 8 + n] == 0x55);
            }
            if (!K->int8_decode_fp16) continue;
            // decode: a valid payload, one with a value out of range, one with a wrong CRC
            uint8_t *pl = buf.data() + off;
            const uint16_t scale = (it % 41 == 0) ? 0 : uint16_t(((es & 0xFF) << 7) | (rng() & 0x7F));
            pl[0] = uint8_t(scale), pl[1] = uint8_t(scale >> 8);
            std::memcpy(pl + 2, q0.data(), n);
            const int kind = it % 3;  // 0 valid, 1 out of range, 2 CRC mismatch
            if (kind == 1) pl[2 + rng() % n] = uint8_t(int8_t((rng() & 1) ? int(Q) + 1 + int(rng() % (128 - Q)) : -int(Q) - 1 - int(rng() % (128 - Q))));
            const uint32_t c0 = speckv::crc32c(crc_in, pl, 2 + n);
            const uint32_t stored = kind == 2 ? c0 ^ (1u << (rng() % 32)) : c0;
            const size_t ooff = rng() % 64;
            std::memset(out.data(), 0xCD, out.size());
            bool written = true;
            REQUIRE(K->int8_decode_fp16(crc_in, pl, n, Q, stored, out.data() + ooff, &written) == c0);
            REQUIRE(written == (kind == 0));
            // On a failed check dst[0, 2n) is unspecified; nothing around it is written.
            REQUIRE(std::count(out.begin(), out.begin() + long(ooff), uint8_t(0xCD)) == long(ooff));
            REQUIRE(std::count(out.begin() + long(ooff + 2 * n), out.end(), uint8_t(0xCD)) == long(out.size() - ooff - 2 * n));
            if (!written) continue;
            c::dequant_const_scalar(reinterpret_cast<const int8_t *>(pl + 2), n, scale, SPECKV_DTYPE_FP16, want.data());
            REQUIRE(std::memcmp(want.data(), out.data() + ooff, 2 * n) == 0);
            REQUIRE(std::count(out.begin(), out.begin() + long(ooff), uint8_t(0xCD)) == long(ooff));
            REQUIRE(out[ooff + 2 * n] == 0xCD);
        }
    }
    MESSAGE("tables with one-pass int8 kernels: " << tested);
}

TEST_CASE("codec fast: int8 decode with a bad CRC is rejected on every path as the reference does") {
    std::mt19937_64 rng(4040);
    std::vector<uint16_t> h = fp16_page(rng, 2048, 1);
    std::vector<uint8_t> rec(c::max_record_size(4096));
    size_t len = 0;
    REQUIRE(c::encode(c::Mode::int8, SPECKV_DTYPE_FP16, h.data(), 4096, {32}, rec.data(), rec.size(), &len) == SPECKV_OK);
    rec.resize(len);
    for (size_t pos : {size_t(20), size_t(24), size_t(25), size_t(26), size_t(33), size_t(34), size_t(1000), len - 57,
                       len - 1}) {
        std::vector<uint8_t> bad = rec;
        bad[pos] ^= 0x10;
        check_rejected_alike(bad, 4096);
        REQUIRE(std::string(speckv::last_error()).find("CRC32C mismatch") != std::string::npos);
        // A bad CRC and an out-of-range value: the CRC is what is reported.
        bad[c::kHeaderSize + 2 + 500] = 0x81;
        check_rejected_alike(bad, 4096);
        REQUIRE(std::string(speckv::last_error()).find("CRC32C mismatch") != std::string::npos);
    }
    // Short pages (the two-pass path) and lengths around the one-pass
    // kernel's edges, a bad CRC or a value out of range.
    for (size_t n : {size_t(1), size_t(100), size_t(255), size_t(256), size_t(257), size_t(271), size_t(300), size_t(1000)}) {
        std::vector<uint16_t> hn = fp16_page(rng, n, 1);
        std::vector<uint8_t> r(c::max_record_size(2 * n));
        size_t l = 0;
        REQUIRE(c::encode(c::Mode::int8, SPECKV_DTYPE_FP16, hn.data(), 2 * n, {1}, r.data(), r.size(), &l) == SPECKV_OK);
        r.resize(l);
        if (r[3] != uint8_t(c::Mode::int8)) continue;  // stored raw
        std::vector<uint8_t> bad = r;
        bad[l - 1] ^= 1;
        check_rejected_alike(bad, 2 * n);
        bad = r;
        bad[c::kHeaderSize + 2 + (n - 1)] = 0x80;
        const uint32_t crc = speckv::crc32c(speckv::crc32c(0, bad.data(), 20), bad.data() + c::kHeaderSize, l - c::kHeaderSize);
        for (int k = 0; k < 4; k++) bad[20 + size_t(k)] = uint8_t(crc >> (8 * k));
        check_rejected_alike(bad, 2 * n);
    }
}
