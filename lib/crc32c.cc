#include "crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
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

#if defined(__x86_64__)
// Three independent crc32q streams hide the instruction's 3-cycle latency;
// the partial CRCs are then shifted into place and combined (CRC is linear).
constexpr size_t kStripe = 680;  // bytes per stream per round (a multiple of 8)

__attribute__((target("sse4.2"))) uint32_t crc32c_hw(uint32_t crc, const void *data, size_t n) {
    static const Shifter k1(kStripe), k2(2 * kStripe);
    auto p = static_cast<const unsigned char *>(data);
    uint64_t c = ~crc & 0xFFFFFFFFu;
    while (n && (reinterpret_cast<uintptr_t>(p) & 7)) {
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
    while (n >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    return ~static_cast<uint32_t>(c);
}

bool have_sse42() {
    static const bool v = __builtin_cpu_supports("sse4.2");
    return v;
}
#endif

}  // namespace

uint32_t crc32c_portable(uint32_t crc, const void *data, size_t n) {
    auto p = static_cast<const unsigned char *>(data);
    uint32_t c = ~crc;
    while (n--) c = kTable[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

uint32_t crc32c(uint32_t crc, const void *data, size_t n) {
#if defined(__x86_64__)
    if (have_sse42()) return crc32c_hw(crc, data, n);
#endif
    return crc32c_portable(crc, data, n);
}

}  // namespace speckv
