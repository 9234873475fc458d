// SPDX-License-Identifier: Apache-2.0
// Inclusive prefix sum of 32 16-bit lanes plus `carry` (all lanes equal): the
// delta stage of the AVX-512 Rice decoders (codec_rice_avx512.cc,
// codec_srice_avx512.cc). Include it inside their target region (after
// SPECKV_TARGET_BEGIN, AVX-512BW at least). Internal linkage, so each object
// keeps its own copy compiled for its own region: no shared inline copy the
// linker could pick for a CPU without the other region's ISA
// (tools/check_isa.py).
#pragma once
#include <immintrin.h>

namespace speckv::codec {
namespace {

inline __m512i prefix16(__m512i x, __m512i carry) {
    x = _mm512_add_epi16(x, _mm512_bslli_epi128(x, 2));
    x = _mm512_add_epi16(x, _mm512_bslli_epi128(x, 4));
    x = _mm512_add_epi16(x, _mm512_bslli_epi128(x, 8));
    // Lane L (8 words) adds the last word of lane L-1, then of lane L-2 (and L-3 via L-1).
    const __m512i i1 = _mm512_set_epi16(23, 23, 23, 23, 23, 23, 23, 23, 15, 15, 15, 15, 15, 15, 15, 15, 7, 7, 7, 7, 7,
                                        7, 7, 7, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i i2 = _mm512_set_epi16(15, 15, 15, 15, 15, 15, 15, 15, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0, 0, 0, 0, 0, 0, 0,
                                        0, 0, 0, 0, 0, 0, 0, 0);
    x = _mm512_add_epi16(x, _mm512_maskz_permutexvar_epi16(0xFFFFFF00u, i1, x));
    x = _mm512_add_epi16(x, _mm512_maskz_permutexvar_epi16(0xFFFF0000u, i2, x));
    return _mm512_add_epi16(x, carry);
}

}  // namespace
}  // namespace speckv::codec
