// SPDX-License-Identifier: Apache-2.0
// Page I/O's decoder (pool/page_decoder.h).
#include "pool/page_decoder.h"

#include <cinttypes>
#include <cstring>
#include <string>

#include "codec/codec.h"
#include "util/status.h"

namespace speckv {

int PageDecoder::decode_page(uint64_t page, const unsigned char *slot, unsigned char *out) const {
    codec::Header hd;
    size_t n = 0;
    int rc = codec::peek_header(slot, page_size_, &hd);
    if (rc == SPECKV_OK) rc = codec::decode(slot, hd.record_len(), out, page_size_, &n);
    if (rc != SPECKV_OK) {
        std::string why = last_error();
        counters_->bump(PoolCounters::kCrcFail);
        return fail(SPECKV_ECORRUPT, "page %" PRIu64 " holds a codec record that does not decode (%s)", page, why.c_str());
    }
    std::memset(out + n, 0, page_size_ - n);
    counters_->bump(PoolCounters::kDecPages);
    return SPECKV_OK;
}

bool PageDecoder::decode_record(const unsigned char *rec, size_t len, void *out) const {
    size_t got = 0;
    if (codec::decode(rec, len, out, page_size_, &got) != SPECKV_OK) {
        clear_error();
        return false;
    }
    std::memset(static_cast<unsigned char *>(out) + got, 0, page_size_ - got);
    counters_->bump(PoolCounters::kDecPages);
    return true;
}

}  // namespace speckv
