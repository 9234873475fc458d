// SPDX-License-Identifier: Apache-2.0
// Page I/O's encoder: with a page locked for a write and its slot holding
// `logical` bytes in clear, replaces them by the preset's codec record
// (zero tail) if the codec shrinks them, and gives the values a read will
// then return. Counts what it coded or left in clear in the pool's
// counters. The write path uses it (PageWriter::write_page); the decoder is
// pool/page_decoder.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "pool/counters.h"

namespace speckv {

class PageEncoder {
  public:
    PageEncoder(uint32_t page_size, uint32_t channels, PoolCounters *counters)
        : page_size_(page_size), channels_(channels), counters_(counters) {}
    // `slot`: the page's bytes in the pool (page_size). `mode`: a preset id,
    // `dtype` the block's. true: the slot holds the record now and `decoded`
    // (page_size bytes, zero tail) what reads return; false: the slot is
    // unchanged (a dtype the codec does not take, a record no smaller than
    // the page or stored raw by the codec's bypass rule), counted as bypassed.
    bool encode_page(unsigned char *slot, size_t logical, uint8_t mode, uint8_t dtype, unsigned char *decoded) const;

  private:
    bool bypass() const;
    uint32_t page_size_, channels_;
    PoolCounters *counters_;
};

}  // namespace speckv
