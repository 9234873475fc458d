// SPDX-License-Identifier: Apache-2.0
// Split Rice (docs/codec.md §18) decoder with AVX2 + POPCNT, for CPUs
// without the AVX-512 VBMI2 stage (codec_srice_avx512.cc): the same values,
// return codes and messages as the reference (lib/codec/codec_srice.cc; tests/
// codec/codec_srice_test.cc compares them). Encoding stays the reference's.
// In an "avx2,popcnt" target region (isa_target.h), reached only after a runtime CPU check.
//
// The same two passes as the AVX-512 decoder, with what AVX2 has: the
// positions of the Unary section's one-bits from a 256-entry table per byte
// (8 positions in a 64-bit word, plus the byte's offset in every byte: no
// carries, as 8q mod 256 + 7 <= 255); then per block the unary values as
// differences of positions, the Low fields gathered by one pshufb per 8
// (two bytes each into a 16-bit lane) and shifted into place by a
// multiply, escapes patched in by a scalar loop, and unzigzag, the delta
// prefix sum and the range checks in 16-bit lanes. No PDEP/PEXT (slow on
// some AMD CPUs). Any stream it does not accept outright goes to the
// reference, which returns its own verdict and message.
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

SPECKV_TARGET_BEGIN("avx2,popcnt")

namespace speckv::codec {

namespace {

constexpr size_t kBlock = 64;

inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline void store64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }

struct Tables {
    uint64_t bitpos[256];  // the positions of byte b's set bits, ascending, one per byte
    // Per k: for 8 fields of k bits starting at byte 0 of a 16-byte lane,
    // the pshufb control that puts field f's two bytes in 16-bit lane f, and
    // the multiplier 2^(8 - s) (s = its bit offset in them) that, with a
    // shift right by 8, moves it to bits 0..k-1.
    alignas(32) uint8_t shuf[8][32];
    alignas(32) uint16_t mul[8][16];
    Tables() {
        for (unsigned b = 0; b < 256; b++) {
            uint64_t e = 0;
            for (unsigned i = 0, c = 0; i < 8; i++)
                if ((b >> i) & 1) e |= uint64_t(i) << (8 * c++);
            bitpos[b] = e;
        }
        for (unsigned k = 0; k < 8; k++)
            for (unsigned f = 0; f < 8; f++) {
                const unsigned bit = f * k, byte = bit / 8, s = bit % 8;
                for (unsigned lane = 0; lane < 2; lane++) {
                    shuf[k][16 * lane + 2 * f] = uint8_t(byte);
                    shuf[k][16 * lane + 2 * f + 1] = uint8_t(byte + 1);
                    mul[k][8 * lane + f] = uint16_t(1u << (8 - s));
                }
            }
    }
};
const Tables &tables() {
    static const Tables t;
    return t;
}

struct Scratch {
    std::vector<uint8_t> pos;  // one-bit positions mod 256: 64 + n + 64
    std::vector<uint8_t> k;    // per-block k
    std::vector<uint32_t> off; // per-block byte offset of its Low bits
    std::vector<uint8_t> low;  // the Low section + 80 zero bytes (16-byte loads past a block)
};
// Behind a pointer: the library's static TLS block must stay small enough
// for dlopen (status.h has an initial-exec variable), and a Scratch is not.
Scratch &scratch() {
    thread_local std::unique_ptr<Scratch> s;
    if (!s) s = std::make_unique<Scratch>();
    return *s;
}

inline int ref_decode(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s) {
    return srice_decode8_scalar(p, len, n, delta, bits, s);
}
inline int ref_decode(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s) {
    return srice_decode16_scalar(p, len, n, delta, bits, s);
}

// Stores the 64 values of a block (4 x 16 lanes), the first m of them.
inline void store_block(int8_t *out, const __m256i x[4], size_t m) {
    // packs interleave 128-bit lanes: (x0 x1) -> x0.lo x1.lo x0.hi x1.hi, put back in order.
    const __m256i a = _mm256_permute4x64_epi64(_mm256_packs_epi16(x[0], x[1]), 0xD8);
    const __m256i b = _mm256_permute4x64_epi64(_mm256_packs_epi16(x[2], x[3]), 0xD8);
    if (m == kBlock) {
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out), a);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 32), b);
    } else {
        alignas(32) int8_t t[64];
        _mm256_store_si256(reinterpret_cast<__m256i *>(t), a);
        _mm256_store_si256(reinterpret_cast<__m256i *>(t + 32), b);
        std::memcpy(out, t, m);
    }
}
inline void store_block(int16_t *out, const __m256i x[4], size_t m) {
    if (m == kBlock) {
        for (int g = 0; g < 4; g++) _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 16 * g), x[g]);
    } else {
        alignas(32) int16_t t[64];
        for (int g = 0; g < 4; g++) _mm256_store_si256(reinterpret_cast<__m256i *>(t + 16 * g), x[g]);
        std::memcpy(out, t, m * sizeof(int16_t));
    }
}

template <class Sym, bool delta>
int decode_t(const uint8_t *p, size_t len, size_t n, unsigned bits, Sym *s) {
    const unsigned W = bits + 1;
    const int32_t Q = (1 << (bits - 1)) - 1;
    const size_t nb = (n + kBlock - 1) / kBlock, kb = (nb + 1) / 2;
    if (len < kb) return ref_decode(p, len, n, delta, bits, s);
    Scratch &R = scratch();
    grow(R.pos, n + 128);
    grow(R.k, nb);
    grow(R.off, nb);
    uint8_t *const kk = R.k.data();
    uint32_t *const off = R.off.data();

    // K (k <= 7, zero padding nibble) and the Low offsets.
    unsigned kbad = 0;
    uint64_t sumk = 0;
    for (size_t j = 0; j < nb; j++) {
        const unsigned k = (p[j / 2] >> (4 * (j & 1))) & 15u;
        kbad |= k;
        kk[j] = uint8_t(k & 7);
        off[j] = uint32_t(8 * sumk);
        if (j + 1 < nb) sumk += k & 7;
    }
    if ((kbad & 8) || ((nb & 1) && (p[kb - 1] >> 4))) return ref_decode(p, len, n, delta, bits, s);
    const uint64_t low_bits = 64 * sumk + uint64_t(n - (nb - 1) * kBlock) * kk[nb - 1];
    const size_t lb = size_t((low_bits + 7) / 8);
    if (len - kb < lb || ((low_bits & 7) && (p[kb + lb - 1] >> (low_bits & 7))))
        return ref_decode(p, len, n, delta, bits, s);
    grow(R.low, lb + 80);  // a block's last 16-byte load ends <= 65 bytes past its start
    std::memcpy(R.low.data(), p + kb, lb);
    std::memset(R.low.data() + lb, 0, 80);
    const uint8_t *const low = R.low.data();

    // Unary, pass 1: one-bit positions mod 256. 16 zero bytes in a row (a
    // run of > 120 zero-bits: never written by an encoder) go to the
    // reference, so consecutive one-bits are < 256 bits apart and
    // differences mod 256 are exact.
    const Tables &T = tables();
    const uint8_t *const un = p + kb + lb;
    const size_t ulen = len - kb - lb;
    uint8_t *const pos = R.pos.data() + 64;
    pos[-1] = 0xFF;  // a one-bit just before the section
    size_t cnt = 0, unary_end = 0;
    unsigned zeros = 0;  // zero bytes in a row
    for (size_t q = 0; q < ulen; q++) {
        const unsigned b = un[q];
        store64(pos + cnt, T.bitpos[b] + 0x0101010101010101ull * uint8_t(8 * q));
        const size_t c = size_t(_mm_popcnt_u32(b));
        if (cnt + c >= n) {  // the n-th one-bit is in this byte: nothing set after it
            const unsigned at = unsigned(T.bitpos[b] >> (8 * (n - cnt - 1))) & 7u;
            if (b >> at >> 1) return ref_decode(p, len, n, delta, bits, s);
            unary_end = q + 1;
            break;
        }
        cnt += c;
        zeros = b ? 0 : zeros + 1;
        if (zeros == 16) return ref_decode(p, len, n, delta, bits, s);
    }
    if (!unary_end) return ref_decode(p, len, n, delta, bits, s);

    // Pass 2, per block.
    const uint8_t *const ep = un + unary_end;
    const size_t elen = ulen - unary_end;
    uint64_t acc = 0;  // escape bits read ahead (`fill` of them); epos bytes of ep read
    unsigned fill = 0;
    size_t epos = 0;
    const __m256i one8 = _mm256_set1_epi8(1), c15 = _mm256_set1_epi8(15), one16 = _mm256_set1_epi16(1);
    const __m256i zm = _mm256_set1_epi16(int16_t(4 * Q)), qv = _mm256_set1_epi16(int16_t(Q)),
                  nq = _mm256_set1_epi16(int16_t(-Q));
    const __m256i last_w = _mm256_set1_epi16(int16_t(0x0F0E));  // pshufb: each lane's last 16-bit word
    const __m256i iota16 = _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m256i carry = _mm256_setzero_si256(), zhi = carry, xhi = carry, xlo = carry;
    for (size_t j = 0; j < nb; j++) {
        const unsigned k = kk[j];
        const size_t b0 = j * kBlock, m = std::min(kBlock, n - b0);
        // Unary values of the block, as bytes.
        const __m256i v0 = _mm256_min_epu8(
            _mm256_sub_epi8(_mm256_sub_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(pos + b0)),
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(pos + b0 - 1))),
                            one8),
            c15);
        const __m256i v1 = _mm256_min_epu8(
            _mm256_sub_epi8(_mm256_sub_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(pos + b0 + 32)),
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(pos + b0 + 31))),
                            one8),
            c15);
        // z = v << k | low, 16 per vector.
        const __m128i kc = _mm_cvtsi32_si128(int(k));
        __m256i z[4];
        z[0] = _mm256_sll_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(v0)), kc);
        z[1] = _mm256_sll_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(v0, 1)), kc);
        z[2] = _mm256_sll_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(v1)), kc);
        z[3] = _mm256_sll_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(v1, 1)), kc);
        if (k) {
            const __m256i sh = _mm256_load_si256(reinterpret_cast<const __m256i *>(T.shuf[k]));
            const __m256i mu = _mm256_load_si256(reinterpret_cast<const __m256i *>(T.mul[k]));
            const __m256i mk = _mm256_set1_epi16(int16_t((1u << k) - 1));
            const uint8_t *lp = low + off[j];
            for (int g = 0; g < 4; g++) {  // fields 16g..16g+7 start at byte 2gk, 16g+8.. at (2g+1)k
                const __m256i raw = _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(lp + (2 * g + 1) * k),
                                                        reinterpret_cast<const __m128i *>(lp + 2 * g * k));
                const __m256i f = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(raw, sh), mu), 8);
                z[g] = _mm256_or_si256(z[g], _mm256_and_si256(f, mk));
            }
        }
        uint64_t em = uint64_t(uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v0, c15)))) |
                      (uint64_t(uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v1, c15)))) << 32);
        if (m < kBlock) em &= (uint64_t(1) << m) - 1;
        if (em) [[unlikely]] {
            // Escapes: z = e << k | low, e the next (W - k)-bit field (none if W <= k).
            alignas(32) uint16_t zt[64];
            for (int g = 0; g < 4; g++) _mm256_store_si256(reinterpret_cast<__m256i *>(zt + 16 * g), z[g]);
            const unsigned ew = W > k ? W - k : 0;
            for (; em; em &= em - 1) {
                const size_t i = size_t(__builtin_ctzll(em));
                while (fill < ew) {
                    if (epos == elen) return ref_decode(p, len, n, delta, bits, s);
                    acc |= uint64_t(ep[epos++]) << fill;
                    fill += 8;
                }
                const uint32_t e = uint32_t(acc & ((uint64_t(1) << ew) - 1));
                acc >>= ew, fill -= ew;
                zt[i] = uint16_t((e << k) | (zt[i] & ((1u << k) - 1)));
            }
            for (int g = 0; g < 4; g++) z[g] = _mm256_load_si256(reinterpret_cast<const __m256i *>(zt + 16 * g));
        }
        // Values: unzigzag, delta, range (lanes past m are zeroed: harmless).
        __m256i x[4];
        for (int g = 0; g < 4; g++) {
            __m256i zv = z[g];
            if (m < kBlock) zv = _mm256_and_si256(zv, _mm256_cmpgt_epi16(_mm256_set1_epi16(int16_t(m - 16 * g)), iota16));
            zhi = _mm256_max_epu16(zhi, zv);
            __m256i xv = _mm256_xor_si256(_mm256_srli_epi16(zv, 1),
                                          _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_and_si256(zv, one16)));
            if constexpr (delta) {
                // With every z <= 4Q and every earlier |s| <= Q, the 16-bit sums
                // are exact up to the first value out of range, which is then caught.
                xv = _mm256_add_epi16(xv, _mm256_slli_si256(xv, 2));
                xv = _mm256_add_epi16(xv, _mm256_slli_si256(xv, 4));
                xv = _mm256_add_epi16(xv, _mm256_slli_si256(xv, 8));
                const __m256i lastw = _mm256_shuffle_epi8(xv, last_w);  // each lane's last, broadcast in it
                xv = _mm256_add_epi16(xv, _mm256_permute2x128_si256(lastw, lastw, 0x08));  // low lane's into high
                xv = _mm256_add_epi16(xv, carry);
                const __m256i lw = _mm256_shuffle_epi8(xv, last_w);
                carry = _mm256_permute2x128_si256(lw, lw, 0x11);
            }
            xhi = _mm256_max_epi16(xhi, xv);
            xlo = _mm256_min_epi16(xlo, xv);
            x[g] = xv;
        }
        store_block(s + b0, x, m);
    }
    // The escape bits left in acc are the last byte's padding: zero; no byte after it.
    const __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi16(zhi, zm),  // z < 2^13: signed compares do
                                        _mm256_or_si256(_mm256_cmpgt_epi16(xhi, qv), _mm256_cmpgt_epi16(nq, xlo)));
    if (acc || epos != elen || !_mm256_testz_si256(bad, bad)) return ref_decode(p, len, n, delta, bits, s);
    return SPECKV_OK;
}

int srice_decode8_avx2(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s) {
    return delta ? decode_t<int8_t, true>(p, len, n, bits, s) : decode_t<int8_t, false>(p, len, n, bits, s);
}
int srice_decode16_avx2(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s) {
    return delta ? decode_t<int16_t, true>(p, len, n, bits, s) : decode_t<int16_t, false>(p, len, n, bits, s);
}

const RiceKernels kSplitRice = {srice_encode8_scalar, srice_decode8_avx2, srice_encode16_scalar,
                                srice_decode16_avx2};

}  // namespace

SPECKV_TARGET_END

// The probe and the table below are baseline code (isa_target.h).
const RiceKernels *srice_avx2_kernels() {
    static const bool ok = cpu::has(cpu::kAvx2 | cpu::kPopcnt);
    return ok ? &kSplitRice : nullptr;
}

}  // namespace speckv::codec

#else
namespace speckv::codec {
const RiceKernels *srice_avx2_kernels() { return nullptr; }
}  // namespace speckv::codec
#endif
