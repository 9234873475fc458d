// SPDX-License-Identifier: Apache-2.0
// The packed presets' speed (docs/codec.md §19) beside the least work their
// decoder and encoder must do, per core, in the same run as memcpy of the
// same page: how far the library's kernels are from what the instruction set
// allows, and whether "decode >= 0.5x memcpy" is within reach at all.
//
// Per ISA (avx512, avx2: what this CPU has) and page shape (64 x 32 and
// 32 x 64 FP16, the stories260K and aidreams260K pages), rows in ns per 4 KiB
// page and as a fraction of memcpy:
//   memcpy               the page copied (the yardstick of §19.10)
//   decode k4p / v4p     speckv's codec::decode of a whole record (header,
//                        CRC32C, parameters, values), FP16 out
//   floor K: fma+F16C    what every channel-grouped (K) page costs at least:
//                        one fma per value (§19.5) and the FP32 -> FP16
//                        conversion of the results, stored; the q values are
//                        already floats (no unpacking, no header, no CRC)
//   floor K: gather      the table alternative: a C x 16 table of FP16
//                        results per page, one gather per 16 (8) values
//   floor V: lookup      a token-grouped (V) page: per row the 16 outputs
//                        (fma + F16C), then a table lookup per 32 (16)
//                        values from indices already in registers
//   encode k4p / v4p     speckv's codec::encode of the page
//   floor E: quantise    less than any encoder does: a min and max per
//                        channel from the raw FP16 bits, then per value the
//                        conversion, (x - z) * inv and the rounding (§19.3);
//                        no clamp, packing or CRC
// Samples of every row are interleaved (the machine is a shared VM); each cell
// is the median of --repeats samples of ~1 MiB of pages each.
//   ./build/release/bench/bench_codec_floor [--repeats N] [--only ROW]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_util.h"
#include "codec/codec.h"
#include "speckv.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
// GCC 12's AVX-512 headers start some intrinsics from an undefined register
// (false positives inside functions with a target attribute).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

namespace cdc = speckv::codec;
using Clock = std::chrono::steady_clock;
constexpr size_t kPageBytes = 4096, kElems = kPageBytes / 2;
constexpr size_t kSampleBytes = 1 << 20;
volatile uint32_t g_sink;
void *(*volatile g_memcpy)(void *, const void *, size_t) = std::memcpy;

// A K-like FP16 page: a per-channel offset and spread plus noise (speed does
// not depend on the values here: fixed-width records, no value is non-finite
// or near the FP16 limit).
std::vector<uint16_t> make_page(size_t C, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> off(C), sd(C);
    for (size_t c = 0; c < C; c++) off[c] = 2.f * nd(rng), sd[c] = 0.2f + std::fabs(nd(rng));
    std::vector<uint16_t> p(kElems);
    for (size_t i = 0; i < kElems; i++) p[i] = cdc::fp32_to_fp16_rne(off[i % C] + sd[i % C] * nd(rng));
    return p;
}

#if defined(__x86_64__)
// ---- floors, AVX-512 (16 values a vector) -------------------------------
// q as floats (8 KiB, hot), s and z per channel: y = fma(q, s, z) -> FP16.
[[gnu::target("avx512f,avx512bw,avx512vl,f16c,fma")]] void floor_k_512(const float *q, const float *s,
                                                                       const float *z, size_t C, uint16_t *o) {
    for (size_t c = 0; c < C; c += 16) {
        const __m512 sv = _mm512_loadu_ps(s + c), zv = _mm512_loadu_ps(z + c);
        for (size_t i = c; i < kElems; i += C)
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + i),
                                _mm512_cvtps_ph(_mm512_fmadd_ps(_mm512_loadu_ps(q + i), sv, zv), _MM_FROUND_TO_NEAREST_INT));
    }
}
// idx = c * 16 + q per value (dwords, hot); table of C x 16 FP16 results.
[[gnu::target("avx512f,avx512bw,avx512vl")]] void floor_gather_512(const int32_t *idx, const uint16_t *tbl, uint16_t *o) {
    for (size_t i = 0; i < kElems; i += 16) {
        const __m512i v = _mm512_i32gather_epi32(_mm512_loadu_si512(idx + i), tbl, 2);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + i), _mm512_cvtepi32_epi16(v));
    }
}
// per row: the 16 outputs (fma + F16C), then VPERMW per 32 values of words
// already holding their index.
[[gnu::target("avx512f,avx512bw,avx512vl,f16c,fma")]] void floor_v_512(const uint16_t *qw, const float *s,
                                                                       const float *z, size_t C, uint16_t *o) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t t = 0, i = 0; t < kElems / C; t++) {
        const __m512i tbl = _mm512_broadcast_i64x4(
            _mm512_cvtps_ph(_mm512_fmadd_ps(iota, _mm512_set1_ps(s[t]), _mm512_set1_ps(z[t])), _MM_FROUND_TO_NEAREST_INT));
        for (size_t c = 0; c < C; c += 32, i += 32)
            _mm512_storeu_si512(o + i, _mm512_permutexvar_epi16(_mm512_loadu_si512(qw + i), tbl));
    }
}
// A lower bound of an encoder's work: one read of the FP16 bits for a min and
// a max per channel (16-bit integer min / max of the raw bits: fewer ops than
// a correct signed-float order needs), then per value the conversion to FP32,
// x - z, * inv and the rounding to an integer (§19.3), summed into a register
// (no clamp, no packing, no CRC).
[[gnu::target("avx512f,avx512bw,avx512vl,f16c,fma")]] uint32_t floor_e_512(const uint16_t *h, size_t C, float *z,
                                                                           float *inv) {
    for (size_t c = 0; c < C; c += 32) {
        __m512i mn = _mm512_set1_epi16(0x7FFF), mx = _mm512_set1_epi16(-0x8000);
        for (size_t i = c; i < kElems; i += C) {
            const __m512i x = _mm512_loadu_si512(h + i);
            mn = _mm512_min_epi16(mn, x), mx = _mm512_max_epi16(mx, x);
        }
        for (int k = 0; k < 2; k++) {
            const __m512 lo = _mm512_cvtph_ps(k ? _mm512_extracti64x4_epi64(mn, 1) : _mm512_castsi512_si256(mn));
            const __m512 hi = _mm512_cvtph_ps(k ? _mm512_extracti64x4_epi64(mx, 1) : _mm512_castsi512_si256(mx));
            _mm512_storeu_ps(z + c + 16 * k, lo);
            _mm512_storeu_ps(inv + c + 16 * k, _mm512_div_ps(_mm512_set1_ps(15.f), _mm512_sub_ps(hi, lo)));
        }
    }
    __m512i acc = _mm512_setzero_si512();
    for (size_t c = 0; c < C; c += 16) {
        const __m512 zv = _mm512_loadu_ps(z + c), iv = _mm512_loadu_ps(inv + c);
        for (size_t i = c; i < kElems; i += C) {
            const __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(h + i)));
            acc = _mm512_add_epi32(acc, _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(x, zv), iv)));
        }
    }
    return uint32_t(_mm512_reduce_add_epi32(acc));
}

// ---- floors, AVX2 (8 values a vector) ------------------------------------
[[gnu::target("avx2,f16c,fma")]] void floor_k_256(const float *q, const float *s, const float *z, size_t C,
                                                   uint16_t *o) {
    for (size_t c = 0; c < C; c += 8) {
        const __m256 sv = _mm256_loadu_ps(s + c), zv = _mm256_loadu_ps(z + c);
        for (size_t i = c; i < kElems; i += C)
            _mm_storeu_si128(reinterpret_cast<__m128i *>(o + i),
                             _mm256_cvtps_ph(_mm256_fmadd_ps(_mm256_loadu_ps(q + i), sv, zv), _MM_FROUND_TO_NEAREST_INT));
    }
}
[[gnu::target("avx2")]] void floor_gather_256(const int32_t *idx, const uint16_t *tbl, uint16_t *o) {
    const __m256i pk = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9, 12,
                                        13, -1, -1, -1, -1, -1, -1, -1, -1);
    for (size_t i = 0; i < kElems; i += 8) {
        const __m256i v = _mm256_shuffle_epi8(
            _mm256_i32gather_epi32(reinterpret_cast<const int *>(tbl), _mm256_loadu_si256(reinterpret_cast<const __m256i *>(idx + i)), 2), pk);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(o + i),
                         _mm_unpacklo_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
    }
}
// per row: the 16 outputs split in low and high bytes (two PSHUFB tables),
// then per 32 values two lookups and two byte interleaves of bytes already
// holding their index.
[[gnu::target("avx2,f16c,fma")]] void floor_v_256(const uint8_t *qb, const float *s, const float *z, size_t C,
                                                   uint16_t *o) {
    const __m256 iota0 = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), iota1 = _mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15);
    const __m128i lohi = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (size_t t = 0, i = 0; t < kElems / C; t++) {
        const __m256 sv = _mm256_set1_ps(s[t]), zv = _mm256_set1_ps(z[t]);
        const __m128i h0 = _mm_shuffle_epi8(_mm256_cvtps_ph(_mm256_fmadd_ps(iota0, sv, zv), _MM_FROUND_TO_NEAREST_INT), lohi);
        const __m128i h1 = _mm_shuffle_epi8(_mm256_cvtps_ph(_mm256_fmadd_ps(iota1, sv, zv), _MM_FROUND_TO_NEAREST_INT), lohi);
        const __m256i lo = _mm256_broadcastsi128_si256(_mm_unpacklo_epi64(h0, h1));
        const __m256i hi = _mm256_broadcastsi128_si256(_mm_unpackhi_epi64(h0, h1));
        for (size_t c = 0; c < C; c += 32, i += 32) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qb + i));
            const __m256i l = _mm256_shuffle_epi8(lo, q), h = _mm256_shuffle_epi8(hi, q);
            const __m256i a = _mm256_unpacklo_epi8(l, h), b = _mm256_unpackhi_epi8(l, h);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + i), _mm256_permute2x128_si256(a, b, 0x20));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + i + 16), _mm256_permute2x128_si256(a, b, 0x31));
        }
    }
}
[[gnu::target("avx2,f16c,fma")]] uint32_t floor_e_256(const uint16_t *h, size_t C, float *z, float *inv) {
    for (size_t c = 0; c < C; c += 16) {
        __m256i mn = _mm256_set1_epi16(0x7FFF), mx = _mm256_set1_epi16(-0x8000);
        for (size_t i = c; i < kElems; i += C) {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(h + i));
            mn = _mm256_min_epi16(mn, x), mx = _mm256_max_epi16(mx, x);
        }
        for (int k = 0; k < 2; k++) {
            const __m256 lo = _mm256_cvtph_ps(k ? _mm256_extracti128_si256(mn, 1) : _mm256_castsi256_si128(mn));
            const __m256 hi = _mm256_cvtph_ps(k ? _mm256_extracti128_si256(mx, 1) : _mm256_castsi256_si128(mx));
            _mm256_storeu_ps(z + c + 8 * k, lo);
            _mm256_storeu_ps(inv + c + 8 * k, _mm256_div_ps(_mm256_set1_ps(15.f), _mm256_sub_ps(hi, lo)));
        }
    }
    __m256i acc = _mm256_setzero_si256();
    for (size_t c = 0; c < C; c += 8) {
        const __m256 zv = _mm256_loadu_ps(z + c), iv = _mm256_loadu_ps(inv + c);
        for (size_t i = c; i < kElems; i += C) {
            const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(h + i)));
            acc = _mm256_add_epi32(acc, _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_sub_ps(x, zv), iv)));
        }
    }
    alignas(32) uint32_t a[8];
    _mm256_store_si256(reinterpret_cast<__m256i *>(a), acc);
    return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}
#endif

struct Row {
    std::string name;
    std::function<void()> run;  // one page
    std::vector<double> ns;     // per sample, ns per page
};

double time_row(const Row &r) {
    const size_t iters = kSampleBytes / kPageBytes;
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; i++) {
        r.run();
        asm volatile("" ::: "memory");
    }
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(iters);
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Packed codec speed beside its instruction floor and memcpy (bench/README.md)"};
    int repeats = 31;
    std::string only;
    app.add_option("--repeats", repeats, "samples per cell (median)")->check(CLI::Range(1, 10000));
    app.add_option("--only", only, "only the rows whose name contains this (for a profiler); memcpy is always run");
    CLI11_PARSE(app, argc, argv);
#if !defined(__x86_64__)
    std::printf("bench_codec_floor: x86-64 only (the floors are AVX2 / AVX-512 loops): skipped\n");
    return 77;
#else
    std::printf("CPU: %s; AVX-512 F/BW/VL %s, AVX2+F16C+FMA %s\n", bench::cpu_name().c_str(),
                cdc::impl_available(cdc::Impl::avx512) ? "yes" : "no", cdc::impl_available(cdc::Impl::avx2) ? "yes" : "no");
    std::printf("ns per 4 KiB FP16 page (median of %d interleaved samples) and memcpy / row\n\n", repeats);
    cdc::Mode k4p, v4p;
    if (!cdc::mode_from_name("k4p", &k4p) || !cdc::mode_from_name("v4p", &v4p)) return 1;
    int bad = 0, ran = 0;
    for (cdc::Impl impl : {cdc::Impl::avx512, cdc::Impl::avx2}) {
        if (!cdc::impl_available(impl)) {
            std::printf("%s: not on this CPU (skipped)\n\n", cdc::impl_name(impl));
            continue;
        }
        ran++;
        const bool w512 = impl == cdc::Impl::avx512;
        for (size_t C : {size_t(32), size_t(64)}) {
            const size_t T = kElems / C;
            const std::vector<uint16_t> page = make_page(C, uint32_t(C));
            std::vector<uint8_t> rk(cdc::max_record_size(kPageBytes)), rv(rk.size()), scratch(rk.size());
            size_t lk = 0, lv = 0, n = 0;
            if (cdc::encode(k4p, SPECKV_DTYPE_FP16, page.data(), kPageBytes, {uint32_t(C)}, rk.data(), rk.size(), &lk, impl) ||
                cdc::encode(v4p, SPECKV_DTYPE_FP16, page.data(), kPageBytes, {uint32_t(C)}, rv.data(), rv.size(), &lv, impl)) {
                std::fprintf(stderr, "encode failed\n");
                return 1;
            }
            // inputs of the floors, hot in cache
            std::mt19937 rng(7);
            std::vector<float> qf(kElems), s(std::max(C, T)), z(std::max(C, T)), zi(C), inv(C);
            std::vector<int32_t> idx(kElems);
            std::vector<uint16_t> qw(kElems), tbl(C * 16 + 2), out(kElems);
            std::vector<uint8_t> qb(kElems);
            for (size_t i = 0; i < kElems; i++) {
                const unsigned q = rng() & 15u;
                qf[i] = float(q), qw[i] = uint16_t(q), qb[i] = uint8_t(q), idx[i] = int32_t((i % C) * 16 + q);
            }
            for (size_t g = 0; g < s.size(); g++) s[g] = 0.01f * float(1 + g % 7), z[g] = -0.3f * float(1 + g % 5);
            for (size_t i = 0; i < C * 16; i++) tbl[i] = cdc::fp32_to_fp16_rne(float(i % 16) * s[i / 16] + z[i / 16]);
            uint8_t *dst = reinterpret_cast<uint8_t *>(out.data());
            std::vector<Row> rows;
            rows.push_back({"memcpy", [&] { g_memcpy(dst, page.data(), kPageBytes); }, {}});
            rows.push_back({"decode k4p (speckv)", [&] { bad |= cdc::decode(rk.data(), lk, dst, kPageBytes, &n, impl); }, {}});
            rows.push_back({"decode v4p (speckv)", [&] { bad |= cdc::decode(rv.data(), lv, dst, kPageBytes, &n, impl); }, {}});
            if (w512) {
                rows.push_back({"floor K: fma+F16C", [&] { floor_k_512(qf.data(), s.data(), z.data(), C, out.data()); }, {}});
                rows.push_back({"floor K: gather", [&] { floor_gather_512(idx.data(), tbl.data(), out.data()); }, {}});
                rows.push_back({"floor V: lookup", [&] { floor_v_512(qw.data(), s.data(), z.data(), C, out.data()); }, {}});
            } else {
                rows.push_back({"floor K: fma+F16C", [&] { floor_k_256(qf.data(), s.data(), z.data(), C, out.data()); }, {}});
                rows.push_back({"floor K: gather", [&] { floor_gather_256(idx.data(), tbl.data(), out.data()); }, {}});
                rows.push_back({"floor V: lookup", [&] { floor_v_256(qb.data(), s.data(), z.data(), C, out.data()); }, {}});
            }
            rows.push_back({"encode k4p (speckv)", [&] { bad |= cdc::encode(k4p, SPECKV_DTYPE_FP16, page.data(), kPageBytes, {uint32_t(C)}, scratch.data(), scratch.size(), &n, impl); }, {}});
            rows.push_back({"encode v4p (speckv)", [&] { bad |= cdc::encode(v4p, SPECKV_DTYPE_FP16, page.data(), kPageBytes, {uint32_t(C)}, scratch.data(), scratch.size(), &n, impl); }, {}});
            rows.push_back({"floor E: quantise", [&] {
                                g_sink = w512 ? floor_e_512(page.data(), C, zi.data(), inv.data())
                                              : floor_e_256(page.data(), C, zi.data(), inv.data());
                            }, {}});
            if (!only.empty())
                rows.erase(std::remove_if(rows.begin() + 1, rows.end(),
                                          [&](const Row &r) { return r.name.find(only) == std::string::npos; }),
                           rows.end());
            for (auto &r : rows) r.run();  // warm
            for (int k = 0; k < repeats; k++)
                for (auto &r : rows) r.ns.push_back(time_row(r));
            const double mc = bench::median(rows[0].ns);
            std::printf("%s, %zu x %zu FP16 page (%s)\n", cdc::impl_name(impl), T, C,
                        C == 32 ? "stories260K's shape" : "aidreams260K's shape");
            std::printf("  %-22s %9s %9s %9s\n", "row", "ns/page", "GB/s", "/memcpy");
            for (auto &r : rows) {
                const double m = bench::median(r.ns);
                std::printf("  %-22s %9.1f %9.2f %9.3f\n", r.name.c_str(), m, double(kPageBytes) / m, mc / m);
            }
            std::printf("\n");
        }
    }
    if (bad) {
        std::fprintf(stderr, "a codec call failed\n");
        return 1;
    }
    return ran ? 0 : 77;  // 77: nothing to measure on this CPU (CTest: skipped)
#endif
}
