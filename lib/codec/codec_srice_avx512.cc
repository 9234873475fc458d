// SPDX-License-Identifier: Apache-2.0
// Split Rice (docs/codec.md §18) with AVX-512 F/BW/VL/VBMI/VBMI2 and BMI2:
// the same bytes and values as the reference (lib/codec/codec_srice.cc, the
// definition; tests/codec/codec_srice_test.cc compares them). In a target
// region of those ISAs (isa_target.h) and reached only after a runtime CPU check
// (srice_avx512_kernels()); elsewhere a stub.
//
// Why it is fast: every symbol's fields sit at positions found without
// decoding the symbols before it. Decoder: per 64-bit word of the Unary
// section, one vpcompressb of the word's bit positions (mod 256) under the
// word lists its one-bits, all of the section's in order; then per block,
// the unary values are differences of consecutive positions, its Low bits
// are 64 fields of k bits in 8k bytes (every block but the last is full, so
// each starts on a byte) cut out by one vpermb and one vpmultishiftqb,
// escapes (rare) are patched in by a scalar loop, and unzigzag, the delta
// prefix sum and the range checks run in 16-bit lanes. Any
// stream it does not accept outright goes to the reference, which returns
// its own verdict and message. Encoder: the block costs of k = 0..7 from
// min(z >> k, 15) sums and escape counts in vectors (which also give every
// section's size before anything is written), the Low bits packed by shifts
// in 16/32/64-bit lanes and one vpermb, the unary codes merged in vectors so
// the serial bit writer takes 4..16 symbols a step.
#include "codec/codec_kernels.h"

#include "util/cpu.h"
#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "speckv.h"

SPECKV_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,bmi,bmi2,lzcnt,popcnt")

#include "codec/prefix16_avx512.h"  // in the region: compiled for it

namespace speckv::codec {

namespace {

constexpr size_t kBlock = 64;
constexpr unsigned kEsc = 15;

inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline void store64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
inline __mmask64 mask64(size_t n) { return n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1; }
inline __mmask32 mask32(size_t n) { return n >= 32 ? ~__mmask32(0) : (__mmask32(1) << n) - 1; }

struct Scratch {
    std::vector<uint8_t> v;      // decoder: one-bit positions mod 256, 64 + n + 128
    std::vector<uint16_t> z;     // encoder: z values, n + 128
    std::vector<uint8_t> k;      // per-block k, nb + 16
    std::vector<uint32_t> off;   // per-block byte offset of its Low bits
    std::vector<uint8_t> out;    // encoder: Unary + Escape sections, + slack
};
// Behind a pointer: the library's static TLS block must stay small enough
// for dlopen (status.h has an initial-exec variable), and a Scratch is not.
Scratch &scratch() {
    thread_local std::unique_ptr<Scratch> s;
    if (!s) s = std::make_unique<Scratch>();
    return *s;
}

// Per k: the vpermb index and vpmultishiftqb control that cut 64 k-bit fields
// out of 8k bytes (qword q of the result holds fields 8q..8q+7, which start
// at byte qk: 7 + 8k <= 63 bits), and the vpermb index that packs them back
// (qword q's k low bytes to bytes qk..qk+k-1).
struct Tables {
    alignas(64) uint8_t gather[8][64], ctrl[8][64], pack[8][64];
    Tables() {
        for (unsigned k = 0; k < 8; k++)
            for (unsigned t = 0; t < 64; t++) {
                const unsigned q = t / 8, b = t % 8;
                gather[k][t] = uint8_t(q * k + b);
                ctrl[k][t] = uint8_t(b * k);
                pack[k][t] = k ? uint8_t(8 * (t / k) + t % k) : 0;
            }
    }
};
const Tables &tables() {
    static const Tables t;
    return t;
}

// 32 symbols as 16-bit lanes; masked-off elements are not read and give 0.
inline __m512i load_syms(__mmask32 m, const int8_t *p) { return _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, p)); }
inline __m512i load_syms(__mmask32 m, const int16_t *p) { return _mm512_maskz_loadu_epi16(m, p); }
inline void store_syms(int8_t *p, __mmask32 m, __m512i v) { _mm256_mask_storeu_epi8(p, m, _mm512_cvtepi16_epi8(v)); }
inline void store_syms(int16_t *p, __mmask32 m, __m512i v) { _mm512_mask_storeu_epi16(p, m, v); }
inline int ref_decode(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s) {
    return srice_decode8_scalar(p, len, n, delta, bits, s);
}
inline int ref_decode(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s) {
    return srice_decode16_scalar(p, len, n, delta, bits, s);
}

// ------------------------------------------------------------------ decode

// The §18 stage, fast. Returns SPECKV_OK with the reference's values, or
// hands the stream to the reference.
template <class Sym, bool delta>
int decode_t(const uint8_t *p, size_t len, size_t n, unsigned bits, Sym *s) {
    const unsigned W = bits + 1;
    const int32_t Q = (1 << (bits - 1)) - 1;
    const size_t nb = (n + kBlock - 1) / kBlock, kb = (nb + 1) / 2;
    if (len < kb) return ref_decode(p, len, n, delta, bits, s);
    Scratch &R = scratch();
    grow(R.v, n + 192);
    grow(R.k, nb + 16);
    grow(R.off, nb + 16);
    uint8_t *const kk = R.k.data();
    uint32_t *const off = R.off.data();

    // K: 16 nibbles to 16 bytes per two pdep; k <= 7 is bit 3 clear.
    uint64_t kbad = 0;
    size_t j = 0;
    for (; j + 16 <= nb; j += 16) {
        const uint64_t x = load64(p + j / 2);
        const uint64_t lo = _pdep_u64(x, 0x0F0F0F0F0F0F0F0Full), hi = _pdep_u64(x >> 32, 0x0F0F0F0F0F0F0F0Full);
        kbad |= (lo | hi) & 0x0808080808080808ull;
        store64(kk + j, lo);
        store64(kk + j + 8, hi);
    }
    for (; j < nb; j++) {
        const unsigned k = (p[j / 2] >> (4 * (j & 1))) & 15u;
        kbad |= k & 8u;
        kk[j] = uint8_t(k);
    }
    if (kbad || ((nb & 1) && (p[kb - 1] >> 4))) return ref_decode(p, len, n, delta, bits, s);
    // Low: block j's fields start at byte off[j] (all blocks before it are full).
    uint64_t sumk = 0;
    for (j = 0; j + 1 < nb; j++) off[j] = uint32_t(8 * sumk), sumk += kk[j];
    off[nb - 1] = uint32_t(8 * sumk);
    const size_t mlast = n - (nb - 1) * kBlock;
    const uint64_t low_bits = 64 * sumk + uint64_t(mlast) * kk[nb - 1];
    const size_t lb = size_t((low_bits + 7) / 8);
    if (len - kb < lb || ((low_bits & 7) && (p[kb + lb - 1] >> (low_bits & 7))))
        return ref_decode(p, len, n, delta, bits, s);
    const uint8_t *const low = p + kb;

    // Unary, pass 1: the positions of the one-bits, mod 256, in order (per
    // 64-bit word a vpcompressb of the word's bit positions under it). A
    // word without a one-bit before the n-th (more than 63 zero-bits: never
    // written by an encoder) goes to the reference; so consecutive one-bits
    // are < 128 bits apart and differences mod 256 are exact.
    const uint8_t *const un = p + kb + lb;
    const size_t ulen = len - kb - lb;
    uint8_t *const pos = R.v.data() + 64;  // pos[-1] = 255: a one-bit just before the section
    pos[-1] = 0xFF;
    __m512i base = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43,
                                   42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22,
                                   21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i c64 = _mm512_set1_epi8(64);
    size_t cnt = 0, unary_end = 0;  // one-bits found; bytes of the Unary section
    uint8_t tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // the last word, zero-padded (w stays in a register)
    const size_t full = ulen / 8 * 8;
    std::memcpy(tail, un + full, ulen - full);
    for (size_t t = 0; t < ulen; t += 8) {
        const uint64_t w = load64(t < full ? un + t : tail);
        const size_t c = size_t(_mm_popcnt_u64(w));
        _mm512_storeu_si512(pos + cnt, _mm512_maskz_compress_epi8(w, base));
        if (cnt + c >= n) {  // the n-th one-bit is in this word
            const unsigned r = unsigned(n - cnt);
            const unsigned at = unsigned(_tzcnt_u64(_pdep_u64(uint64_t(1) << (r - 1), w)));
            const unsigned rest = 7 - (at & 7);  // bits after it in its byte
            if (rest && ((w >> at >> 1) & ((uint64_t(1) << rest) - 1))) return ref_decode(p, len, n, delta, bits, s);
            unary_end = t + at / 8 + 1;
            break;
        }
        if (!w) return ref_decode(p, len, n, delta, bits, s);
        cnt += c;
        base = _mm512_add_epi8(base, c64);
    }
    if (!unary_end) return ref_decode(p, len, n, delta, bits, s);

    // Pass 2, per block: v = min(pos_i - pos_{i-1} - 1, 15), its Low fields,
    // z = v << k | low, escapes patched in (the Escape section is in symbol
    // order, as the blocks), then values, delta and range (§6.2: z <= 4Q,
    // |s_i| <= Q) in 16-bit lanes, stored.
    const Tables &T = tables();
    const uint8_t *const ep = un + unary_end;
    const size_t elen = ulen - unary_end;
    uint64_t acc = 0;  // escape bits read ahead, `fill` of them; epos bytes of ep read
    unsigned fill = 0;
    size_t epos = 0;
    const __m512i one = _mm512_set1_epi8(1), c15 = _mm512_set1_epi8(15);
    const __m512i zm = _mm512_set1_epi16(int16_t(4 * Q)), qv = _mm512_set1_epi16(int16_t(Q)),
                  nq = _mm512_set1_epi16(int16_t(-Q)), one16 = _mm512_set1_epi16(1), last = _mm512_set1_epi16(31);
    __m512i carry = _mm512_setzero_si512();
    // The largest z and the extreme values so far (in vectors: no mask moves on the way).
    __m512i zhi = _mm512_setzero_si512(), xhi = zhi, xlo = zhi;
    auto values = [&](__m512i zv, __mmask32 mk, Sym *out) {
        zhi = _mm512_mask_max_epu16(zhi, mk, zhi, zv);
        __m512i x = _mm512_xor_si512(_mm512_srli_epi16(zv, 1),
                                     _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_and_si512(zv, one16)));
        // With every z <= 4Q and every earlier |s| <= Q, the 16-bit sums are
        // exact up to the first value out of range, which is then caught.
        if constexpr (delta) {
            x = prefix16(x, carry);
            carry = _mm512_permutexvar_epi16(last, x);
        }
        xhi = _mm512_mask_max_epi16(xhi, mk, xhi, x);
        xlo = _mm512_mask_min_epi16(xlo, mk, xlo, x);
        store_syms(out, mk, x);
    };
    for (j = 0; j < nb; j++) {
        const unsigned k = kk[j];
        const size_t b0 = j * kBlock, m = std::min(kBlock, n - b0);
        __m512i lowv = _mm512_setzero_si512();
        if (k) {
            const size_t bytes = (m * k + 7) / 8;
            const __m512i raw = _mm512_maskz_loadu_epi8(mask64(bytes), low + off[j]);
            const __m512i g = _mm512_permutexvar_epi8(_mm512_load_si512(T.gather[k]), raw);
            lowv = _mm512_and_si512(_mm512_multishift_epi64_epi8(_mm512_load_si512(T.ctrl[k]), g),
                                    _mm512_set1_epi8(char((1u << k) - 1)));
        }
        const __m512i d = _mm512_sub_epi8(_mm512_loadu_si512(pos + b0), _mm512_loadu_si512(pos + b0 - 1));
        const __m512i v = _mm512_min_epu8(_mm512_sub_epi8(d, one), c15);
        const __m128i kc = _mm_cvtsi32_si128(int(k));
        __m512i z0 = _mm512_or_si512(_mm512_sll_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(v)), kc),
                                     _mm512_cvtepu8_epi16(_mm512_castsi512_si256(lowv)));
        __m512i z1 = _mm512_or_si512(_mm512_sll_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(v, 1)), kc),
                                     _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(lowv, 1)));
        if (uint64_t em = _mm512_cmpeq_epi8_mask(v, c15) & mask64(m)) [[unlikely]] {
            // Escapes: z = e << k | low, e the next (W - k)-bit field (none if W <= k).
            alignas(64) uint16_t zt[64];
            _mm512_store_si512(zt, z0);
            _mm512_store_si512(zt + 32, z1);
            const unsigned ew = W > k ? W - k : 0;
            for (; em; em &= em - 1) {
                const size_t i = size_t(_tzcnt_u64(em));
                while (fill < ew) {
                    if (epos == elen) return ref_decode(p, len, n, delta, bits, s);
                    acc |= uint64_t(ep[epos++]) << fill;
                    fill += 8;
                }
                const uint32_t e = uint32_t(acc & ((uint64_t(1) << ew) - 1));
                acc >>= ew, fill -= ew;
                zt[i] = uint16_t((e << k) | (zt[i] & ((1u << k) - 1)));
            }
            z0 = _mm512_load_si512(zt);
            z1 = _mm512_load_si512(zt + 32);
        }
        values(z0, mask32(m), s + b0);
        if (m > 32) values(z1, mask32(m - 32), s + b0 + 32);
    }
    // The escape bits left in acc are the padding of the last byte read:
    // zero; and no byte after it.
    const bool bad = _mm512_cmpgt_epu16_mask(zhi, zm) | _mm512_cmpgt_epi16_mask(xhi, qv) | _mm512_cmplt_epi16_mask(xlo, nq);
    if (acc || epos != elen || bad) return ref_decode(p, len, n, delta, bits, s);
    return SPECKV_OK;
}

// ------------------------------------------------------------------ encode

// z_i = zigzag(s_i - s_{i-1}) (s_{-1} = 0) or zigzag(s_i), 16-bit, for i <
// n; zeros from n to the next multiple of 64 and one block beyond.
template <class Sym>
void zigzag_page(const Sym *s, size_t n, bool delta, uint16_t *z) {
    for (size_t i = 0; i < n; i += 32) {
        const __mmask32 m = mask32(n - i);
        const __m512i x = load_syms(m, s + i);
        __m512i d = x;
        if (delta) {
            const __mmask32 pm = i ? m : (m & ~__mmask32(1));  // s_{-1} = 0 (a masked-off element is not read)
            d = _mm512_sub_epi16(x, load_syms(pm, s + i - 1));
        }
        _mm512_storeu_si512(z + i, _mm512_maskz_mov_epi16(m, _mm512_xor_si512(_mm512_slli_epi16(d, 1), _mm512_srai_epi16(d, 15))));
    }
    const size_t done = (n + 31) / 32 * 32;
    std::memset(z + done, 0, (kBlock + 32) * sizeof(uint16_t));
}

// §18 block parameter. cost(k) = sum min(z >> k, 15) + m (1 + k) + (W - k)
// #escapes: a code is u + 1 + k bits, an escape 15 + 1 + k + (W - k). Lanes
// past the block's m symbols are zero (they add nothing: u 0, no escape,
// and m counts only the real ones). Returns k; *usum = sum min(z >> k, 15)
// and *nesc = the escapes, for that k.
inline unsigned best_k(__m512i za, __m512i zb, size_t m, unsigned W, uint32_t *usum, uint32_t *nesc) {
    const __m512i c15 = _mm512_set1_epi16(15), zero = _mm512_setzero_si512();
    __m512i acc0 = zero, acc1 = zero;
    uint32_t esc[8];
#define SPECKV_SRICE_COST(K)                                                                              \
    {                                                                                                     \
        const __m512i ua = _mm512_srli_epi16(za, K), ub = _mm512_srli_epi16(zb, K);                      \
        esc[K] = unsigned(_mm_popcnt_u32(_mm512_cmpge_epu16_mask(ua, c15))) +                            \
                 unsigned(_mm_popcnt_u32(_mm512_cmpge_epu16_mask(ub, c15)));                              \
        /* <= 2 * 15 per 16-bit lane: the high bytes are zero, a byte SAD sums 4 lanes */                 \
        const __m512i sad = _mm512_sad_epu8(_mm512_add_epi16(_mm512_min_epu16(ua, c15), _mm512_min_epu16(ub, c15)), zero); \
        if (K < 4)                                                                                        \
            acc0 = _mm512_add_epi64(acc0, _mm512_slli_epi64(sad, 16 * (K % 4)));                          \
        else                                                                                              \
            acc1 = _mm512_add_epi64(acc1, _mm512_slli_epi64(sad, 16 * (K % 4)));                          \
    }
    SPECKV_SRICE_COST(0)
    SPECKV_SRICE_COST(1)
    SPECKV_SRICE_COST(2)
    SPECKV_SRICE_COST(3)
    SPECKV_SRICE_COST(4)
    SPECKV_SRICE_COST(5)
    SPECKV_SRICE_COST(6)
    SPECKV_SRICE_COST(7)
#undef SPECKV_SRICE_COST
    // Each 16-bit field sums to <= 64 * 15 < 2^16: no carry between fields.
    const uint64_t c0 = uint64_t(_mm512_reduce_add_epi64(acc0)), c1 = uint64_t(_mm512_reduce_add_epi64(acc1));
    unsigned bk = 0;
    uint32_t bc = ~0u, bu = 0;
    for (unsigned k = 0; k < 8; k++) {
        const uint32_t u = uint32_t(((k < 4 ? c0 : c1) >> (16 * (k % 4))) & 0xFFFF);
        const uint32_t cst = u + uint32_t(m) * (1 + k) + esc[k] * (W > k ? W - k : 0);
        if (cst < bc) bc = cst, bk = k, bu = u;
    }
    *usum = bu;
    *nesc = esc[bk];
    return bk;
}

// The unary codes (v zero-bits then a one-bit: the code 1 << v, v + 1 bits)
// of the 32 z in `z` (16-bit lanes, k fixed; lanes past `valid` give empty
// codes), merged four to a 64-bit lane (<= 64 bits): 8 codes and lengths.
inline void unary_codes(__m512i z, __mmask32 valid, unsigned k, __m512i *code4, __m512i *len4) {
    const __m512i v = _mm512_min_epu16(_mm512_srl_epi16(z, _mm_cvtsi32_si128(int(k))), _mm512_set1_epi16(15));
    const __m512i one = _mm512_set1_epi16(1);
    const __m512i code = _mm512_maskz_sllv_epi16(valid, one, v);
    const __m512i len = _mm512_maskz_add_epi16(valid, v, one);
    // Pairs in 32-bit lanes: lo | hi << len(lo), <= 32 bits.
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    const __m512i llo = _mm512_and_si512(len, lo16);
    const __m512i c2 = _mm512_or_si512(_mm512_and_si512(code, lo16), _mm512_sllv_epi32(_mm512_srli_epi32(code, 16), llo));
    const __m512i l2 = _mm512_add_epi32(llo, _mm512_srli_epi32(len, 16));
    // Pairs of pairs in 64-bit lanes.
    const __m512i lo32 = _mm512_set1_epi64(0xFFFFFFFF);
    const __m512i l2lo = _mm512_and_si512(l2, lo32);
    *code4 = _mm512_or_si512(_mm512_and_si512(c2, lo32), _mm512_sllv_epi64(_mm512_srli_epi64(c2, 32), l2lo));
    *len4 = _mm512_add_epi64(l2lo, _mm512_srli_epi64(l2, 32));
}

// A block's 16 four-symbol codes (c0/l0: codes 0..7, c1/l1: 8..15; empty
// ones have length 0), merged pairwise in vectors while every merged pair
// stays <= 56 bits (the writer's limit): stores the 16, 8, 4, 2 or 1 codes
// left to pc/pl and returns how many; 0 if some code is > 56 bits already.
inline size_t merge_block(__m512i c0, __m512i l0, __m512i c1, __m512i l1, uint64_t *pc, uint64_t *pl) {
    const __m512i lim = _mm512_set1_epi64(56);
    if (_mm512_cmpgt_epu64_mask(l0, lim) | _mm512_cmpgt_epu64_mask(l1, lim)) return 0;
    const __m512i ie = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), io = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    __m512i le = _mm512_permutex2var_epi64(l0, ie, l1), lo = _mm512_permutex2var_epi64(l0, io, l1);
    __m512i ls = _mm512_add_epi64(le, lo);
    if (_mm512_cmpgt_epu64_mask(ls, lim)) {
        _mm512_store_si512(pc, c0), _mm512_store_si512(pc + 8, c1);
        _mm512_store_si512(pl, l0), _mm512_store_si512(pl + 8, l1);
        return 16;
    }
    __m512i c = _mm512_or_si512(_mm512_permutex2var_epi64(c0, ie, c1),
                                _mm512_sllv_epi64(_mm512_permutex2var_epi64(c0, io, c1), le));
    __m512i l = ls;
    size_t cnt = 8;
    // 8 -> 4 -> 2 -> 1 within the register (lanes past cnt are junk, not looked at).
    for (const __mmask8 live : {__mmask8(0x0F), __mmask8(0x03), __mmask8(0x01)}) {  // the pairs of cnt codes
        le = _mm512_permutexvar_epi64(ie, l), lo = _mm512_permutexvar_epi64(io, l);
        ls = _mm512_add_epi64(le, lo);
        if (_mm512_mask_cmpgt_epu64_mask(live, ls, lim)) break;
        c = _mm512_or_si512(_mm512_permutexvar_epi64(ie, c), _mm512_sllv_epi64(_mm512_permutexvar_epi64(io, c), le));
        l = ls;
        cnt /= 2;
    }
    _mm512_store_si512(pc, c), _mm512_store_si512(pl, l);
    return cnt;
}

// LSB-first bit writer into a buffer with >= 8 bytes of slack past what it
// writes (it stores 8 bytes at a time). Codes of <= 56 bits.
struct BitOut {
    uint8_t *o;
    uint64_t acc = 0;
    unsigned fill = 0;
    __attribute__((always_inline)) void put(uint64_t code, unsigned len) {
        acc |= code << fill;
        fill += len;
        store64(o, acc);
        o += fill >> 3;
        acc >>= fill & ~7u;
        fill &= 7;
    }
    void flush() {
        if (fill) store64(o, acc), o++;
        acc = 0, fill = 0;
    }
};

template <class Sym>
size_t encode_t(const Sym *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    const unsigned W = bits + 1;
    const size_t nb = (n + kBlock - 1) / kBlock, kb = (nb + 1) / 2;
    Scratch &R = scratch();
    grow(R.z, n + 128);
    grow(R.k, nb + 16);
    grow(R.off, nb + 16);
    uint16_t *const z = R.z.data();
    uint8_t *const kk = R.k.data();
    zigzag_page(s, n, delta, z);
    // Every k and the size of every section, before anything is written.
    uint64_t low_bits = 0, unary_bits = 0, esc_bits = 0;
    for (size_t j = 0; j < nb; j++) {
        const size_t b0 = j * kBlock, m = std::min(kBlock, n - b0);
        uint32_t usum, nesc;
        const unsigned k = best_k(_mm512_loadu_si512(z + b0), _mm512_loadu_si512(z + b0 + 32), m, W, &usum, &nesc);
        kk[j] = uint8_t(k);
        low_bits += uint64_t(m) * k;
        unary_bits += usum + m;
        esc_bits += uint64_t(nesc) * (W - k);  // an escape implies W - k >= 4
    }
    const size_t lb = size_t((low_bits + 7) / 8), ub = size_t((unary_bits + 7) / 8), eb = size_t((esc_bits + 7) / 8);
    const size_t total = kb + lb + ub + eb;
    if (total > cap) return 0;
    // K.
    for (size_t j = 0; j + 1 < nb; j += 2) dst[j / 2] = uint8_t(kk[j] | (kk[j + 1] << 4));
    if (nb & 1) dst[kb - 1] = kk[nb - 1];
    // Low: per block, 64 fields of k bits packed into 8k bytes (exact masked stores).
    const Tables &T = tables();
    uint8_t *lo = dst + kb;
    for (size_t j = 0; j < nb; j++) {
        const unsigned k = kk[j];
        if (!k) continue;
        const size_t b0 = j * kBlock, m = std::min(kBlock, n - b0);
        const __m128i kc = _mm_cvtsi32_si128(int(k));
        const __m512i mk16 = _mm512_set1_epi16(int16_t((1u << k) - 1));
        const __m512i x0 = _mm512_and_si512(_mm512_loadu_si512(z + b0), mk16);
        const __m512i x1 = _mm512_and_si512(_mm512_loadu_si512(z + b0 + 32), mk16);
        // 64 bytes of one field each -> 16-bit lanes of 2 fields (2k bits), 32-bit of 4, 64-bit of 8.
        __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(x0)), _mm512_cvtepi16_epi8(x1), 1);
        x = _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi16(0xFF)), _mm512_sll_epi16(_mm512_srli_epi16(x, 8), kc));
        x = _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi32(0xFFFF)),
                            _mm512_sll_epi32(_mm512_srli_epi32(x, 16), _mm_cvtsi32_si128(int(2 * k))));
        x = _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi64(0xFFFFFFFF)),
                            _mm512_sll_epi64(_mm512_srli_epi64(x, 32), _mm_cvtsi32_si128(int(4 * k))));
        x = _mm512_permutexvar_epi8(_mm512_load_si512(T.pack[k]), x);
        const size_t bytes = (m * k + 7) / 8;
        _mm512_mask_storeu_epi8(lo, mask64(bytes), x);
        lo += bytes;
    }
    // Unary and Escape into scratch (the writers store 8 bytes at a time), then copied.
    grow(R.out, ub + eb + 64);
    BitOut u{R.out.data()};
    alignas(64) uint64_t pc[16], pl[16];
    for (size_t j = 0; j < nb; j++) {
        const unsigned k = kk[j];
        const size_t b0 = j * kBlock, m = std::min(kBlock, n - b0);
        __m512i c0, l0, c1 = _mm512_setzero_si512(), l1 = c1;
        unary_codes(_mm512_loadu_si512(z + b0), mask32(m), k, &c0, &l0);
        if (m > 32) unary_codes(_mm512_loadu_si512(z + b0 + 32), mask32(m - 32), k, &c1, &l1);
        if (const size_t nc = merge_block(c0, l0, c1, l1, pc, pl)) {
            for (size_t c = 0; c < nc; c++) u.put(pc[c], unsigned(pl[c]));
        } else {
            // Some 4-symbol code is > 56 bits (long unary parts): symbol by symbol.
            for (size_t i = b0; i < b0 + m; i++) {
                const unsigned v = std::min(unsigned(z[i]) >> k, kEsc);
                u.put(uint64_t(1) << v, v + 1);
            }
        }
    }
    u.flush();
    // Escapes (rare), after the Unary section: its writer's 8-byte stores
    // run past its end into where they go.
    if (esc_bits) {
        BitOut e{u.o};
        for (size_t j = 0; j < nb; j++) {
            const unsigned k = kk[j];
            const size_t b0 = j * kBlock, m = std::min(kBlock, n - b0);
            const __m128i kc = _mm_cvtsi32_si128(int(k));
            const __m512i c15 = _mm512_set1_epi16(15);
            const uint64_t ea = _mm512_cmpge_epu16_mask(_mm512_srl_epi16(_mm512_loadu_si512(z + b0), kc), c15);
            const uint64_t eh = _mm512_cmpge_epu16_mask(_mm512_srl_epi16(_mm512_loadu_si512(z + b0 + 32), kc), c15);
            for (uint64_t em = (ea | (eh << 32)) & mask64(m); em; em &= em - 1)
                e.put(uint64_t(z[b0 + _tzcnt_u64(em)] >> k), W - k);
        }
        e.flush();
    }
    std::memcpy(dst + kb + lb, R.out.data(), ub + eb);
    return total;
}

size_t srice_encode8_avx512(const int8_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    return encode_t(s, n, delta, bits, dst, cap);
}
size_t srice_encode16_avx512(const int16_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    return encode_t(s, n, delta, bits, dst, cap);
}
int srice_decode8_avx512(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s) {
    return delta ? decode_t<int8_t, true>(p, len, n, bits, s) : decode_t<int8_t, false>(p, len, n, bits, s);
}
int srice_decode16_avx512(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s) {
    return delta ? decode_t<int16_t, true>(p, len, n, bits, s) : decode_t<int16_t, false>(p, len, n, bits, s);
}

const RiceKernels kSplitRice = {srice_encode8_avx512, srice_decode8_avx512, srice_encode16_avx512,
                                srice_decode16_avx512};

}  // namespace

SPECKV_TARGET_END

// The probe and the table below are baseline code (isa_target.h).
const RiceKernels *srice_avx512_kernels() {
    static const bool ok = cpu::has(cpu::kAvx512f | cpu::kAvx512bw | cpu::kAvx512vl | cpu::kAvx512vbmi |
                                    cpu::kAvx512vbmi2 | cpu::kBmi | cpu::kBmi2 | cpu::kLzcnt | cpu::kPopcnt);
    return ok ? &kSplitRice : nullptr;
}

}  // namespace speckv::codec

#else
namespace speckv::codec {
const RiceKernels *srice_avx512_kernels() { return nullptr; }
}  // namespace speckv::codec
#endif
