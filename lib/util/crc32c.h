// SPDX-License-Identifier: Apache-2.0
// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every
// pool page, of the superblock and of codec records.
#pragma once
#include <cstddef>
#include <cstdint>

namespace speckv {

// Extends `crc` (start with 0) over `n` bytes. Same result as the usual
// crc32c(): init ~0, final xor ~0 are applied inside, so crc32c(crc32c(0,a),b)
// == crc32c(0, a||b). Picks the fastest path the CPU has (CPUID, once):
// VPCLMULQDQ folding on 512-bit lanes (AVX-512) or on 256-bit lanes (AVX2),
// PCLMULQDQ folding on 128-bit lanes, SSE4.2 crc32q, or a table.
uint32_t crc32c(uint32_t crc, const void *data, size_t n);

// Copies `n` bytes from `src` to `dst` (not overlapping) and returns
// crc32c(crc, src, n) of the bytes as they were copied, in one pass: the CRC
// is folded while the bytes are in registers (the folding paths), else the
// copy is followed by crc32c() of the destination.
uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n);

// The portable table path, exposed so a test can check both paths agree.
uint32_t crc32c_portable(uint32_t crc, const void *data, size_t n);

// Internal (not in speckv.h, not exported from the shared library): the
// implementations behind crc32c(), so tests and benches can run each one.
enum class Crc32cPath : int {
    portable = 0,  // byte table
    sse42 = 1,     // 3 interleaved crc32q streams + tabulated combine
    pclmul = 2,    // PCLMULQDQ folding, 4 x 128-bit lanes, crc32q for the last 16 bytes + tail
    vpclmul256 = 3,  // VPCLMULQDQ folding, 4 x 256-bit lanes (AVX2 + VPCLMULQDQ); pclmul below 256 B
    vpclmul = 4,   // VPCLMULQDQ folding, 4 x 512-bit lanes (AVX-512 F/BW/VL); pclmul below 256 B
};
constexpr int kCrc32cPathCount = 5;

// Whether this CPU (and OS) can run `p`; portable always can.
bool crc32c_path_available(Crc32cPath p);
// "portable", "sse42", "pclmul", "vpclmul256", "vpclmul".
const char *crc32c_path_name(Crc32cPath p);
// The path crc32c() uses now.
Crc32cPath crc32c_active_path();
// Runs path `p` (the portable one if `p` is not available here).
uint32_t crc32c_with(Crc32cPath p, uint32_t crc, const void *data, size_t n);
// crc32c_copy() on path `p` (the portable one if `p` is not available here).
uint32_t crc32c_copy_with(Crc32cPath p, uint32_t crc, void *dst, const void *src, size_t n);
// Makes crc32c() and crc32c_copy() use `p` from now on (for tests); false, and no change, if `p`
// is not available.
bool crc32c_force_path(Crc32cPath p);

// Internal: the constants of CLMUL folding (their derivation: lib/util/crc32c.cc),
// shared by crc32c.cc and the codec's CRC-carrying kernels. xpow_mod_p(e) =
// x^e mod P in the normal (unreflected) form, P = 0x1_1EDC6F41; fold_k(D) =
// {K_H, K_L} = x^(D+31), x^(D-33) mod P, bit reflected: a fold over D bits,
// K_H multiplying the lane's low qword.
namespace crc_fold {
constexpr uint32_t xpow_mod_p(unsigned e) {
    uint64_t r = 1;  // x^0
    for (unsigned i = 0; i < e; i++) {
        r <<= 1;
        if (r >> 32) r ^= 0x11EDC6F41ull;
    }
    return static_cast<uint32_t>(r);
}
constexpr uint32_t bitrev32(uint32_t v) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) r |= ((v >> i) & 1u) << (31 - i);
    return r;
}
struct FoldK {
    uint64_t kh, kl;
};
constexpr FoldK fold_k(unsigned dbits) { return {bitrev32(xpow_mod_p(dbits + 31)), bitrev32(xpow_mod_p(dbits - 33))}; }
}  // namespace crc_fold

}  // namespace speckv
