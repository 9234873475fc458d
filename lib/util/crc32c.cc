// SPDX-License-Identifier: Apache-2.0
#include "util/crc32c.h"

#include "util/cpu.h"

#include <array>
#include <atomic>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace speckv {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;

constexpr std::array<uint32_t, 256> make_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
        t[i] = c;
    }
    return t;
}
constexpr auto kTable = make_table();

// GF(2) product of two polynomials modulo the (reflected) CRC polynomial.
uint32_t multmodp(uint32_t a, uint32_t b) {
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
    }
    return p;
}

// x^(8n) mod P: multiplying a CRC register by it appends n zero bytes.
uint32_t xpow8n(size_t n) {
    uint32_t r = 1u << 31;  // x^0
    uint32_t sq = 1u << 23; // x^8
    while (n) {
        if (n & 1) r = multmodp(sq, r);
        sq = multmodp(sq, sq);
        n >>= 1;
    }
    return r;
}

// Multiplication by a fixed x^(8n) is linear over GF(2): tabulate it per byte.
struct Shifter {
    uint32_t t[4][256];
    explicit Shifter(size_t nbytes) {
        uint32_t k = xpow8n(nbytes);
        for (int j = 0; j < 4; j++)
            for (uint32_t b = 0; b < 256; b++) t[j][b] = multmodp(k, b << (8 * j));
    }
    uint32_t operator()(uint32_t a) const {
        return t[0][a & 0xFF] ^ t[1][(a >> 8) & 0xFF] ^ t[2][(a >> 16) & 0xFF] ^ t[3][a >> 24];
    }
};

uint32_t crc32c_table(uint32_t crc, const void *data, size_t n) {
    auto p = static_cast<const unsigned char *>(data);
    uint32_t c = ~crc;
    while (n--) c = kTable[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

#if defined(__x86_64__)
// ---------------------------------------------------------------------------
// SSE4.2: three independent crc32q streams hide the instruction's 3-cycle
// latency; the partial CRCs are then shifted into place and combined (CRC is
// linear).
constexpr size_t kStripe = 680;  // bytes per stream per round (a multiple of 8)

// Below this, crc32q on one stream is as fast as folding (a handful of
// instructions); every hardware path uses it.
constexpr size_t kClmulMin = 64;

// Raw register (no init/final xor) over the last n < 16 bytes... or any n.
__attribute__((target("sse4.2"), always_inline)) inline uint64_t crc_tail(uint64_t c, const unsigned char *p,
                                                                            size_t n) {
    while (n >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    if (n & 4) {
        uint32_t v;
        std::memcpy(&v, p, 4);
        c = _mm_crc32_u32(static_cast<uint32_t>(c), v);
        p += 4;
    }
    if (n & 2) {
        uint16_t v;
        std::memcpy(&v, p, 2);
        c = _mm_crc32_u16(static_cast<uint32_t>(c), v);
        p += 2;
    }
    if (n & 1) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p);
    return c;
}

// Short buffers (below kClmulMin) on every hardware path: crc32c() calls it
// directly, without the indirect call.
__attribute__((target("sse4.2"))) uint32_t crc32c_short(uint32_t crc, const void *data, size_t n) {
    return ~static_cast<uint32_t>(crc_tail(~crc & 0xFFFFFFFFu, static_cast<const unsigned char *>(data), n));
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, const void *data, size_t n) {
    auto p = static_cast<const unsigned char *>(data);
    uint64_t c = ~crc & 0xFFFFFFFFu;
    if (n >= 3 * kStripe) {
        static const Shifter k1(kStripe), k2(2 * kStripe);
        while (reinterpret_cast<uintptr_t>(p) & 7) {
            c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
            n--;
        }
        while (n >= 3 * kStripe) {
            uint64_t c1 = 0, c2 = 0;
            for (size_t i = 0; i < kStripe; i += 8) {
                uint64_t a, b, d;
                std::memcpy(&a, p + i, 8);
                std::memcpy(&b, p + kStripe + i, 8);
                std::memcpy(&d, p + 2 * kStripe + i, 8);
                c = _mm_crc32_u64(c, a);
                c1 = _mm_crc32_u64(c1, b);
                c2 = _mm_crc32_u64(c2, d);
            }
            c = k2(static_cast<uint32_t>(c)) ^ k1(static_cast<uint32_t>(c1)) ^ static_cast<uint32_t>(c2);
            p += 3 * kStripe;
            n -= 3 * kStripe;
        }
    }
    return ~static_cast<uint32_t>(crc_tail(c, p, n));
}

// ---------------------------------------------------------------------------
// Carry-less-multiply folding.
//
// Reflected CRC: byte i of the message, bit b, is the coefficient of
// x^(len*8 - 1 - 8i - b) of the message polynomial M(x), and the raw register
// (init 0, no final xor) after the message is M(x)*x^32 mod P(x), stored
// reflected (bit j = coefficient of x^(31-j)). A 16-byte block loaded
// little-endian into a 128-bit lane therefore holds, at bit i, the coefficient
// of x^(127-i) of its own 128-bit polynomial A = H*x^64 + L, where H is the
// lane's low qword and L its high qword (each bit i = coefficient of x^(63-i)).
//
// Folding: if A sits D bits before a block B, A*x^D + B == B + H*x^(D+64) +
// L*x^D (mod P), and x^(D+64), x^D can be replaced by their residues mod P
// (degree < 32). The product of a reflected 64-bit H (bit i = x^(63-i)) and a
// reflected 32-bit constant K (bit j = x^(31-j)) by PCLMULQDQ has, at bit k, the
// coefficient of x^(94-k) of H*K, i.e. read as a 128-bit lane it is H*K*x^33.
// So the constants are K_H = x^(D+31) mod P and K_L = x^(D-33) mod P, bit
// reflected, and fold(A) = clmul(H, K_H) ^ clmul(L, K_L) has degree < 96: it
// fits a lane and is congruent to A*x^D, which is all the CRC needs.
//
// Generator (crc32c.h, crc_fold): x^e mod P in the normal (unreflected)
// form, P = 0x1_1EDC6F41 (0x82F63B78 bit reversed, plus x^32), then bit
// reversed; {K_H, K_L} for a fold distance of D bits.
using crc_fold::bitrev32;
using crc_fold::FoldK;
using crc_fold::fold_k;
using crc_fold::xpow_mod_p;

// Checks of the generator against the table-driven definitions above:
// x^0 .. x^31 are single bits, and x^32 mod P is P's low part, 0x82F63B78
// reflected.
static_assert(bitrev32(xpow_mod_p(0)) == 0x80000000u);
static_assert(bitrev32(xpow_mod_p(31)) == 0x00000001u);
static_assert(bitrev32(xpow_mod_p(32)) == kPoly);

constexpr FoldK kFold128 = fold_k(128);    // 1 lane
constexpr FoldK kFold256 = fold_k(256);    // 2 lanes
constexpr FoldK kFold384 = fold_k(384);    // 3 lanes
constexpr FoldK kFold512 = fold_k(512);    // 4 x 128-bit lanes, or one zmm
constexpr FoldK kFold1024 = fold_k(1024);  // 2 zmm
constexpr FoldK kFold1536 = fold_k(1536);  // 3 zmm
constexpr FoldK kFold2048 = fold_k(2048);  // 4 zmm (one round of the 512-bit loop)

#define SPECKV_CLMUL_TARGET "sse4.2,pclmul"
#define SPECKV_VCLMUL_TARGET "sse4.2,pclmul,avx2,avx512f,avx512bw,avx512vl,vpclmulqdq"

__attribute__((target(SPECKV_CLMUL_TARGET), always_inline)) inline __m128i k128(FoldK k) {
    return _mm_set_epi64x(static_cast<long long>(k.kl), static_cast<long long>(k.kh));
}
__attribute__((target(SPECKV_CLMUL_TARGET), always_inline)) inline __m128i fold128(__m128i a, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}
__attribute__((target(SPECKV_CLMUL_TARGET), always_inline)) inline __m128i load128(const unsigned char *p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
}
// Without C nothing is stored, but the kernels still form d + offset: d then
// points at the source itself (never written), since an offset from a null
// pointer is undefined behaviour (UBSan under clang, issue 28's campaign).
inline unsigned char *no_copy_dst(const void *data) {
    return const_cast<unsigned char *>(static_cast<const unsigned char *>(data));
}
// The fused copy: every kernel below is a template on C (copy or not). With
// C, each vector loaded from the source is also stored to the destination
// before it is folded, so the CRC is of exactly the bytes copied, and the
// data crosses the memory bus once.
template <bool C>
__attribute__((target(SPECKV_CLMUL_TARGET), always_inline)) inline __m128i ld128(const unsigned char *p,
                                                                                 unsigned char *d) {
    __m128i v = load128(p);
    if constexpr (C) _mm_storeu_si128(reinterpret_cast<__m128i *>(d), v);
    return v;
}
// A folded lane is congruent to 16 message bytes: run them through crc32q
// from a zero register, then the tail (copied first when C: the CRC is then of
// the destination's bytes).
template <bool C>
__attribute__((target(SPECKV_CLMUL_TARGET), always_inline)) inline uint32_t finish(__m128i x,
                                                                                   const unsigned char *p,
                                                                                   unsigned char *d, size_t n) {
    uint64_t c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
    c = _mm_crc32_u64(c, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
    if constexpr (C) {
        std::memcpy(d, p, n);
        p = d;
    }
    return ~static_cast<uint32_t>(crc_tail(c, p, n));
}

template <bool C>
__attribute__((target(SPECKV_CLMUL_TARGET), always_inline)) inline uint32_t pclmul_body(uint32_t crc,
                                                                                        const void *data,
                                                                                        void *dst, size_t n) {
    auto p = static_cast<const unsigned char *>(data);
    auto d = static_cast<unsigned char *>(dst);
    if (n < kClmulMin) {
        if constexpr (C) {
            std::memcpy(d, p, n);
            p = d;
        }
        return ~static_cast<uint32_t>(crc_tail(~crc & 0xFFFFFFFFu, p, n));
    }
    // The initial register xors into the first 32 message bits.
    __m128i x0 = _mm_xor_si128(ld128<C>(p, d), _mm_cvtsi32_si128(static_cast<int>(~crc)));
    __m128i x1 = ld128<C>(p + 16, d + 16), x2 = ld128<C>(p + 32, d + 32), x3 = ld128<C>(p + 48, d + 48);
    p += 64;
    d += C ? 64 : 0;
    n -= 64;
    const __m128i k512 = k128(kFold512);
    while (n >= 64) {
        x0 = _mm_xor_si128(fold128(x0, k512), ld128<C>(p, d));
        x1 = _mm_xor_si128(fold128(x1, k512), ld128<C>(p + 16, d + 16));
        x2 = _mm_xor_si128(fold128(x2, k512), ld128<C>(p + 32, d + 32));
        x3 = _mm_xor_si128(fold128(x3, k512), ld128<C>(p + 48, d + 48));
        p += 64;
        d += C ? 64 : 0;
        n -= 64;
    }
    const __m128i k1 = k128(kFold128);
    __m128i x = _mm_xor_si128(_mm_xor_si128(fold128(x0, k128(kFold384)), fold128(x1, k128(kFold256))),
                              _mm_xor_si128(fold128(x2, k1), x3));
    while (n >= 16) {
        x = _mm_xor_si128(fold128(x, k1), ld128<C>(p, d));
        p += 16;
        d += C ? 16 : 0;
        n -= 16;
    }
    return finish<C>(x, p, d, n);
}

__attribute__((target(SPECKV_CLMUL_TARGET))) uint32_t crc32c_pclmul(uint32_t crc, const void *data, size_t n) {
    return pclmul_body<false>(crc, data, no_copy_dst(data), n);
}
__attribute__((target(SPECKV_CLMUL_TARGET))) uint32_t copy_pclmul(uint32_t crc, void *dst, const void *src, size_t n) {
    return pclmul_body<true>(crc, src, dst, n);
}

// Below this the wide paths are no faster than the 128-bit one (their final
// reduction is longer, and wide units that were idle start slow).
constexpr size_t kZmmMin = 256;

// ---------------------------------------------------------------------------
// VPCLMULQDQ on 256-bit lanes (AVX2-class CPUs: Zen 3 and later, Ice Lake
// and later without AVX-512, Alder Lake ...): the 128-bit algorithm with two
// lanes per register; four registers (128 bytes) per round, folded over 1024
// bits, then the registers into one (768, 512, 256 bits), then its two lanes.
#define SPECKV_VCLMUL256_TARGET "sse4.2,pclmul,avx2,vpclmulqdq"
constexpr FoldK kFold768 = fold_k(768);  // 3 ymm

__attribute__((target(SPECKV_VCLMUL256_TARGET), always_inline)) inline __m256i k256v(FoldK k) {
    const auto h = static_cast<long long>(k.kh), l = static_cast<long long>(k.kl);
    return _mm256_set_epi64x(l, h, l, h);
}
// fold(a) ^ b.
__attribute__((target(SPECKV_VCLMUL256_TARGET), always_inline)) inline __m256i fold256(__m256i a, __m256i k, __m256i b) {
    return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00), _mm256_clmulepi64_epi128(a, k, 0x11)),
                            b);
}
template <bool C>
__attribute__((target(SPECKV_VCLMUL256_TARGET), always_inline)) inline __m256i ld256(const unsigned char *p,
                                                                                     unsigned char *d) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    if constexpr (C) _mm256_storeu_si256(reinterpret_cast<__m256i *>(d), v);
    return v;
}

template <bool C>
__attribute__((target(SPECKV_VCLMUL256_TARGET), always_inline)) inline uint32_t vpclmul256_body(uint32_t crc,
                                                                                                const void *data,
                                                                                                void *dst, size_t n) {
    auto p = static_cast<const unsigned char *>(data);
    auto d = static_cast<unsigned char *>(dst);
    if (n < kZmmMin) return pclmul_body<C>(crc, p, d, n);
    __m256i y0 = _mm256_xor_si256(ld256<C>(p, d), _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(~crc))));
    __m256i y1 = ld256<C>(p + 32, d + 32), y2 = ld256<C>(p + 64, d + 64), y3 = ld256<C>(p + 96, d + 96);
    p += 128;
    d += C ? 128 : 0;
    n -= 128;
    const __m256i k4 = k256v(kFold1024);
    while (n >= 128) {
        y0 = fold256(y0, k4, ld256<C>(p, d));
        y1 = fold256(y1, k4, ld256<C>(p + 32, d + 32));
        y2 = fold256(y2, k4, ld256<C>(p + 64, d + 64));
        y3 = fold256(y3, k4, ld256<C>(p + 96, d + 96));
        p += 128;
        d += C ? 128 : 0;
        n -= 128;
    }
    // y0*x^768 + y1*x^512 + y2*x^256 + y3.
    const __m256i k1 = k256v(kFold256);
    __m256i y = fold256(y0, k256v(kFold768), fold256(y1, k256v(kFold512), fold256(y2, k1, y3)));
    while (n >= 32) {
        y = fold256(y, k1, ld256<C>(p, d));
        p += 32;
        d += C ? 32 : 0;
        n -= 32;
    }
    // The low lane sits 128 bits before the high one.
    const __m128i kx = k128(kFold128);
    __m128i x = _mm_xor_si128(fold128(_mm256_castsi256_si128(y), kx), _mm256_extracti128_si256(y, 1));
    while (n >= 16) {
        x = _mm_xor_si128(fold128(x, kx), ld128<C>(p, d));
        p += 16;
        d += C ? 16 : 0;
        n -= 16;
    }
    return finish<C>(x, p, d, n);
}

__attribute__((target(SPECKV_VCLMUL256_TARGET))) uint32_t crc32c_vpclmul256(uint32_t crc, const void *data, size_t n) {
    return vpclmul256_body<false>(crc, data, no_copy_dst(data), n);
}
__attribute__((target(SPECKV_VCLMUL256_TARGET))) uint32_t copy_vpclmul256(uint32_t crc, void *dst, const void *src,
                                                                           size_t n) {
    return vpclmul256_body<true>(crc, src, dst, n);
}

// ---------------------------------------------------------------------------
// VPCLMULQDQ on 512-bit lanes (AVX-512).
__attribute__((target(SPECKV_VCLMUL_TARGET), always_inline)) inline __m512i k512v(FoldK k) {
    const auto h = static_cast<long long>(k.kh), l = static_cast<long long>(k.kl);
    return _mm512_set_epi64(l, h, l, h, l, h, l, h);
}
// fold(a) ^ b in one ternary-logic xor3.
__attribute__((target(SPECKV_VCLMUL_TARGET), always_inline)) inline __m512i fold512(__m512i a, __m512i k, __m512i b) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11), b,
                                     0x96);
}
template <bool C>
__attribute__((target(SPECKV_VCLMUL_TARGET), always_inline)) inline __m512i ld512(const unsigned char *p,
                                                                                  unsigned char *d) {
    __m512i v = _mm512_loadu_si512(p);
    if constexpr (C) _mm512_storeu_si512(d, v);
    return v;
}

template <bool C>
__attribute__((target(SPECKV_VCLMUL_TARGET), always_inline)) inline uint32_t vpclmul_body(uint32_t crc,
                                                                                          const void *data,
                                                                                          void *dst, size_t n) {
    auto p = static_cast<const unsigned char *>(data);
    auto d = static_cast<unsigned char *>(dst);
    if (n < kZmmMin) return pclmul_body<C>(crc, p, d, n);
    // The initial register xors into the first 32 message bits.
    __m512i z0 = _mm512_xor_si512(ld512<C>(p, d), _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(~crc))));
    __m512i z1 = ld512<C>(p + 64, d + 64), z2 = ld512<C>(p + 128, d + 128), z3 = ld512<C>(p + 192, d + 192);
    p += 256;
    d += C ? 256 : 0;
    n -= 256;
    const __m512i k4 = k512v(kFold2048);
    while (n >= 256) {
        z0 = fold512(z0, k4, ld512<C>(p, d));
        z1 = fold512(z1, k4, ld512<C>(p + 64, d + 64));
        z2 = fold512(z2, k4, ld512<C>(p + 128, d + 128));
        z3 = fold512(z3, k4, ld512<C>(p + 192, d + 192));
        p += 256;
        d += C ? 256 : 0;
        n -= 256;
    }
    // z0*x^1536 + z1*x^1024 + z2*x^512 + z3 (z3 is xored in three times: once).
    __m512i z = _mm512_ternarylogic_epi64(fold512(z0, k512v(kFold1536), z3), fold512(z1, k512v(kFold1024), z3),
                                          fold512(z2, k512v(kFold512), z3), 0x96);
    const __m512i k1 = k512v(kFold512);
    while (n >= 64) {
        z = fold512(z, k1, ld512<C>(p, d));
        p += 64;
        d += C ? 64 : 0;
        n -= 64;
    }
    // Lanes 0..3 of z (lane 0 first in memory) are 384, 256, 128, 0 bits
    // before the end: one clmul pair with a different constant per lane.
    const __m512i kl = _mm512_set_epi64(0, 0, static_cast<long long>(kFold128.kl),
                                        static_cast<long long>(kFold128.kh), static_cast<long long>(kFold256.kl),
                                        static_cast<long long>(kFold256.kh), static_cast<long long>(kFold384.kl),
                                        static_cast<long long>(kFold384.kh));
    // Lane 3's constant is 0: its product vanishes, and lane 3 is xored in as is.
    __m512i f = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, kl, 0x00), _mm512_clmulepi64_epi128(z, kl, 0x11),
                                          _mm512_maskz_mov_epi64(0xC0, z), 0x96);
    __m256i h = _mm256_xor_si256(_mm512_maskz_extracti64x4_epi64(0xF, f, 0), _mm512_maskz_extracti64x4_epi64(0xF, f, 1));
    __m128i x = _mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    const __m128i kx = k128(kFold128);
    while (n >= 16) {
        x = _mm_xor_si128(fold128(x, kx), ld128<C>(p, d));
        p += 16;
        d += C ? 16 : 0;
        n -= 16;
    }
    return finish<C>(x, p, d, n);
}

__attribute__((target(SPECKV_VCLMUL_TARGET))) uint32_t crc32c_vpclmul(uint32_t crc, const void *data, size_t n) {
    return vpclmul_body<false>(crc, data, no_copy_dst(data), n);
}
__attribute__((target(SPECKV_VCLMUL_TARGET))) uint32_t copy_vpclmul(uint32_t crc, void *dst, const void *src, size_t n) {
    return vpclmul_body<true>(crc, src, dst, n);
}

bool cpu_has(Crc32cPath p) {
    switch (p) {
        case Crc32cPath::portable: return true;
        case Crc32cPath::sse42: return cpu::has(cpu::kSse42);
        case Crc32cPath::pclmul: return cpu::has(cpu::kSse42 | cpu::kPclmul);
        case Crc32cPath::vpclmul256: return cpu::has(cpu::kSse42 | cpu::kPclmul | cpu::kAvx2 | cpu::kVpclmulqdq);
        case Crc32cPath::vpclmul:
            return cpu::has(cpu::kSse42 | cpu::kPclmul | cpu::kAvx2 | cpu::kAvx512f | cpu::kAvx512bw |
                            cpu::kAvx512vl | cpu::kVpclmulqdq);
    }
    return false;
}
#else
bool cpu_has(Crc32cPath p) { return p == Crc32cPath::portable; }
#endif

using CrcFn = uint32_t (*)(uint32_t, const void *, size_t);

CrcFn fn_of(Crc32cPath p) {
#if defined(__x86_64__)
    switch (p) {
        case Crc32cPath::sse42: return crc32c_sse42;
        case Crc32cPath::pclmul: return crc32c_pclmul;
        case Crc32cPath::vpclmul256: return crc32c_vpclmul256;
        case Crc32cPath::vpclmul: return crc32c_vpclmul;
        default: break;
    }
#endif
    (void)p;
    return crc32c_table;
}

using CopyFn = uint32_t (*)(uint32_t, void *, const void *, size_t);

// The paths without folding copy, then checksum the destination.
uint32_t copy_then_crc(uint32_t crc, void *dst, const void *src, size_t n) {
    std::memcpy(dst, src, n);
    return crc32c(crc, dst, n);
}

CopyFn copy_fn_of(Crc32cPath p) {
#if defined(__x86_64__)
    switch (p) {
        case Crc32cPath::pclmul: return copy_pclmul;
        case Crc32cPath::vpclmul256: return copy_vpclmul256;
        case Crc32cPath::vpclmul: return copy_vpclmul;
        default: break;
    }
#endif
    (void)p;
    return copy_then_crc;
}

bool available(Crc32cPath p) {
    static const bool v[kCrc32cPathCount] = {cpu_has(Crc32cPath::portable), cpu_has(Crc32cPath::sse42),
                                             cpu_has(Crc32cPath::pclmul), cpu_has(Crc32cPath::vpclmul256),
                                             cpu_has(Crc32cPath::vpclmul)};
    const int i = static_cast<int>(p);
    return i >= 0 && i < kCrc32cPathCount && v[i];
}

Crc32cPath best_path() {
    for (Crc32cPath p : {Crc32cPath::vpclmul, Crc32cPath::vpclmul256, Crc32cPath::pclmul, Crc32cPath::sse42})
        if (available(p)) return p;
    return Crc32cPath::portable;
}

// crc32c() calls through g_fn; it starts at `resolve`, which picks the path on
// the first call (constant-initialized, so safe from other static initializers).
uint32_t resolve(uint32_t crc, const void *data, size_t n);
std::atomic<CrcFn> g_fn{resolve};
uint32_t resolve_copy(uint32_t crc, void *dst, const void *src, size_t n);
std::atomic<CopyFn> g_copy_fn{resolve_copy};
std::atomic<int> g_path{-1};
// Whether buffers under kClmulMin bytes go to crc32c_short (any hardware path).
std::atomic<bool> g_short_hw{false};

uint32_t resolve(uint32_t crc, const void *data, size_t n) {
    const Crc32cPath p = best_path();
    int expected = -1;
    if (g_path.compare_exchange_strong(expected, static_cast<int>(p))) {
        g_short_hw.store(p != Crc32cPath::portable, std::memory_order_relaxed);
        g_copy_fn.store(copy_fn_of(p), std::memory_order_relaxed);
        g_fn.store(fn_of(p), std::memory_order_relaxed);
    }
    return g_fn.load(std::memory_order_relaxed)(crc, data, n);
}

uint32_t resolve_copy(uint32_t crc, void *dst, const void *src, size_t n) {
    (void)resolve(0, nullptr, 0);
    CopyFn f = g_copy_fn.load(std::memory_order_relaxed);
    if (f == resolve_copy) f = copy_fn_of(best_path());  // another thread is storing it right now
    return f(crc, dst, src, n);
}

}  // namespace

uint32_t crc32c_portable(uint32_t crc, const void *data, size_t n) { return crc32c_table(crc, data, n); }

uint32_t crc32c(uint32_t crc, const void *data, size_t n) {
    if (n == 0) return crc;  // ~~crc
#if defined(__x86_64__)
    if (n < kClmulMin && g_short_hw.load(std::memory_order_relaxed)) return crc32c_short(crc, data, n);
#endif
    return g_fn.load(std::memory_order_relaxed)(crc, data, n);
}

uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n) {
    return g_copy_fn.load(std::memory_order_relaxed)(crc, dst, src, n);
}

uint32_t crc32c_copy_with(Crc32cPath p, uint32_t crc, void *dst, const void *src, size_t n) {
    if (!available(p)) p = Crc32cPath::portable;
    CopyFn f = copy_fn_of(p);
    if (f != copy_then_crc) return f(crc, dst, src, n);
    std::memcpy(dst, src, n);
    return fn_of(p)(crc, dst, n);
}

bool crc32c_path_available(Crc32cPath p) { return available(p); }

const char *crc32c_path_name(Crc32cPath p) {
    switch (p) {
        case Crc32cPath::portable: return "portable";
        case Crc32cPath::sse42: return "sse42";
        case Crc32cPath::pclmul: return "pclmul";
        case Crc32cPath::vpclmul256: return "vpclmul256";
        case Crc32cPath::vpclmul: return "vpclmul";
    }
    return "?";
}

Crc32cPath crc32c_active_path() {
    const int p = g_path.load();
    return p < 0 ? best_path() : static_cast<Crc32cPath>(p);
}

uint32_t crc32c_with(Crc32cPath p, uint32_t crc, const void *data, size_t n) {
    return fn_of(available(p) ? p : Crc32cPath::portable)(crc, data, n);
}

bool crc32c_force_path(Crc32cPath p) {
    if (!available(p)) return false;
    g_path.store(static_cast<int>(p));
    g_short_hw.store(p != Crc32cPath::portable, std::memory_order_relaxed);
    g_copy_fn.store(copy_fn_of(p), std::memory_order_relaxed);
    g_fn.store(fn_of(p), std::memory_order_relaxed);
    return true;
}

}  // namespace speckv
