// SPDX-License-Identifier: Apache-2.0
// Page I/O's decoder: turns the codec record a page (or a packed block's
// entry) holds back into the page's values, zero-filled to the page size,
// and counts what it decoded in the pool's counters. The read path
// (PageReader, pool/page_reader.h) and its L2 fill callbacks use it; the
// callbacks get this object and the bytes to read, never the Pool.
#pragma once
#include <cstddef>
#include <cstdint>

#include "pool/counters.h"

namespace speckv {

class PageDecoder {
  public:
    PageDecoder(uint32_t page_size, PoolCounters *counters) : page_size_(page_size), counters_(counters) {}
    uint32_t page_size() const { return page_size_; }
    // A verified copy of coded pool page `page` (page_size bytes) into out
    // (page_size bytes, zero tail). SPECKV_ECORRUPT names the page (and
    // counts a CRC failure) if its record does not decode.
    int decode_page(uint64_t page, const unsigned char *slot, unsigned char *out) const;
    // A record of len bytes (a packed block's entry) into out (page_size
    // bytes, zero tail). false, the error cleared, if it does not decode.
    bool decode_record(const unsigned char *rec, size_t len, void *out) const;

  private:
    uint32_t page_size_;
    PoolCounters *counters_;
};

}  // namespace speckv
