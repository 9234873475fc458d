// SPDX-License-Identifier: Apache-2.0
// Split Rice (docs/codec.md §18, entropy 3). The reference stage
// (lib/codec/codec_srice.cc) against a model written from §18's words (bit by
// bit, section by section), the worked example of §18 byte for byte, every
// corrupt condition of §18 one at a time, hostile records (truncated, bit
// flips, CRC fixed), the size bound against Rice, and every other
// implementation of the stage against the reference (same bytes, values,
// return codes and messages). Sanitizer builds run all of it: a read or
// write out of bounds is an ASan error.
#include <doctest/doctest.h>

#include <algorithm>
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

// ------------------------------------------------------------- §18 model

// An LSB-first bit string (docs/codec.md, notation).
struct Bits {
    std::vector<uint8_t> b;
    size_t n = 0;
    void put(uint64_t v, unsigned w) {
        for (unsigned i = 0; i < w; i++, n++) {
            if (n % 8 == 0) b.push_back(0);
            if ((v >> i) & 1) b.back() = uint8_t(b.back() | (1u << (n % 8)));
        }
    }
};

// The four sections of a stream, each a bit string; joined with zero padding.
struct Sections {
    Bits k, low, unary, esc;
    std::vector<uint8_t> join() const {
        std::vector<uint8_t> out;
        for (const Bits *s : {&k, &low, &unary, &esc}) out.insert(out.end(), s->b.begin(), s->b.end());
        return out;
    }
};

uint32_t zz(int32_t d) { return d >= 0 ? uint32_t(2 * d) : uint32_t(-2 * d - 1); }

std::vector<uint32_t> zs_of(const std::vector<int32_t> &s, bool delta) {
    std::vector<uint32_t> z(s.size());
    for (size_t i = 0; i < s.size(); i++) z[i] = zz(s[i] - (delta && i ? s[i - 1] : 0));
    return z;
}

// §18 "Parameter" (escape 16 + W) or §6.2 (escape 15 + W).
unsigned model_k(const uint32_t *z, size_t m, unsigned W, unsigned esc_cost) {
    unsigned bk = 0;
    uint64_t bc = ~uint64_t(0);
    for (unsigned k = 0; k < 8; k++) {
        uint64_t cst = 0;
        for (size_t i = 0; i < m; i++) cst += (z[i] >> k) < 15 ? (z[i] >> k) + 1 + k : esc_cost + W;
        if (cst < bc) bc = cst, bk = k;
    }
    return bk;
}

Sections model_sections(const std::vector<int32_t> &s, bool delta, unsigned bits) {
    const unsigned W = bits + 1;
    const auto z = zs_of(s, delta);
    Sections S;
    for (size_t b0 = 0; b0 < z.size(); b0 += 64) {
        const size_t m = std::min<size_t>(64, z.size() - b0);
        const unsigned k = model_k(&z[b0], m, W, 16);
        S.k.put(k, 4);
        for (size_t i = b0; i < b0 + m; i++) {
            const uint32_t u = z[i] >> k;
            S.low.put(z[i], k);
            S.unary.put(0, std::min(u, 15u));
            S.unary.put(1, 1);
            if (u >= 15) S.esc.put(u, W - k);
        }
    }
    return S;
}

std::vector<uint8_t> model_encode(const std::vector<int32_t> &s, bool delta, unsigned bits) {
    return model_sections(s, delta, bits).join();
}

// The Rice (§6.2) escapes of the same symbols: the size bound needs them.
size_t rice_escapes(const std::vector<int32_t> &s, bool delta, unsigned bits) {
    const auto z = zs_of(s, delta);
    size_t e = 0;
    for (size_t b0 = 0; b0 < z.size(); b0 += 64) {
        const size_t m = std::min<size_t>(64, z.size() - b0);
        const unsigned k = model_k(&z[b0], m, bits + 1, 15);
        for (size_t i = b0; i < b0 + m; i++) e += (z[i] >> k) >= 15;
    }
    return e;
}

// §18 "Size": with S the split and R the Rice stream bytes of n symbols
// (nb blocks, e Rice escapes): S - R <= floor((nb + e + 21 + 4 [nb odd]) / 8).
// (K: 4 bits a block instead of 3; one bit more per escape, and the split's k
// can only do better; up to 7 padding bits in each of three sections.)
size_t size_bound(size_t n, size_t rice_esc) {
    const size_t nb = (n + 63) / 64;
    return (nb + rice_esc + 21 + 4 * (nb & 1)) / 8;
}

// ---------------------------------------------------------- the stages

template <class Sym>
struct Stage {
    const char *name;
    size_t (*enc)(const Sym *, size_t, bool, unsigned, uint8_t *, size_t);
    int (*dec)(const uint8_t *, size_t, size_t, bool, unsigned, Sym *);
};

template <class Sym>
struct Stages;
template <>
struct Stages<int8_t> {
    static constexpr Stage<int8_t> ref = {"scalar", c::srice_encode8_scalar, c::srice_decode8_scalar};
    static constexpr unsigned bmin = 3, bmax = 8;
    static std::vector<Stage<int8_t>> fast() {
        std::vector<Stage<int8_t>> v;
        if (const c::Kernels *k = c::avx2_kernels()) v.push_back({"avx2", k->srice_encode8, k->srice_decode8});
        if (const c::Kernels *k = c::avx512_kernels()) v.push_back({"avx512", k->srice_encode8, k->srice_decode8});
        if (const c::RiceKernels *r = c::srice_avx512_kernels()) v.push_back({"srice_avx512", r->encode8, r->decode8});
        if (const c::RiceKernels *r = c::srice_avx2_kernels()) v.push_back({"srice_avx2", r->encode8, r->decode8});
        return v;
    }
};
template <>
struct Stages<int16_t> {
    static constexpr Stage<int16_t> ref = {"scalar", c::srice_encode16_scalar, c::srice_decode16_scalar};
    static constexpr unsigned bmin = 9, bmax = 12;
    static std::vector<Stage<int16_t>> fast() {
        std::vector<Stage<int16_t>> v;
        if (const c::Kernels *k = c::avx2_kernels()) v.push_back({"avx2", k->srice_encode16, k->srice_decode16});
        if (const c::Kernels *k = c::avx512_kernels()) v.push_back({"avx512", k->srice_encode16, k->srice_decode16});
        if (const c::RiceKernels *r = c::srice_avx512_kernels()) v.push_back({"srice_avx512", r->encode16, r->decode16});
        if (const c::RiceKernels *r = c::srice_avx2_kernels()) v.push_back({"srice_avx2", r->encode16, r->decode16});
        return v;
    }
};

// Symbols of b bits (|s| <= Q) of one of several kinds, escapes included.
std::vector<int32_t> symbols(std::mt19937_64 &rng, size_t n, unsigned bits, int kind) {
    const int Q = (1 << (bits - 1)) - 1;
    std::vector<int32_t> s(n);
    std::uniform_int_distribution<int> uq(-Q, Q);
    std::geometric_distribution<int> geo(0.35);
    const int cst = uq(rng);
    int walk = 0;
    for (size_t i = 0; i < n; i++) {
        int v = 0;
        switch (kind) {
            case 0: v = uq(rng); break;                                          // uniform
            case 1: v = std::min(Q, geo(rng)) * ((rng() & 1) ? 1 : -1); break;   // small
            case 2: v = 0; break;                                                // all zero
            case 3: v = cst; break;                                              // all equal
            case 4: v = (i & 1) ? Q : -Q; break;                                 // largest steps
            case 5: walk = std::clamp(walk + int(rng() % 5) - 2, -Q, Q), v = walk; break;  // random walk
            case 6: v = (rng() % 16 == 0) ? ((rng() & 1) ? Q : -Q) : int(rng() % 3) - 1; break;  // bursts
            case 7: v = (rng() % 40 == 0) ? uq(rng) : std::min(Q, geo(rng) * 3); break;  // escapes with k > 0
            default: v = (rng() & 1) ? Q : -Q; break;                            // +-Q only
        }
        s[i] = v;
    }
    return s;
}

template <class Sym>
std::vector<Sym> as(const std::vector<int32_t> &s) {
    return std::vector<Sym>(s.begin(), s.end());
}

constexpr size_t kSizes[] = {1, 2, 3, 31, 63, 64, 65, 127, 128, 129, 200, 1000, 2047, 2048, 2049, 4096};

// The reference stage against the model, round trips, capacities, the size
// bound; then every fast table against the reference, stream and values.
template <class Sym>
size_t check_streams(int iters, uint64_t seed, size_t *max_over_rice) {
    using T = Stages<Sym>;
    std::mt19937_64 rng(seed);
    const unsigned nbits = T::bmax - T::bmin + 1;
    size_t streams = 0;
    for (int it = 0; it < iters; it++) {
        const unsigned bits = T::bmin + unsigned(it % int(nbits));
        const size_t n = (it % 5 == 4) ? 1 + rng() % 5000 : kSizes[rng() % std::size(kSizes)];
        const bool delta = (it / int(nbits)) & 1;
        const int kind = int(rng() % 9);
        const auto s32 = symbols(rng, n, bits, kind);
        const auto s = as<Sym>(s32);
        INFO("bits " << bits << " n " << n << " delta " << delta << " kind " << kind);
        const auto want = model_encode(s32, delta, bits);
        std::vector<uint8_t> st(4 * n + 64, 0xA5);
        const size_t len = T::ref.enc(s.data(), n, delta, bits, st.data(), st.size());
        REQUIRE(len == want.size());
        REQUIRE(std::memcmp(st.data(), want.data(), len) == 0);
        for (size_t i = len; i < st.size(); i++) REQUIRE(st[i] == 0xA5);
        // Exact capacity fits, one byte less does not (and writes nothing past it).
        std::vector<uint8_t> e1(len + 16, 0xA5);
        REQUIRE(T::ref.enc(s.data(), n, delta, bits, e1.data(), len) == len);
        REQUIRE(T::ref.enc(s.data(), n, delta, bits, e1.data(), len - 1) == 0);
        // Decodes back, from exactly len bytes on the heap.
        std::vector<uint8_t> in(st.begin(), st.begin() + long(len));
        std::vector<Sym> back(n);
        INFO(speckv::last_error());
        REQUIRE(T::ref.dec(in.data(), len, n, delta, bits, back.data()) == SPECKV_OK);
        REQUIRE(back == s);
        // §18 "Size" against the Rice stream of the same symbols.
        std::vector<uint8_t> rs(4 * n + 64);
        const size_t rl = (sizeof(Sym) == 1 ? size_t(c::rice_encode8_scalar(reinterpret_cast<const int8_t *>(s.data()),
                                                                               n, delta, bits, rs.data(), rs.size()))
                                            : size_t(c::rice_encode16_scalar(reinterpret_cast<const int16_t *>(s.data()),
                                                                                n, delta, bits, rs.data(), rs.size())));
        REQUIRE(rl > 0);
        const size_t bound = size_bound(n, rice_escapes(s32, delta, bits));
        REQUIRE(len <= rl + bound);
        if (len > rl) *max_over_rice = std::max(*max_over_rice, len - rl);
        // Every other table: the same bytes and values.
        for (const auto &t : T::fast()) {
            INFO(t.name);
            const size_t caps[] = {st.size(), len, len - 1, size_t(rng() % (len + 1))};
            for (size_t cap : caps) {
                std::vector<uint8_t> r0(cap + 64, 0xA5), r1(cap + 64, 0xA5);
                const size_t l0 = T::ref.enc(s.data(), n, delta, bits, r0.data(), cap);
                const size_t l1 = t.enc(s.data(), n, delta, bits, r1.data(), cap);
                REQUIRE(l1 == l0);
                REQUIRE(r0 == r1);
            }
            std::vector<Sym> v1(n);
            REQUIRE(t.dec(in.data(), len, n, delta, bits, v1.data()) == SPECKV_OK);
            REQUIRE(v1 == s);
        }
        streams++;
    }
    return streams;
}

// Hostile streams, every table against the reference: the same return code,
// the same values when accepted, the same message when rejected.
template <class Sym>
void check_hostile(int iters, uint64_t seed, size_t *ok, size_t *rejected) {
    using T = Stages<Sym>;
    std::mt19937_64 rng(seed);
    const unsigned nbits = T::bmax - T::bmin + 1;
    for (int it = 0; it < iters; it++) {
        const unsigned bits = T::bmin + unsigned(it % int(nbits));
        const size_t n = (it % 5 == 4) ? 1 + rng() % 5000 : kSizes[rng() % std::size(kSizes)];
        const bool delta = (it / int(nbits)) & 1;
        const auto s = as<Sym>(symbols(rng, n, bits, int(rng() % 9)));
        std::vector<uint8_t> st(4 * n + 64);
        st.resize(T::ref.enc(s.data(), n, delta, bits, st.data(), st.size()));
        for (int f = 0; f < 14; f++) {
            std::vector<uint8_t> b = st;
            size_t dn = n;
            unsigned dbits = bits;
            bool ddelta = delta;
            switch (f) {
                case 0: break;  // valid
                case 1: b[rng() % b.size()] ^= uint8_t(1u << (rng() % 8)); break;
                case 2: b[rng() % b.size()] = uint8_t(rng()); break;
                case 3: b.resize(b.size() - std::min(b.size(), size_t(1 + rng() % 40))); break;  // truncated
                case 4: b.push_back(uint8_t(rng() % 2 ? 0 : rng())); break;                      // trailing byte
                case 5: b.back() |= 0x80; break;                                                 // a last bit
                case 6: dn = n + 1 + rng() % 70; break;                                          // lying count
                case 7: dn = std::max<size_t>(1, n - 1 - rng() % std::max<size_t>(1, n / 2)); break;
                case 8: dbits = bits == T::bmax ? bits - 1 : bits + 1; break;                    // other b
                case 9: ddelta = !delta; break;
                case 10:  // garbage of a random length
                    b.resize(rng() % (b.size() + 8));
                    for (auto &x : b) x = uint8_t(rng());
                    break;
                case 11: std::fill(b.begin(), b.end(), uint8_t(0xFF)); break;  // all ones
                case 12: std::fill(b.begin() + long(std::min(b.size(), (n + 127) / 128)), b.end(), uint8_t(0)); break;
                default:  // a K nibble rewritten (any value, 8..15 included)
                    b[rng() % ((n + 127) / 128)] ^= uint8_t((rng() % 16) << (4 * (rng() & 1)));
                    break;
            }
            std::vector<uint8_t> in(b);  // exactly len bytes on the heap
            std::vector<Sym> v0(dn), v1(dn);
            const int rc0 = T::ref.dec(in.data(), in.size(), dn, ddelta, dbits, v0.data());
            const std::string e0 = rc0 ? speckv::last_error() : "";
            REQUIRE((rc0 == SPECKV_OK || rc0 == SPECKV_ECORRUPT));
            for (const auto &t : T::fast()) {
                const int rc1 = t.dec(in.data(), in.size(), dn, ddelta, dbits, v1.data());
                INFO(t.name << " case " << f << " bits " << dbits << " n " << dn << " len " << in.size());
                REQUIRE(rc1 == rc0);
                if (rc0 == SPECKV_OK) REQUIRE(v0 == v1);
                else REQUIRE(std::string(speckv::last_error()) == e0);
            }
            (rc0 == SPECKV_OK ? *ok : *rejected)++;
        }
    }
}

// ---------------------------------------------------------- records

void fix_crc(std::vector<uint8_t> &rec) {
    uint32_t crc = speckv::crc32c(0, rec.data(), 20);
    crc = speckv::crc32c(crc, rec.data() + 24, rec.size() - 24);
    std::memcpy(&rec[20], &crc, 4);
}

// A record around a split Rice stream: FP32, one page scale (S = 0x3CC2,
// valid for every b), n values in one row, b bits, order linear or none.
// Empty if the payload would not be shorter than n FP32 values (§8).
std::vector<uint8_t> record_of(const std::vector<uint8_t> &stream, size_t n, unsigned bits, bool delta) {
    if (2 + stream.size() > 4 * n) return {};
    std::vector<uint8_t> r(24 + 2 + stream.size());
    const uint32_t nn = uint32_t(n), pl = uint32_t(2 + stream.size());
    r[0] = 0x53, r[1] = 0x4B, r[2] = 1, r[3] = uint8_t(c::Mode::vp8s), r[4] = SPECKV_DTYPE_FP32, r[5] = uint8_t(bits);
    r[6] = 0, r[7] = uint8_t((delta ? 1 : 0) | (3 << 2));
    std::memcpy(&r[8], &nn, 4);
    r[12] = 1, r[13] = 0, r[14] = 0, r[15] = 0;
    std::memcpy(&r[16], &pl, 4);
    r[24] = 0xC2, r[25] = 0x3C;
    if (!stream.empty()) std::memcpy(&r[26], stream.data(), stream.size());
    fix_crc(r);
    return r;
}

std::vector<c::Impl> all_impls() {
    std::vector<c::Impl> v{c::Impl::scalar};
    for (c::Impl i : codec_test::simd_impls()) v.push_back(i);
    return v;
}

// Decodes `rec` with every implementation: all give rc (and the same message;
// the same output bytes when OK). Returns the scalar message.
std::string decode_all(const std::vector<uint8_t> &rec, int want_rc) {
    if (rec.empty()) return "";
    c::Header h;
    size_t cap = 1 << 16;
    if (c::peek_header(rec.data(), rec.size(), &h) == SPECKV_OK) cap = h.decoded_bytes();
    std::vector<uint8_t> o0(cap), o1(cap);
    size_t n0 = 0, n1 = 0;
    const int rc0 = c::decode(rec.data(), rec.size(), o0.data(), o0.size(), &n0, c::Impl::scalar);
    const std::string e0 = rc0 ? speckv::last_error() : "";
    INFO(e0);
    CHECK(rc0 == want_rc);
    for (c::Impl i : codec_test::simd_impls()) {
        const int rc1 = c::decode(rec.data(), rec.size(), o1.data(), o1.size(), &n1, i);
        INFO("impl " << c::impl_name(i));
        REQUIRE(rc1 == rc0);
        if (rc0) REQUIRE(std::string(speckv::last_error()) == e0);
        else REQUIRE(o0 == o1);
    }
    return e0;
}

const c::Mode kSplit[] = {c::Mode::k8s, c::Mode::v8s, c::Mode::k6s,  c::Mode::v6s,  c::Mode::k5s,
                          c::Mode::v5s, c::Mode::p8rs, c::Mode::k4s, c::Mode::v4s,  c::Mode::k9s,
                          c::Mode::k10s, c::Mode::k12s, c::Mode::vp8s, c::Mode::vp6s, c::Mode::vp5s};
// The Rice preset with the same quantiser, group and order (§18 "Presets").
c::Mode rice_twin(c::Mode m) {
    const c::Params p = c::mode_params(m);
    for (int i = 1; i < c::kModeCount; i++) {
        const c::Params q = c::mode_params(c::Mode(i));
        if (q.entropy == c::kEntropyRice && q.bits == p.bits && q.group == p.group && q.order == p.order)
            return c::Mode(i);
    }
    return c::Mode::raw;
}

std::vector<uint8_t> encode_rec(c::Mode m, int dt, const std::vector<uint8_t> &src, uint32_t C, c::Impl impl) {
    std::vector<uint8_t> rec(c::max_record_size(src.size()));
    size_t len = 0;
    REQUIRE(c::encode(m, dt, src.data(), src.size(), {C}, rec.data(), rec.size(), &len, impl) == SPECKV_OK);
    rec.resize(len);
    return rec;
}

std::vector<uint8_t> decode_rec(const std::vector<uint8_t> &rec, c::Impl impl) {
    c::Header h;
    REQUIRE(c::peek_header(rec.data(), rec.size(), &h) == SPECKV_OK);
    std::vector<uint8_t> out(h.decoded_bytes());
    size_t n = 0;
    const int rc = c::decode(rec.data(), rec.size(), out.data(), out.size(), &n, impl);
    INFO(speckv::last_error());
    REQUIRE(rc == SPECKV_OK);
    return out;
}

// The scan-order symbols of a quantised Rice or split Rice record (its stage
// decoded by the reference), for the size bound.
std::vector<int32_t> record_symbols(const std::vector<uint8_t> &rec, bool *delta, unsigned *bits) {
    c::Header h;
    REQUIRE(c::peek_header(rec.data(), rec.size(), &h) == SPECKV_OK);
    const size_t G = h.params.group == 0 ? 1 : h.params.group == 1 ? h.channels : h.count / h.channels;
    const uint8_t *st = rec.data() + 24 + 2 * G;
    const size_t sl = rec.size() - 24 - 2 * G, n = h.count;
    *delta = h.params.order != 0, *bits = h.params.bits;
    const bool split = h.params.entropy == c::kEntropySplitRice;
    std::vector<int32_t> s(n);
    if (h.params.bits <= 8) {
        std::vector<int8_t> v(n);
        REQUIRE((split ? c::srice_decode8_scalar : c::rice_decode8_scalar)(st, sl, n, *delta, *bits, v.data()) == 0);
        std::copy(v.begin(), v.end(), s.begin());
    } else {
        std::vector<int16_t> v(n);
        REQUIRE((split ? c::srice_decode16_scalar : c::rice_decode16_scalar)(st, sl, n, *delta, *bits, v.data()) == 0);
        std::copy(v.begin(), v.end(), s.begin());
    }
    return s;
}

// Decodes a b <= 8 stream with the reference and every other table: rc
// `want`, the message containing `msg`, the same values. Returns them.
std::vector<int8_t> stage_all(const std::vector<uint8_t> &stream, size_t n, bool delta, unsigned bits, int want,
                              const char *msg) {
    std::vector<int8_t> v(n), v1(n);
    std::vector<uint8_t> in(stream);  // exactly its bytes on the heap
    const int rc = c::srice_decode8_scalar(in.data(), in.size(), n, delta, bits, v.data());
    const std::string e = rc ? speckv::last_error() : "";
    INFO(e);
    CHECK(rc == want);
    if (want) CHECK(e.find(msg) != std::string::npos);
    for (const auto &t : Stages<int8_t>::fast()) {
        INFO(t.name);
        CHECK(t.dec(in.data(), in.size(), n, delta, bits, v1.data()) == rc);
        if (rc) CHECK(std::string(speckv::last_error()) == e);
        else CHECK(v1 == v);
    }
    return v;
}

}  // namespace

TEST_CASE("codec srice: worked example of docs/codec.md §18") {
    // FP16 [3.0, -S, 3S, -S, ..., -S] (16 values, S = 194 * 2^-13: the §11 scale), preset vp8s.
    std::vector<uint16_t> h(16);
    h[0] = 0x4200;
    for (size_t i = 1; i < 16; i++) h[i] = (i & 1) ? 0xA610 : 0x2C8C;
    std::vector<uint8_t> src(32);
    std::memcpy(src.data(), h.data(), 32);
    auto rec = encode_rec(c::Mode::vp8s, SPECKV_DTYPE_FP16, src, 16, c::Impl::scalar);
    const std::vector<uint8_t> want = {
        0x53, 0x4B, 0x01, 0x1E, 0x01, 0x08, 0x00, 0x0C, 0x10, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00,  // header
        0x0D, 0x00, 0x00, 0x00, 0x61, 0x5C, 0xC4, 0x5E,                                                  // len, CRC
        0xC2, 0x3C,                                                                                      // scale
        0x01,                                                                                            // K: k = 1
        0xAA, 0xAA,                                                                                      // Low
        0x00, 0x80, 0x31, 0xC6, 0x18, 0x63, 0x0C,                                                        // Unary
        0x7F};                                                                                           // Escape
    CHECK(rec == want);
    for (c::Impl i : all_impls()) CHECK(encode_rec(c::Mode::vp8s, SPECKV_DTYPE_FP16, src, 16, i) == want);
    // q = 127, then -1 and 3: z = 254, 1, 6, 1, ..., 1; k = 1 costs 76 bits (k = 2: 77, k = 0: 90).
    const std::vector<int32_t> q = {127, -1, 3, -1, 3, -1, 3, -1, 3, -1, 3, -1, 3, -1, 3, -1};
    CHECK(model_encode(q, false, 8) == std::vector<uint8_t>(want.begin() + 26, want.end()));
    for (c::Impl i : all_impls()) {
        auto out = decode_rec(rec, i);
        CHECK(codec_test::value_at(out.data(), SPECKV_DTYPE_FP16, 0) == 3.0078125f);
        for (size_t k = 1; k < 16; k++) {
            uint16_t v;
            std::memcpy(&v, &out[2 * k], 2);
            CHECK(v == h[k]);  // -S and 3S are exact in FP16
        }
    }
}

TEST_CASE("codec srice: the AVX-512 table uses the fast stage where the CPU has it") {
    const c::Kernels *k = c::avx512_kernels();
    const c::RiceKernels *r = c::srice_avx512_kernels();
    if (!k || !r) {
        MESSAGE("no AVX-512 VBMI/VBMI2 + BMI2 on this CPU: the reference runs everywhere");
        return;
    }
    // (function pointers compared as bools: doctest cannot print them)
    CHECK(bool(k->srice_encode8 == r->encode8));
    CHECK(bool(k->srice_decode8 == r->decode8));
    CHECK(bool(k->srice_encode16 == r->encode16));
    CHECK(bool(k->srice_decode16 == r->decode16));
    CHECK(bool(r->decode8 != c::srice_decode8_scalar));
    if (const c::RiceKernels *r2 = c::srice_avx2_kernels()) {
        const c::Kernels *k2 = c::avx2_kernels();
        REQUIRE(k2);
        CHECK(bool(k2->srice_decode8 == r2->decode8));
        CHECK(bool(k2->srice_decode16 == r2->decode16));
    }
}

TEST_CASE("codec srice: the reference equals the §18 model, round-trips, and stays within the size bound") {
    size_t over8 = 0, over16 = 0;
    CHECK(check_streams<int8_t>(3000, 1801, &over8) == 3000);
    CHECK(check_streams<int16_t>(1500, 1802, &over16) == 1500);
    MESSAGE("split Rice streams at most " << over8 << " (b <= 8) / " << over16 << " (b 9..12) bytes over Rice");
}

TEST_CASE("codec srice: hostile streams, every table equals the reference") {
    size_t ok = 0, rejected = 0;
    check_hostile<int8_t>(2500, 1803, &ok, &rejected);
    check_hostile<int16_t>(1200, 1804, &ok, &rejected);
    MESSAGE("split Rice decode: " << ok << " accepted, " << rejected << " rejected streams compared");
    CHECK(ok > 3500);
    CHECK(rejected > 25000);
}

TEST_CASE("codec srice: every corrupt condition of §18, one at a time") {
    // A valid base: b = 5 (Q 15, 4Q 60, W 6), 130 symbols (3 blocks: odd nb,
    // a K padding nibble; a 2-symbol last block), no delta, with escapes.
    std::vector<int32_t> s(130);
    for (size_t i = 0; i < s.size(); i++) s[i] = int32_t(i % 3) - 1;
    s[5] = 15, s[70] = -15, s[129] = 14;
    const unsigned bits = 5;
    Sections base = model_sections(s, false, bits);
    // The last symbols chosen so that no section ends on a byte boundary.
    for (int t = 0; t < 64 && (base.low.n % 8 == 0 || base.unary.n % 8 == 0 || base.esc.n % 8 == 0); t++) {
        s[128] = t % 9 - 4, s[127] = t / 9 - 3;
        base = model_sections(s, false, bits);
    }
    REQUIRE(base.esc.n > 0);
    REQUIRE(base.esc.n % 8 != 0);
    REQUIRE(base.low.n % 8 != 0);
    REQUIRE(base.unary.n % 8 != 0);
    auto check = [&](const std::vector<uint8_t> &stream, size_t n, bool delta, int want, const char *msg) {
        INFO("expect: " << (msg ? msg : "OK"));
        stage_all(stream, n, delta, bits, want, msg);
        const auto rec = record_of(stream, n, bits, delta);
        const std::string e = decode_all(rec, want);
        if (want && !rec.empty()) CHECK(e.find(msg) != std::string::npos);
    };
    const size_t n = s.size();
    check(base.join(), n, false, SPECKV_OK, nullptr);
    const size_t kb = base.k.b.size(), lb = base.low.b.size(), ub = base.unary.b.size(), eb = base.esc.b.size();
    // K: a field of 8..15 in any block; the padding nibble.
    for (unsigned j = 0; j < 3; j++)
        for (unsigned k : {8u, 12u, 15u}) {
            auto st = base.join();
            st[j / 2] = uint8_t((st[j / 2] & ~(15u << (4 * (j & 1)))) | (k << (4 * (j & 1))));
            check(st, n, false, SPECKV_ECORRUPT, "> 7");
        }
    {
        auto st = base.join();
        st[1] |= 0x10;
        check(st, n, false, SPECKV_ECORRUPT, "padding nibble");
    }
    // Shorter than K; shorter than K + Low (every length in between).
    check(std::vector<uint8_t>(base.k.b.begin(), base.k.b.begin() + 1), n, false, SPECKV_ECORRUPT, "K section");
    check({}, n, false, SPECKV_ECORRUPT, "K section");
    for (size_t l = kb; l < kb + lb; l++) {
        auto st = base.join();
        st.resize(l);
        check(st, n, false, SPECKV_ECORRUPT, "K and Low");
    }
    // A non-zero padding bit after the Low bits.
    for (size_t bit = base.low.n % 8; bit < 8; bit++) {
        auto st = base.join();
        st[kb + lb - 1] |= uint8_t(1u << bit);
        check(st, n, false, SPECKV_ECORRUPT, "Low section");
    }
    // Fewer than n one-bits: the Unary section cut short, or a one-bit cleared
    // (the escape bytes after it then hold too few, or the wrong ones).
    for (size_t l = kb + lb; l < kb + lb + ub; l++) {
        auto st = base.join();
        st.resize(l);
        check(st, n, false, SPECKV_ECORRUPT, "one-bits");
    }
    {
        Sections t = base;
        t.esc = Bits{};  // no escape bytes either: the one-bits are all there is
        auto st = t.join();
        uint8_t &last = st[kb + lb + ub - 1];
        last = uint8_t(last & ~(1u << ((base.unary.n - 1) % 8)));
        check(st, n, false, SPECKV_ECORRUPT, "one-bits");
    }
    // A set bit after the n-th one-bit, in its byte.
    for (size_t bit = base.unary.n % 8; bit < 8; bit++) {
        auto st = base.join();
        st[kb + lb + ub - 1] |= uint8_t(1u << bit);
        check(st, n, false, SPECKV_ECORRUPT, "after the last one-bit");
    }
    // Escape fields past the payload; a padding bit after them; bytes after them.
    for (size_t cut = 1; cut <= eb; cut++) {
        auto st = base.join();
        st.resize(st.size() - cut);
        check(st, n, false, SPECKV_ECORRUPT, "runs past the payload");
    }
    if (base.esc.n % 8) {
        auto st = base.join();
        st.back() |= 0x80;
        check(st, n, false, SPECKV_ECORRUPT, "Escape section");
    }
    for (uint8_t extra : {uint8_t(0), uint8_t(0xFF)}) {
        auto st = base.join();
        st.push_back(extra);
        check(st, n, false, SPECKV_ECORRUPT, "bytes after");
    }
    {   // a stream without escapes and a trailing byte
        std::vector<int32_t> t(100, 1);
        auto st = model_encode(t, false, bits);
        st.push_back(0);
        check(st, 100, false, SPECKV_ECORRUPT, "bytes after");
    }
    // z > 4Q: an escape (k 0, W 6 bits) of 61; a unary code of 14 with k 2 (z = 56 + low 3 = 59 is fine, 14 << 2 | 3 + ... ).
    {
        Sections t;
        t.k.put(0, 4);
        t.unary.put(0, 15), t.unary.put(1, 1);
        t.esc.put(61, 6);
        check(t.join(), 1, false, SPECKV_ECORRUPT, "out of range");
        t.esc = Bits{};
        t.esc.put(60, 6);  // z = 60 = 4Q: fine without delta? d = 30 > Q: |s| > Q
        check(t.join(), 1, false, SPECKV_ECORRUPT, "out of range");
        t.esc = Bits{};
        t.esc.put(30, 6);  // z = 30: d = 15 = Q
        check(t.join(), 1, false, SPECKV_OK, nullptr);
    }
    // |s| > Q with delta: two steps of +15 reach 30.
    {
        std::vector<int32_t> t = {15, 15};  // as deltas: z = 30, 30
        Sections S2;
        S2.k.put(1, 4);  // k 1: u = 15 -> escapes of 15 in W - k = 5 bits
        for (int i = 0; i < 2; i++) S2.low.put(0, 1), S2.unary.put(0, 15), S2.unary.put(1, 1), S2.esc.put(15, 5);
        check(S2.join(), 2, true, SPECKV_ECORRUPT, "out of range");
        check(S2.join(), 2, false, SPECKV_OK, nullptr);  // without delta: 15, 15
    }
}

TEST_CASE("codec srice: streams §18 allows that no encoder writes") {
    auto accept = [&](const Sections &t, size_t n, bool delta, unsigned bits) {
        const auto st = t.join();
        auto v = stage_all(st, n, delta, bits, SPECKV_OK, nullptr);
        decode_all(record_of(st, n, bits, delta), SPECKV_OK);
        return v;
    };
    {   // more than 15 zero-bits before a one-bit: an escape, like 15 of them (b 5, W 6)
        Sections t;
        t.k.put(0, 4);
        t.unary.put(0, 40), t.unary.put(1, 1), t.unary.put(0, 3), t.unary.put(1, 1);
        t.esc.put(9, 6);
        CHECK(accept(t, 2, false, 5) == std::vector<int8_t>{-5, -2});  // z 9, 3
    }
    {   // an escape field whose value is < 15 (k 2, 4 bits of 3: z = 3 * 4 + low 1 = 13)
        Sections t;
        t.k.put(2, 4);
        t.low.put(1, 2);
        t.unary.put(0, 15), t.unary.put(1, 1);
        t.esc.put(3, 4);
        CHECK(accept(t, 1, false, 5) == std::vector<int8_t>{-7});
    }
    {   // an escape where W <= k (k 7, W 6): the field has no bits, e = 0, z = low
        Sections t;
        t.k.put(7, 4);
        t.low.put(21, 7);
        t.unary.put(0, 15), t.unary.put(1, 1);
        CHECK(accept(t, 1, false, 5) == std::vector<int8_t>{-11});
    }
    {   // an escape where W - k = 1 (b 6, W 7, k 6; with delta): z = e * 64 + low
        Sections t;
        t.k.put(6, 4);
        t.low.put(62, 6), t.unary.put(1, 1);                                    // z 62: +31
        t.low.put(59, 6), t.unary.put(0, 15), t.unary.put(1, 1), t.esc.put(1, 1);  // z 123: -62
        CHECK(accept(t, 2, true, 6) == std::vector<int8_t>{31, -31});
    }
}

TEST_CASE("codec srice: records of every split preset decode to the values of its Rice preset") {
    // (elements, channels): columnar tiles both ways, sides not multiples of 8,
    // one row, one column, partial blocks.
    const std::pair<size_t, uint32_t> shapes[] = {{2048, 32}, {2048, 64}, {1024, 32}, {4096, 128}, {2048, 8},
                                                  {2040, 24}, {2048, 2048}, {2048, 1}, {777, 7}, {1000, 40},
                                                  {960, 96},  {100, 10},   {64, 8},    {65, 13}, {1, 1}, {3, 3}};
    const int dtypes[] = {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32};
    std::mt19937_64 rng(1805);
    size_t records = 0, max_over = 0;
    for (int it = 0; it < 2700; it++) {
        const auto [n, C] = shapes[rng() % std::size(shapes)];
        const int dt = dtypes[it % 3];
        const c::Mode m = kSplit[size_t(it) % std::size(kSplit)];
        const auto src = codec_test::random_page(rng, dt, n, int(rng() % 8));
        INFO("mode " << c::mode_name(m) << " dtype " << dt << " n " << n << " C " << C);
        const auto rs = encode_rec(m, dt, src, C, c::Impl::scalar);
        const auto rr = encode_rec(rice_twin(m), dt, src, C, c::Impl::scalar);
        const auto ds = decode_rec(rs, c::Impl::scalar);
        if (rs[3] != 0) {
            CHECK(rs[3] == uint8_t(m));
            CHECK((rs[7] >> 2) == c::kEntropySplitRice);
        } else {
            CHECK(ds == src);  // raw (bypass) is lossless
        }
        if (rs[3] != 0 && rr[3] != 0) CHECK(ds == decode_rec(rr, c::Impl::scalar));
        // §18 "Size", from the symbols of whichever record is not raw.
        if (rs[3] != 0 || rr[3] != 0) {
            bool delta;
            unsigned bits;
            const auto s = record_symbols(rs[3] != 0 ? rs : rr, &delta, &bits);
            CHECK(rs.size() <= rr.size() + size_bound(s.size(), rice_escapes(s, delta, bits)));
            if (rs.size() > rr.size()) max_over = std::max(max_over, rs.size() - rr.size());
        }
        for (c::Impl i : codec_test::simd_impls()) codec_test::cross_check(i, m, dt, src, C);
        records++;
    }
    CHECK(records == 2700);
    MESSAGE("split Rice records at most " << max_over << " bytes longer than Rice");
    // Edge pages (64 x 32): all equal, one outlier, alternating +-max, steps,
    // -0 and subnormals, a ramp.
    std::vector<std::vector<float>> edge;
    edge.emplace_back(2048, 0.37f);
    edge.emplace_back(2048, -1e-3f);
    {
        std::vector<float> x(2048, 0.01f);
        x[777] = 300.f;
        edge.push_back(x);
        for (size_t i = 0; i < 2048; i++) x[i] = (i & 1) ? 65504.f : -65504.f;
        edge.push_back(x);
        for (size_t i = 0; i < 2048; i++) x[i] = ((i / 3) & 1) ? 1.f : -1.f;
        edge.push_back(x);
        for (size_t i = 0; i < 2048; i++) x[i] = (i % 3 == 0) ? -0.f : (i % 3 == 1) ? 5.96e-8f : -6.0e-5f;
        edge.push_back(x);
        for (size_t i = 0; i < 2048; i++) x[i] = float(i) - 1024.f;
        edge.push_back(x);
    }
    for (const auto &x : edge)
        for (int dt : dtypes) {
            const auto src = codec_test::to_bytes(x, dt);
            for (c::Mode m : kSplit)
                for (uint32_t C : {32u, 64u, 7u}) {
                    const auto rs = encode_rec(m, dt, src, C, c::Impl::scalar);
                    const auto rr = encode_rec(rice_twin(m), dt, src, C, c::Impl::scalar);
                    if (rs[3] != 0 && rr[3] != 0) CHECK(decode_rec(rs, c::Impl::scalar) == decode_rec(rr, c::Impl::scalar));
                    for (c::Impl i : codec_test::simd_impls()) codec_test::cross_check(i, m, dt, src, C);
                }
        }
}

TEST_CASE("codec srice: hostile records (truncated, bit flips, CRC fixed) are rejected in bounds, alike") {
    std::mt19937_64 rng(1806);
    size_t ok = 0, bad = 0;
    for (int it = 0; it < 300; it++) {
        const c::Mode m = kSplit[size_t(it) % std::size(kSplit)];
        const size_t n = (it % 3) ? 2048 : 1 + rng() % 700;
        const auto src = codec_test::random_page(rng, SPECKV_DTYPE_FP16, n, int(rng() % 3));
        const auto rec = encode_rec(m, SPECKV_DTYPE_FP16, src, n % 32 ? 1 : 32, c::Impl::scalar);
        if (rec[3] == 0) continue;
        c::Header h;
        REQUIRE(c::peek_header(rec.data(), rec.size(), &h) == SPECKV_OK);
        const size_t G = h.params.group == 0 ? 1 : h.params.group == 1 ? h.channels : h.count / h.channels;
        const size_t off = 24 + 2 * G;
        auto run = [&](std::vector<uint8_t> f, bool fix_len) {
            if (fix_len) {
                const uint32_t pl = uint32_t(f.size() - 24);
                std::memcpy(&f[16], &pl, 4);
            }
            fix_crc(f);
            c::Header hh;
            const bool hdr = c::peek_header(f.data(), f.size(), &hh) == SPECKV_OK;
            std::vector<uint8_t> o(1 << 16);
            size_t nn = 0;
            const int rc = c::decode(f.data(), f.size(), o.data(), o.size(), &nn, c::Impl::scalar);
            REQUIRE((rc == SPECKV_OK || rc == SPECKV_ECORRUPT));
            if (hdr) decode_all(f, rc);
            (rc ? bad : ok)++;
        };
        // Every stream truncation (payload length and CRC fixed up) near both ends, a sample in between.
        for (size_t l = off; l < rec.size(); l += (l < off + 24 || l + 24 > rec.size()) ? 1 : 37)
            run(std::vector<uint8_t>(rec.begin(), rec.begin() + long(l)), true);
        // Bit flips and byte changes anywhere after the header, CRC fixed.
        for (int k = 0; k < 40; k++) {
            auto f = rec;
            const size_t at = 24 + rng() % (f.size() - 24);
            if (k & 1) f[at] ^= uint8_t(1u << (rng() % 8));
            else f[at] = uint8_t(rng());
            run(f, false);
        }
        // Two to eight flips at once in the stream.
        for (int k = 0; k < 10; k++) {
            auto f = rec;
            for (int j = 0, nf = 2 + int(rng() % 7); j < nf; j++) f[off + rng() % (f.size() - off)] ^= uint8_t(1u << (rng() % 8));
            run(f, false);
        }
    }
    MESSAGE("hostile split Rice records: " << ok << " decoded, " << bad << " rejected");
    CHECK(bad > 10000);
}
