// Scoring kernels of the near-memory selector (lib/nmp.cc: scalar reference,
// lib/nmp_avx2.cc: AVX2 + F16C). Every kernel follows the summation order of
// docs/selection.md §2.3, so all return identical floats.
#pragma once
#include <cstddef>
#include <cstdint>

namespace speckv::nmp {

// Raw bound sums of `n` pages for every query head:
//   out[p * q_heads + h] = Σ_c q_h[c] * (signbit(q_h[c]) ? min_p[c] : max_p[c])
// over the channels of h's KV head. The query comes split by sign (see
// split_query): qs[h*2D + c] = q>=0 part, qs[h*2D + D + c] = q<0 part, one of
// them 0 for each c, so the choice costs two FMAs and no blend. Per (page,
// head): 16 lanes (lane = c mod 16), channels in order within a lane, per channel
//   a = fma(qpos, max, a); a = fma(qneg, min, a)
// then v_l = a_l + a_{l+8}, then ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7))
// (docs/selection.md §2.3): one ZMM accumulator, or two YMM ones taking
// alternate 8-channel chunks.
// `payload[p]` points to page p's FP16 minima (channels) then maxima (channels).
using ScorePagesFn = void (*)(uint32_t kv_heads, uint32_t head_dim, uint32_t q_per_kv, const float *qs,
                              const uint16_t *const *payload, size_t n, float *out);

// qs (2 * q_heads * head_dim floats) from q: per head, [q where signbit clear,
// else +0 | q where signbit set, else +0].
void split_query(const float *q, uint32_t q_heads, uint32_t head_dim, float *qs);

void score_pages_scalar(uint32_t kv_heads, uint32_t head_dim, uint32_t q_per_kv, const float *qs,
                        const uint16_t *const *payload, size_t n, float *out);

// The AVX2 kernel, or nullptr when this CPU (or this build) lacks AVX2+F16C+FMA.
// Handles head_dim % 8 == 0; the caller uses the scalar kernel otherwise.
ScorePagesFn avx2_score_pages();

// The AVX-512 kernel (AVX512F + F16C), or nullptr. Handles head_dim % 16 == 0.
ScorePagesFn avx512_score_pages();

}  // namespace speckv::nmp
