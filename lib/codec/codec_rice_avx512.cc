// SPDX-License-Identifier: Apache-2.0
// The Rice stage (docs/codec.md §6.2) with AVX-512BW and BMI2, for int8
// (b <= 8) and int16 (§13, b 9..12) values: the same bytes and values as
// rice_encode / rice_decode of codec_rice.cc (the definition;
// tests/codec/codec_rice_test.cc compares them). In an AVX-512 F/BW/VL
// + BMI/BMI2/LZCNT target region (isa_target.h) and reached only after a runtime
// CPU check (rice_avx512_kernels()).
//
// Encoder: the z values of the page in vectors; per 64-symbol block the bit
// costs of k = 0..7 in vectors (one SAD per k, two reductions), then every
// symbol's code and length in 32-bit lanes, and adjacent codes merged into
// 64-bit codes (<= 56 bits: 2 symbols, or 4 or 8 while they stay short), so
// the serial bit writer runs 8..32 times per block. Decoder: a BMI2 loop that
// only extracts z (tzcnt, shrx, andn), then unzigzag, the delta prefix sum
// and the range checks in vectors. Any stream the fast decoder does not
// accept outright (truncated, lying count, trailing or padding bits, a value
// out of range) is decoded again by the reference, which returns its own
// error: the accepted streams, values, errors and messages are the reference's.
#include "codec/codec_kernels.h"

#include "util/cpu.h"
#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "speckv.h"

SPECKV_TARGET_BEGIN("avx512f,avx512bw,avx512vl,bmi,bmi2,lzcnt")

#include "codec/prefix16_avx512.h"  // in the region: compiled for it

namespace speckv::codec {

namespace {

constexpr size_t kBlock = 64;
constexpr unsigned kEsc = 15;
// A block is at most 3 + 64 * 28 bits (225 bytes); the writer's 8-byte store
// and the reader's 8-byte refill may run that far past the checked limit.
constexpr size_t kSlack = 256 + 16;

struct Scratch {
    std::vector<uint16_t> z;     // z values, page + padding
    std::vector<uint8_t> bits;   // the stream, + kSlack bytes
};
Scratch &scratch() {
    thread_local Scratch s;
    return s;
}

inline void store64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

inline __mmask32 tail32(size_t left) { return left >= 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1; }

// 32 symbols (int8: b <= 8, int16: b 9..12) as 16-bit lanes; masked-off
// elements are not read and give 0.
inline __m512i load_syms(__mmask32 m, const int8_t *p) { return _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, p)); }
inline __m512i load_syms(__mmask32 m, const int16_t *p) { return _mm512_maskz_loadu_epi16(m, p); }
inline void store_syms(int8_t *p, __mmask32 m, __m512i v) { _mm256_mask_storeu_epi8(p, m, _mm512_cvtepi16_epi8(v)); }
inline void store_syms(int16_t *p, __mmask32 m, __m512i v) { _mm512_mask_storeu_epi16(p, m, v); }
inline int ref_decode(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s) {
    return rice_decode8_scalar(p, len, n, delta, bits, s);
}
inline int ref_decode(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s) {
    return rice_decode16_scalar(p, len, n, delta, bits, s);
}

// z_i = zigzag(s_i - s_{i-1}) (s_{-1} = 0) or zigzag(s_i), 16-bit, for
// i < n; zeros from n to the next multiple of 64 (the encoder reads whole
// blocks). |s| <= 2047: the 16-bit differences and z (<= 8188) are exact.
template <class Sym>
void zigzag_page(const Sym *s, size_t n, bool delta, uint16_t *z) {
    for (size_t i = 0; i < n; i += 32) {
        const __mmask32 m = tail32(n - i);
        const __m512i x = load_syms(m, s + i);
        __m512i d = x;
        if (delta) {
            // Lane j holds s[i + j - 1]; lane 0 of the first vector is s_{-1} = 0
            // (a masked-off element is not read).
            const __mmask32 pm = i ? m : (m & ~__mmask32(1));
            const __m512i p = load_syms(pm, s + i - 1);
            d = _mm512_sub_epi16(x, p);
        }
        const __m512i zz = _mm512_xor_si512(_mm512_slli_epi16(d, 1), _mm512_srai_epi16(d, 15));
        _mm512_storeu_si512(z + i, _mm512_maskz_mov_epi16(m, zz));
    }
    const size_t done = (n + 31) / 32 * 32;
    std::memset(z + done, 0, (kBlock + 32) * sizeof(uint16_t));
}

// §6.2 block parameter: argmin over k = 0..7 of the block's bits, ties to
// the smaller k. Lanes of za/zb past the block's m symbols are zero and
// masked out by va/vb.
inline unsigned best_k(__m512i za, __m512i zb, __mmask32 va, __mmask32 vb, unsigned W) {
    const __m512i esc = _mm512_set1_epi16(int16_t(kEsc + W)), lim = _mm512_set1_epi16(int16_t(kEsc));
    __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
    const __m512i zero = _mm512_setzero_si512();
#define SPECKV_RICE_COST(K)                                                                          \
    {                                                                                                \
        const __m512i ua = _mm512_srli_epi16(za, K), ub = _mm512_srli_epi16(zb, K);                 \
        const __mmask32 la = _mm512_cmplt_epu16_mask(ua, lim), lb = _mm512_cmplt_epu16_mask(ub, lim); \
        const __m512i k1 = _mm512_set1_epi16(int16_t(1 + K));                                        \
        __m512i ca = _mm512_maskz_add_epi16(la & va, ua, k1);                                       \
        __m512i cb = _mm512_maskz_add_epi16(lb & vb, ub, k1);                                       \
        ca = _mm512_mask_mov_epi16(ca, va & ~la, esc);                                              \
        cb = _mm512_mask_mov_epi16(cb, vb & ~lb, esc);                                              \
        /* <= 2 * 28 per 16-bit lane: the high bytes are zero, a byte SAD sums 4 lanes */                \
        const __m512i sad = _mm512_sad_epu8(_mm512_add_epi16(ca, cb), zero);                        \
        if (K < 4)                                                                                   \
            acc0 = _mm512_add_epi64(acc0, _mm512_slli_epi64(sad, 16 * (K % 4)));                     \
        else                                                                                         \
            acc1 = _mm512_add_epi64(acc1, _mm512_slli_epi64(sad, 16 * (K % 4)));                     \
    }
    SPECKV_RICE_COST(0)
    SPECKV_RICE_COST(1)
    SPECKV_RICE_COST(2)
    SPECKV_RICE_COST(3)
    SPECKV_RICE_COST(4)
    SPECKV_RICE_COST(5)
    SPECKV_RICE_COST(6)
    SPECKV_RICE_COST(7)
#undef SPECKV_RICE_COST
    // Each 16-bit field sums to <= 64 * 28 < 2^16: no carry between fields.
    const uint64_t c0 = uint64_t(_mm512_reduce_add_epi64(acc0)), c1 = uint64_t(_mm512_reduce_add_epi64(acc1));
    unsigned bk = 0;
    uint32_t bc = uint32_t(c0 & 0xFFFF);
    for (unsigned k = 1; k < 8; k++) {
        const uint32_t c = uint32_t(((k < 4 ? c0 : c1) >> (16 * (k % 4))) & 0xFFFF);
        if (c < bc) bc = c, bk = k;
    }
    return bk;
}

// The codes of 16 symbols (z in 16-bit lanes of `z16`, lanes past `valid`
// give an empty code; a code is <= 15 + W <= 28 bits) merged by pairs: 8
// codes of <= 56 bits and their lengths.
inline void pair_codes(__m256i z16, __mmask16 valid, unsigned k, unsigned W, uint64_t *pc, uint64_t *pl) {
    const __m512i z = _mm512_cvtepu16_epi32(z16);
    const __m128i kc = _mm_cvtsi32_si128(int(k));
    const __m512i u = _mm512_srl_epi32(z, kc);
    const __mmask16 esc = _mm512_cmpge_epu32_mask(u, _mm512_set1_epi32(int(kEsc)));
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i u1 = _mm512_add_epi32(u, one);
    const __m512i low = _mm512_and_si512(z, _mm512_set1_epi32(int((1u << k) - 1)));
    __m512i code = _mm512_or_si512(_mm512_sub_epi32(_mm512_sllv_epi32(one, u), one), _mm512_sllv_epi32(low, u1));
    __m512i len = _mm512_add_epi32(u1, _mm512_set1_epi32(int(k)));
    code = _mm512_mask_mov_epi32(code, esc, _mm512_or_si512(_mm512_set1_epi32(0x7FFF), _mm512_slli_epi32(z, int(kEsc))));
    len = _mm512_mask_mov_epi32(len, esc, _mm512_set1_epi32(int(kEsc + W)));
    code = _mm512_maskz_mov_epi32(valid, code);
    len = _mm512_maskz_mov_epi32(valid, len);
    const __m512i lo32 = _mm512_set1_epi64(0xFFFFFFFF);
    const __m512i llo = _mm512_and_si512(len, lo32);
    const __m512i pair = _mm512_or_si512(_mm512_and_si512(code, lo32), _mm512_sllv_epi64(_mm512_srli_epi64(code, 32), llo));
    _mm512_storeu_si512(pc, pair);
    _mm512_storeu_si512(pl, _mm512_add_epi64(llo, _mm512_srli_epi64(len, 32)));
}

// If every one of the cnt (16 or 32) codes is <= 28 bits, replaces codes
// 2i and 2i+1 by one (code 2i | code 2i+1 << len 2i, <= 56 bits) and returns
// cnt / 2; else changes nothing and returns cnt.
inline size_t merge_codes(uint64_t *pc, uint64_t *pl, size_t cnt) {
    const __m512i lim = _mm512_set1_epi64(28);
    __mmask8 big = 0;
    for (size_t v = 0; v < cnt; v += 8) big |= _mm512_cmpgt_epu64_mask(_mm512_loadu_si512(pl + v), lim);
    if (big) return cnt;
    const __m512i ie = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), io = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    __m512i mc[2], ml[2];
    for (size_t v = 0; v < cnt / 16; v++) {
        const __m512i c0 = _mm512_loadu_si512(pc + 16 * v), c1 = _mm512_loadu_si512(pc + 16 * v + 8);
        const __m512i l0 = _mm512_loadu_si512(pl + 16 * v), l1 = _mm512_loadu_si512(pl + 16 * v + 8);
        const __m512i le = _mm512_permutex2var_epi64(l0, ie, l1), lo = _mm512_permutex2var_epi64(l0, io, l1);
        const __m512i ce = _mm512_permutex2var_epi64(c0, ie, c1), co = _mm512_permutex2var_epi64(c0, io, c1);
        mc[v] = _mm512_or_si512(ce, _mm512_sllv_epi64(co, le));
        ml[v] = _mm512_add_epi64(le, lo);
    }
    for (size_t v = 0; v < cnt / 16; v++) {  // after all loads: the outputs overlap the inputs
        _mm512_storeu_si512(pc + 8 * v, mc[v]);
        _mm512_storeu_si512(pl + 8 * v, ml[v]);
    }
    return cnt / 2;
}

template <class Sym>
size_t rice_encode_t(const Sym *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    const unsigned W = bits + 1;
    Scratch &R = scratch();
    grow(R.z, n + kBlock + 64);
    grow(R.bits, cap + kSlack);
    uint16_t *const z = R.z.data();
    zigzag_page(s, n, delta, z);
    uint8_t *const o0 = R.bits.data();
    uint8_t *o = o0;
    const uint8_t *const olim = o0 + cap;
    uint64_t acc = 0;
    unsigned fill = 0;
    alignas(64) uint64_t pc[32], pl[32];
    for (size_t b0 = 0; b0 < n; b0 += kBlock) {
        const size_t m = std::min(kBlock, n - b0);
        const __m512i za = _mm512_loadu_si512(z + b0), zb = _mm512_loadu_si512(z + b0 + 32);
        const __mmask32 va = tail32(m), vb = m > 32 ? tail32(m - 32) : 0;
        const unsigned k = best_k(za, zb, va, vb, W);
        pair_codes(_mm512_castsi512_si256(za), __mmask16(va), k, W, pc, pl);
        pair_codes(_mm512_extracti64x4_epi64(za, 1), __mmask16(va >> 16), k, W, pc + 8, pl + 8);
        // The block's k (3 bits), then its codes.
        acc |= uint64_t(k) << fill;
        fill += 3;
        store64(o, acc);
        o += fill >> 3;
        acc >>= fill & ~7u;
        fill &= 7;
        size_t np = 16;
        if (m > 32) {
            pair_codes(_mm512_castsi512_si256(zb), __mmask16(vb), k, W, pc + 16, pl + 16);
            pair_codes(_mm512_extracti64x4_epi64(zb, 1), __mmask16(vb >> 16), k, W, pc + 24, pl + 24);
            np = 32;
        }
        np = std::min(np, (m + 1) / 2);
        // Full blocks: while every code is <= 28 bits, merge adjacent codes
        // again (4, then 8 symbols per code): fewer steps of the serial writer.
        if (np == 32) np = merge_codes(pc, pl, 32);
        if (np == 16) np = merge_codes(pc, pl, 16);
        for (size_t j = 0; j < np; j++) {
            // fill <= 7 and a pair <= 56 bits: the sum fits the 64-bit accumulator.
            acc |= pc[j] << fill;
            fill += unsigned(pl[j]);
            store64(o, acc);
            o += fill >> 3;
            acc >>= fill & ~7u;
            fill &= 7;
        }
        if (o > olim) return 0;
    }
    const size_t len = size_t(o - o0) + (fill ? 1 : 0);
    if (len > cap) return 0;
    std::memcpy(dst, o0, len);
    return len;
}

// The decoder's bit buffer, kept inverted (ib = ~stream bits): the unary
// count is tzcnt(ib), one operation less on the serial path. nb bits of ib
// are counted valid; the bits above them are stream bits or zeros, and a
// refill ORs the inverted bytes over them, which is correct either way.
// pos = bytes of the stream loaded; pos * 8 - nb = bits consumed.
struct BitIn {
    uint64_t ib;
    unsigned nb;
    size_t pos;
    // Afterwards nb >= 56.
    __attribute__((always_inline)) void refill(const uint8_t *pb) {
        ib |= ~load64(pb + pos) << nb;
        pos += (63 - nb) >> 3;
        nb |= 56;
    }
};

// One symbol of a block with parameter K (needs nb >= 28: W <= 13).
template <unsigned K>
__attribute__((always_inline)) inline uint16_t decode_one(BitIn &in, unsigned W) {
    const unsigned u = unsigned(_tzcnt_u64(in.ib));
    unsigned used;
    uint32_t zi;
    if (__builtin_expect(u < kEsc, 1)) {
        zi = uint32_t(_andn_u64(in.ib >> (u + 1), (1u << K) - 1)) | (u << K);  // ~(ib >> (u+1)) & mask
        used = u + 1 + K;
    } else {
        zi = uint32_t((~in.ib >> kEsc) & ((uint64_t(1) << W) - 1));
        used = kEsc + W;
    }
    in.ib >>= used, in.nb -= used;
    return uint16_t(zi);
}

// The m <= 64 symbols of one block: z values only. A refill (>= 56 bits)
// serves two symbols (<= 28 bits each).
template <unsigned K>
void decode_block(BitIn &state, const uint8_t *pb, size_t m, unsigned W, uint16_t *zo) {
    BitIn in = state;  // a local: the z stores cannot alias it (-fno-strict-aliasing)
    size_t i = 0;
    for (; i + 2 <= m; i += 2) {
        in.refill(pb);
        const uint16_t z0 = decode_one<K>(in, W);
        const uint16_t z1 = decode_one<K>(in, W);
        zo[i] = z0, zo[i + 1] = z1;
    }
    if (i < m) {
        in.refill(pb);
        zo[i] = decode_one<K>(in, W);
    }
    state = in;
}

template <class Sym>
int rice_decode_t(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, Sym *s) {
    const unsigned W = bits + 1;
    const int32_t Q = (1 << (bits - 1)) - 1;
    const uint32_t zmax = uint32_t(4 * Q);
    Scratch &R = scratch();
    grow(R.z, n + kBlock + 64);
    grow(R.bits, len + kSlack);
    uint8_t *const pb = R.bits.data();
    if (len) std::memcpy(pb, p, len);  // p may be null when len is 0
    std::memset(pb + len, 0, kSlack);
    uint16_t *const z = R.z.data();
    const uint64_t total_bits = uint64_t(len) * 8;
    BitIn in{0, 0, 0};
    bool suspect = false;
    for (size_t b0 = 0; b0 < n; b0 += kBlock) {
        const size_t m = std::min(kBlock, n - b0);
        in.refill(pb);
        const unsigned k = unsigned(~in.ib & 7);
        in.ib >>= 3, in.nb -= 3;
        uint16_t *zo = z + b0;
        switch (k) {  // k as a constant: immediate shifts and masks in the symbol loop
            case 0: decode_block<0>(in, pb, m, W, zo); break;
            case 1: decode_block<1>(in, pb, m, W, zo); break;
            case 2: decode_block<2>(in, pb, m, W, zo); break;
            case 3: decode_block<3>(in, pb, m, W, zo); break;
            case 4: decode_block<4>(in, pb, m, W, zo); break;
            case 5: decode_block<5>(in, pb, m, W, zo); break;
            case 6: decode_block<6>(in, pb, m, W, zo); break;
            default: decode_block<7>(in, pb, m, W, zo); break;
        }
        const size_t pos = in.pos;
        const unsigned nb = in.nb;
        if (uint64_t(pos) * 8 - nb > total_bits) {
            suspect = true;
            break;
        }
    }
    if (!suspect) {
        const uint64_t used = uint64_t(in.pos) * 8 - in.nb;
        suspect = (used + 7) / 8 != len || ((used & 7) && (p[len - 1] >> (used & 7)));
    }
    if (!suspect) {
        const __m512i zm = _mm512_set1_epi16(int16_t(zmax)), qv = _mm512_set1_epi16(int16_t(Q)),
                      nq = _mm512_set1_epi16(int16_t(-Q)), one = _mm512_set1_epi16(1);
        __m512i carry = _mm512_setzero_si512();
        const __m512i last = _mm512_set1_epi16(31);
        __mmask32 bad = 0;
        for (size_t i = 0; i < n; i += 32) {
            const __mmask32 mk = tail32(n - i);
            const __m512i zv = _mm512_maskz_loadu_epi16(mk, z + i);
            bad |= _mm512_cmpgt_epu16_mask(zv, zm);
            // unzigzag: (z >> 1) ^ -(z & 1)
            __m512i v = _mm512_xor_si512(_mm512_srli_epi16(zv, 1),
                                         _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_and_si512(zv, one)));
            // With every z <= 4Q and every earlier |s| <= Q, the 16-bit sums are
            // exact up to the first value out of range, which is then caught.
            if (delta) {
                v = prefix16(v, carry);
                carry = _mm512_permutexvar_epi16(last, v);
            }
            bad |= _mm512_mask_cmpgt_epi16_mask(mk, v, qv) | _mm512_mask_cmplt_epi16_mask(mk, v, nq);
            store_syms(s + i, mk, v);
        }
        suspect = bad != 0;
    }
    // The reference decides every stream not accepted above (its errors, its messages).
    if (suspect) return ref_decode(p, len, n, delta, bits, s);
    return SPECKV_OK;
}

size_t rice_encode8_avx512(const int8_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    return rice_encode_t(s, n, delta, bits, dst, cap);
}
size_t rice_encode16_avx512(const int16_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    return rice_encode_t(s, n, delta, bits, dst, cap);
}
int rice_decode8_avx512(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s) {
    return rice_decode_t(p, len, n, delta, bits, s);
}
int rice_decode16_avx512(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s) {
    return rice_decode_t(p, len, n, delta, bits, s);
}

const RiceKernels kRice = {rice_encode8_avx512, rice_decode8_avx512, rice_encode16_avx512, rice_decode16_avx512};

}  // namespace

SPECKV_TARGET_END

// The probe and the table below are baseline code (isa_target.h).
const RiceKernels *rice_avx512_kernels() {
    static const bool ok = cpu::has(cpu::kAvx512f | cpu::kAvx512bw | cpu::kAvx512vl | cpu::kBmi | cpu::kBmi2 |
                                    cpu::kLzcnt);
    return ok ? &kRice : nullptr;
}

}  // namespace speckv::codec

#else
namespace speckv::codec {
const RiceKernels *rice_avx512_kernels() { return nullptr; }
}  // namespace speckv::codec
#endif
