// SPDX-License-Identifier: Apache-2.0
// Test pages for the RTL harness: random pages and every edge case of
// docs/codec.md (NaN, +-Inf, subnormals, -0, all-zero, max magnitude, long
// runs, no runs, incompressible -> bypass, out-of-range scales). Shared by the
// Verilator testbench and the vector writer for the iverilog run.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "speckv.h"

namespace fpga_sim {

struct Page {
    int mode;          // 0 raw, 1 paper, 2 int8, 15/16/17 vp8/vp6/vp5, 30/31/32 vp8s/vp6s/vp5s, 33..38 packed (the modes the RTL encodes)
    int dtype;         // SPECKV_DTYPE_*
    uint32_t channels; // layout C asked for (may be invalid: the encoder then uses 1)
    int kind;          // generator id (for reports)
    std::vector<uint8_t> bytes;
};

constexpr int kKinds = 15;
inline const char *kind_name(int k) {
    static const char *names[kKinds] = {"gauss",    "kv-smooth", "zero",     "const-run", "nan-inf",
                                        "subnorm",  "maxmag",    "random-bytes", "no-runs", "tiny-range",
                                        "huge-range", "neg-zero", "sparse",   "ramp", "burst"};
    return k >= 0 && k < kKinds ? names[k] : "?";
}

class Gen {
public:
    explicit Gen(uint64_t seed) : rng_(seed) {}
    uint32_t u32() { return uint32_t(rng_()); }
    uint32_t below(uint32_t n) { return n ? uint32_t(rng_() % n) : 0; }
    double uni() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
    double gauss() { return std::normal_distribution<double>(0, 1)(rng_); }

    // One page; page_bytes = 0 picks the size (mostly the 4 KiB default).
    Page page(uint32_t max_bytes, int force_kind = -1) {
        Page p;
        int r = int(below(100));
        p.dtype = r < 70 ? SPECKV_DTYPE_FP16 : r < 84 ? SPECKV_DTYPE_BF16 : r < 97 ? SPECKV_DTYPE_FP32 : SPECKV_DTYPE_OPAQUE;
        r = int(below(100));
        // paper 28 %, int8 7 %, vp6 13 %, vp8 5 %, vp5 5 %, vp6s 10 %, vp8s 4 %, vp5s 4 %, raw 6 %,
        // the packed presets k3p v3p k4p v4p k5p v5p (ids 33..38, docs/codec.md §19) 18 %
        p.mode = r < 28 ? 1 : r < 35 ? 2 : r < 48 ? 16 : r < 53 ? 15 : r < 58 ? 17 : r < 68 ? 31 : r < 72 ? 30 : r < 76 ? 32
               : r < 82 ? 0 : 33 + (r - 82) / 3;
        static const uint32_t chs[] = {1, 64, 128, 0, 3, 4096, 7, 65535, 2048, 32, 65536, 1024};
        p.channels = chs[below(sizeof chs / sizeof chs[0])];
        size_t es = speckv::codec::dtype_size(p.dtype);
        size_t bytes = max_bytes;
        if (below(100) < 20) {
            size_t maxel = max_bytes / es;
            size_t n = below(5) == 0 ? 1 + below(8) : 1 + below(uint32_t(maxel));
            bytes = n * es;
        }
        p.kind = force_kind >= 0 ? force_kind : int(below(kKinds));
        fill(p, bytes / es);
        return p;
    }

private:
    void put(Page &p, size_t i, double v) {
        float f = float(v);
        if (p.dtype == SPECKV_DTYPE_FP32) {
            std::memcpy(&p.bytes[4 * i], &f, 4);
        } else if (p.dtype == SPECKV_DTYPE_BF16) {
            uint16_t h = speckv::codec::fp32_to_bf16_rne(f);
            std::memcpy(&p.bytes[2 * i], &h, 2);
        } else if (p.dtype == SPECKV_DTYPE_FP16) {
            uint16_t h = speckv::codec::fp32_to_fp16_rne(f);
            std::memcpy(&p.bytes[2 * i], &h, 2);
        } else {
            p.bytes[i] = uint8_t(int(v));
        }
    }
    void put_bits(Page &p, size_t i, uint32_t bits32, uint16_t bits16) {
        if (p.dtype == SPECKV_DTYPE_FP32) std::memcpy(&p.bytes[4 * i], &bits32, 4);
        else if (p.dtype == SPECKV_DTYPE_OPAQUE) p.bytes[i] = uint8_t(bits16);
        else std::memcpy(&p.bytes[2 * i], &bits16, 2);
    }
    void fill(Page &p, size_t n) {
        size_t es = speckv::codec::dtype_size(p.dtype);
        p.bytes.assign(n * es, 0);
        const bool f16 = p.dtype == SPECKV_DTYPE_FP16;
        double scale = std::pow(2.0, double(int(below(f16 ? 24 : 40)) - (f16 ? 14 : 20)));
        switch (p.kind) {
            case 0:  // gaussian
                for (size_t i = 0; i < n; i++) put(p, i, gauss() * scale);
                break;
            case 1: {  // KV-like: per-channel offset + slow drift + small noise
                uint32_t C = p.channels >= 1 && p.channels <= 256 ? p.channels : 64;
                std::vector<double> off(C);
                for (auto &o : off) o = gauss() * scale;
                double drift = 0;
                for (size_t i = 0; i < n; i++) {
                    if (i % C == 0) drift += gauss() * scale * 0.01;
                    double noise = below(4) == 0 ? gauss() * scale * 0.02 : 0;
                    put(p, i, off[i % C] + drift + noise);
                }
                break;
            }
            case 2:  // all zero
                break;
            case 3: {  // long runs of equal values (and equal deltas)
                double v = gauss() * scale;
                size_t len = 1 + below(400);
                for (size_t i = 0; i < n; i++) {
                    if (--len == 0) v = gauss() * scale, len = 1 + below(400);
                    put(p, i, v);
                }
                break;
            }
            case 4:  // finite page with a NaN or an Inf somewhere -> raw
                for (size_t i = 0; i < n; i++) put(p, i, gauss() * scale);
                for (uint32_t k = 0, m = 1 + below(3); k < m; k++) {
                    size_t i = below(uint32_t(n));
                    uint32_t r = below(4);
                    uint32_t b32 = r == 0 ? 0x7F800000u : r == 1 ? 0xFF800000u : r == 2 ? 0x7FC00001u : 0xFFFFFFFFu;
                    uint16_t b16 = r == 0 ? 0x7C00 : r == 1 ? 0xFC00 : r == 2 ? 0x7E01 : 0xFFFF;
                    if (p.dtype == SPECKV_DTYPE_BF16) b16 = uint16_t(b32 >> 16);
                    put_bits(p, i, b32, b16);
                }
                break;
            case 5:  // subnormals (FP16 subnormals are normal after §2; FP32/BF16 ones quantise to 0)
                for (size_t i = 0; i < n; i++) {
                    uint32_t m = u32();
                    uint16_t h = uint16_t((m & 0x8000) | (1 + (m >> 16) % 1023));
                    uint32_t b32 = (m & 0x80000000u) | (1 + (m >> 1) % 0x7FFFFF);
                    uint16_t b16 = p.dtype == SPECKV_DTYPE_BF16 ? uint16_t((m & 0x8000) | (1 + (m >> 16) % 127)) : h;
                    if (below(8) == 0) put(p, i, gauss());  // some normals mixed in
                    else put_bits(p, i, b32, b16);
                }
                break;
            case 6:  // max magnitude: +-65504 for FP16 (dequant saturation), big values otherwise
                for (size_t i = 0; i < n; i++) {
                    double big = f16 ? 65504.0 : std::ldexp(1.0, 99) * 1.99;
                    double v = below(3) == 0 ? (below(2) ? big : -big) : gauss() * big * 0.3;
                    if (f16 && std::fabs(v) > 65504) v = v > 0 ? 65504 : -65504;
                    put(p, i, v);
                }
                break;
            case 7:  // random bytes: incompressible, NaNs likely -> raw
                for (auto &b : p.bytes) b = uint8_t(u32());
                break;
            case 8:  // no runs: strictly alternating large deltas
                for (size_t i = 0; i < n; i++) put(p, i, ((i * 37) % 11 - 5.0) * scale * ((i & 1) ? 1 : -1));
                break;
            case 9:  // max |x| below 2^-100 (FP32/BF16) -> raw; FP16 gets its smallest values
                for (size_t i = 0; i < n; i++) put(p, i, gauss() * (f16 ? std::ldexp(1.0, -20) : std::ldexp(1.0, -110)));
                break;
            case 10:  // max |x| >= 2^100 (FP32/BF16) -> raw
                for (size_t i = 0; i < n; i++) put(p, i, gauss() * (f16 ? 30000.0 : std::ldexp(1.0, 101)));
                break;
            case 11:  // -0 and +0 mixed with a few values
                for (size_t i = 0; i < n; i++) {
                    if (below(10) == 0) put(p, i, gauss() * scale);
                    else put_bits(p, i, below(2) ? 0x80000000u : 0, below(2) ? 0x8000 : 0);
                }
                break;
            case 12:  // sparse: mostly zero (long zero runs), some spikes
                for (size_t i = 0; i < n; i++) put(p, i, below(50) == 0 ? gauss() * scale : 0.0);
                break;
            case 13:  // ramp: constant delta (runs of equal d bytes)
                for (size_t i = 0; i < n; i++) put(p, i, (double(i % 200) - 100.0) * scale / 100.0);
                break;
            default:  // burst: per 64 values, 8..23 near-maximal ones in a row among zeros
                // (Rice: k = 0 with escapes, the most code bits a quarter block can take)
                for (size_t b0 = 0; b0 < n; b0 += 64) {
                    size_t at = b0 + (below(2) ? 16 * below(3) : below(48)), len = 8 + below(16);
                    for (size_t i = at; i < at + len && i < n; i++) put(p, i, (below(2) ? 1 : -1) * scale * (0.97 + 0.03 * uni()));
                }
                break;
        }
    }

    std::mt19937_64 rng_;
};

}  // namespace fpga_sim
