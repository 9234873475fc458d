// SPDX-License-Identifier: Apache-2.0
// AVX-512 (F/BW/VL) kernels of the codec, 16 lanes with masked tails: the
// table, the probe, and the delta and range stages (§5/§6.0/§6.1). The other
// kernels are cut by stage: codec_quant_avx512.cc (quantisers),
// codec_dequant_avx512.cc (dequantisers), codec_int8_avx512.cc (int8 records
// in one pass); what they share is codec_avx512_common.h. All in an
// "avx512f,avx512bw,avx512vl,f16c" target region (isa_target.h), only reached
// when the CPU has them. Must equal the scalar kernels bit for bit (docs/codec.md §2–§3).
// Two optional extensions, each behind its own CPUID check: AVX512-VBMI (a
// 64-byte prefix sum for the delta bytes, the exponent index of the FP16
// quantiser on port 5, and the FP16 dequantiser's 128-entry lookup) and
// AVX512-FP16 (FP16 pages dequantised 32 lanes at a time when the scale is a
// normal FP16 number; preferred over the lookup where the CPU has it).
#include "codec/codec_kernels.h"
#include "speckv.h"

#include "util/cpu.h"
#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

#include <cstdint>
#include <cstring>

SPECKV_TARGET_BEGIN("avx512f,avx512bw,avx512vl,f16c")
#include "codec/codec_avx512_common.h"

namespace speckv::codec {

bool g_has_vbmi = false, g_has_fp16 = false, g_amd = false;

namespace {
// What the CPU has (the probe); g_has_vbmi / g_has_fp16 are what is in use.
bool g_det_vbmi = false, g_det_fp16 = false;
}  // namespace

// int8 range check: |int8(b)| <= Q for all bytes, as one unsigned byte max
// of vpabsb (|-128| is 0x80 = 128 > Q) and one compare at the end. Each
// byte is loaded once, by aligned vectors (the stream of a record starts at
// an odd offset; a misaligned 64-byte load costs two line reads); the
// first and last vectors are masked to [b, b + n), masked-out lanes are 0.
bool range_ok_avx512(const uint8_t *b, size_t n, uint32_t Q) {
    if (n == 0) return true;
    const size_t head = reinterpret_cast<uintptr_t>(b) & 63;  // b - head is 64-byte aligned
    const uint8_t *const p = b - head;
    const size_t end = head + n;                               // offsets from p
    __mmask64 m = ~__mmask64(0) << head;
    if (end < 64) m &= (__mmask64(1) << end) - 1;
    __m512i m0 = _mm512_abs_epi8(_mm512_maskz_loadu_epi8(m, p)), m1 = _mm512_setzero_si512();
    size_t i = 64;
    for (; i + 128 <= end; i += 128) {
        m0 = _mm512_max_epu8(m0, _mm512_abs_epi8(_mm512_load_si512(p + i)));
        m1 = _mm512_max_epu8(m1, _mm512_abs_epi8(_mm512_load_si512(p + i + 64)));
    }
    for (; i < end; i += 64) {
        m = end - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (end - i)) - 1;
        m0 = _mm512_max_epu8(m0, _mm512_abs_epi8(_mm512_maskz_loadu_epi8(m, p + i)));
    }
    return _mm512_cmpgt_epu8_mask(_mm512_max_epu8(m0, m1), _mm512_set1_epi8(char(Q))) == 0;
}

namespace {

// ---- AVX512-VBMI: wrapping byte prefix sum, 64 bytes per step (log-step
// lane shifts by vpermb with a zeroing mask), plus the |s| <= Q check.

// One 64-byte step of the prefix sum (carry = the previous s in every byte).
__attribute__((target("avx512vbmi,avx512bw,avx512f"))) inline __m512i prefix64(__m512i x, __m512i carry,
                                                                                 const __m512i idx[6]) {
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0x1), idx[0], x));
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0x3), idx[1], x));
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xF), idx[2], x));
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xFF), idx[3], x));
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xFFFF), idx[4], x));
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xFFFFFFFFull), idx[5], x));
    return _mm512_add_epi8(x, carry);
}

__attribute__((target("avx512vbmi,avx512bw,avx512f"))) bool undelta_vbmi(const uint8_t *b, size_t n, bool delta,
                                                                          uint32_t Q, int8_t *s) {
    const __m512i qv = _mm512_set1_epi8(int8_t(Q)), nq = _mm512_set1_epi8(int8_t(-int32_t(Q)));
    const __m512i iota = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45,
                                         44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26,
                                         25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6,
                                         5, 4, 3, 2, 1, 0);
    const __m512i idx[6] = {_mm512_sub_epi8(iota, _mm512_set1_epi8(1)), _mm512_sub_epi8(iota, _mm512_set1_epi8(2)),
                            _mm512_sub_epi8(iota, _mm512_set1_epi8(4)), _mm512_sub_epi8(iota, _mm512_set1_epi8(8)),
                            _mm512_sub_epi8(iota, _mm512_set1_epi8(16)), _mm512_sub_epi8(iota, _mm512_set1_epi8(32))};
    const __m512i last = _mm512_set1_epi8(63);
    __m512i carry = _mm512_setzero_si512(), mn = carry, mx = carry;
    size_t i = 0;
    // Whole vectors without a lane mask, so the six constant shift masks stay
    // in mask registers (with the tail mask too, the compiler rebuilt them
    // every step: 6 kmovq more on port 5, which the vpermb already load).
    if (delta) {
        for (; i + 64 <= n; i += 64) {
            const __m512i x = prefix64(_mm512_loadu_si512(b + i), carry, idx);
            carry = _mm512_permutexvar_epi8(last, x);
            mn = _mm512_min_epi8(mn, x), mx = _mm512_max_epi8(mx, x);
            _mm512_storeu_si512(s + i, x);
        }
    } else {
        for (; i + 64 <= n; i += 64) {
            const __m512i x = _mm512_loadu_si512(b + i);
            mn = _mm512_min_epi8(mn, x), mx = _mm512_max_epi8(mx, x);
            _mm512_storeu_si512(s + i, x);
        }
    }
    if (i < n) {
        const __mmask64 m = (__mmask64(1) << (n - i)) - 1;
        __m512i x = _mm512_maskz_loadu_epi8(m, b + i);
        if (delta) x = prefix64(x, carry, idx);
        mn = _mm512_mask_min_epi8(mn, m, mn, x);  // lanes past n keep 0 (in range)
        mx = _mm512_mask_max_epi8(mx, m, mx, x);
        _mm512_mask_storeu_epi8(s + i, m, x);
    }
    return (_mm512_cmpgt_epi8_mask(mx, qv) | _mm512_cmpgt_epi8_mask(nq, mn)) == 0;
}

// §5/§6.0/§6.1 encoder side in 64-byte steps. Each vector is loaded exactly
// where the quantiser stored it (a narrower or offset load of bytes just
// stored is not forwarded from the store: it waits for the store to reach L1;
// measured, that was most of this pass) and shifted across lanes in
// registers. eq bit j = (d_j == d_{j+1}) comes from one byte compare per 64
// bytes; a run starts at j iff eq_j and eq_{j+1}: one rsm word from two
// masks, the next one lending its bit 0.
// Bytes x shifted up by one, with byte 63 of prev in front.
inline __m512i up1(__m512i x, __m512i prev) {
    return _mm512_alignr_epi8(x, _mm512_alignr_epi64(x, prev, 6), 15);
}
// Bytes d shifted down by one, with byte 0 of next at the end.
inline __m512i down1(__m512i d, __m512i next) {
    return _mm512_alignr_epi8(_mm512_alignr_epi64(next, d, 2), d, 1);
}

void delta_runs_avx512(const uint8_t *s, size_t n, bool delta, uint8_t *db, uint64_t *rsm) {
    __m512i prev = _mm512_setzero_si512(), dprev = prev;
    uint64_t eprev = 0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i x = _mm512_loadu_si512(s + i);
        const __m512i d = delta ? _mm512_sub_epi8(x, up1(x, prev)) : x;
        _mm512_storeu_si512(db + i, d);
        if (rsm && i) {
            const uint64_t e = _mm512_cmpeq_epi8_mask(dprev, down1(dprev, d));
            if (i >= 128) rsm[i / 64 - 2] = eprev & ((eprev >> 1) | (e << 63));
            eprev = e;
        }
        prev = x, dprev = d;
    }
    // The last k = n - i < 64 bytes (maybe none) in one masked vector; lanes
    // past n only reach bits j with j + 2 >= n, which are cleared.
    const size_t k = n - i;
    const __mmask64 m = (__mmask64(1) << k) - 1;
    const __m512i x = _mm512_maskz_loadu_epi8(m, s + i);
    const __m512i d = delta ? _mm512_sub_epi8(x, up1(x, prev)) : x;
    _mm512_mask_storeu_epi8(db + i, m, d);
    if (!rsm) return;
    const __m512i zero = _mm512_setzero_si512();
    const uint64_t et = _mm512_cmpeq_epi8_mask(d, down1(d, zero));
    if (i) {
        const uint64_t e = _mm512_cmpeq_epi8_mask(dprev, down1(dprev, d));
        if (i >= 128) rsm[i / 64 - 2] = eprev & ((eprev >> 1) | (e << 63));
        // bits 62, 63 look at bytes i, i + 1
        rsm[i / 64 - 1] = e & ((e >> 1) | (et << 63)) & (k >= 2 ? ~0ull : k ? ~0ull >> 1 : ~0ull >> 2);
    }
    rsm[i / 64] = et & (et >> 1) & (k > 2 ? (__mmask64(1) << (k - 2)) - 1 : 0);
}

bool undelta_avx512(const uint8_t *b, size_t n, bool delta, uint32_t Q, int8_t *s) {
    return g_has_vbmi ? undelta_vbmi(b, n, delta, Q, s) : undelta_sse(b, n, delta, Q, s);
}

const Kernels kAvx512 = {
    "avx512",          canon_avx512,      absmax_avx512,        colmax_avx512,
    quant_const_avx512, quant_row_avx512, dequant_const_avx512, dequant_row_avx512, undelta_avx512,
    absmax_fp16_avx512, quant_const_fp16_avx512, range_ok_avx512, delta_runs_avx512,
    rice_encode8_scalar, rice_decode8_scalar, rice_encode16_scalar, rice_decode16_scalar,
    srice_encode8_scalar, srice_decode8_scalar, srice_encode16_scalar, srice_decode16_scalar,
    dequant_const16_avx512, dequant_row16_avx512,
    nullptr,           nullptr,  // int8_decode_fp16, int8_encode_fp16: set below on AMD
};

}  // namespace

SPECKV_TARGET_END

// The probe and the table below are baseline code (isa_target.h).
const Kernels *avx512_kernels() {
    static const bool ok = [] {
        const bool base = cpu::has(cpu::kAvx512f | cpu::kAvx512bw | cpu::kAvx512vl | cpu::kF16c);
        if (base) {
            g_has_vbmi = g_det_vbmi = cpu::has(cpu::kAvx512vbmi);
            g_has_fp16 = g_det_fp16 = SPECKV_FP16_KERNELS && cpu::has(cpu::kAvx512fp16);
            g_amd = cpu::is_amd();
        }
        return base;
    }();
    if (!ok) return nullptr;
    // The Rice stages (codec_rice_avx512.cc, codec_srice_avx512.cc) also need BMI2
    // (and VBMI/VBMI2 for split Rice); else the reference.
    static const Kernels table = [] {
        Kernels k = kAvx512;
        if (const RiceKernels *r = rice_avx512_kernels()) {
            k.rice_encode8 = r->encode8;
            k.rice_decode8 = r->decode8;
            k.rice_encode16 = r->encode16;
            k.rice_decode16 = r->decode16;
        }
        if (const RiceKernels *r = srice_avx512_kernels()) {  // §18, also VBMI/VBMI2
            k.srice_encode8 = r->encode8;
            k.srice_decode8 = r->decode8;
            k.srice_encode16 = r->encode16;
            k.srice_decode16 = r->decode16;
        } else if (const RiceKernels *r2 = srice_avx2_kernels()) {  // AVX-512 without VBMI2
            k.srice_decode8 = r2->decode8;
            k.srice_decode16 = r2->decode16;
        }
        if (const Int8Kernels *e = int8_avx512_kernels()) {  // AMD, VBMI, VPCLMULQDQ
            k.int8_decode_fp16 = e->decode_fp16;
            k.int8_encode_fp16 = e->encode_fp16;
        }
        return k;
    }();
    return &table;
}

bool avx512_extensions(int on) {
    if (!avx512_kernels()) return false;
    if (on >= 0) {
        g_has_vbmi = g_det_vbmi && on;
        g_has_fp16 = g_det_fp16 && on;
    }
    return g_has_vbmi || g_has_fp16;
}

}  // namespace speckv::codec

#else
namespace speckv::codec {
const Kernels *avx512_kernels() { return nullptr; }
bool avx512_extensions(int) { return false; }
}  // namespace speckv::codec
#endif
