// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every
// pool page, of the superblock and of codec records.
#pragma once
#include <cstddef>
#include <cstdint>

namespace speckv {

// Extends `crc` (start with 0) over `n` bytes. Same result as the usual
// crc32c(): init ~0, final xor ~0 are applied inside, so crc32c(crc32c(0,a),b)
// == crc32c(0, a||b). Uses SSE4.2 when the CPU has it, a table otherwise.
uint32_t crc32c(uint32_t crc, const void *data, size_t n);

// The portable table path, exposed so a test can check both paths agree.
uint32_t crc32c_portable(uint32_t crc, const void *data, size_t n);

}  // namespace speckv
