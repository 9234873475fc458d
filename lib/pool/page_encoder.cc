// SPDX-License-Identifier: Apache-2.0
// Page I/O's encoder (pool/page_encoder.h).
#include "pool/page_encoder.h"

#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "util/status.h"

namespace speckv {
namespace {
thread_local std::vector<unsigned char> t_record;  // one record, reused by this thread
}

bool PageEncoder::bypass() const {
    clear_error();
    counters_->bump(PoolCounters::kEncBypass);
    return false;
}

bool PageEncoder::encode_page(unsigned char *d, size_t logical, uint8_t mode, uint8_t dtype,
                              unsigned char *decoded) const {
    size_t es = codec::dtype_size(dtype);
    if (es == 0 || logical % es) return bypass();
    size_t cap = codec::max_record_size(logical);
    if (t_record.size() < cap) t_record.resize(cap);
    unsigned char *rec = t_record.data();
    size_t len = 0;
    codec::Layout lay{channels_};
    if (codec::encode(static_cast<codec::Mode>(mode), dtype, d, logical, lay, rec, cap, &len) != SPECKV_OK)
        return bypass();
    // A record the codec stored raw (its bypass rule), or one that would not
    // fit the page, leaves the page in clear: a raw record only adds a header.
    codec::Header hd;
    if (codec::peek_header(rec, len, &hd) != SPECKV_OK || hd.mode == codec::Mode::raw || len > page_size_)
        return bypass();
    size_t out = 0;
    if (codec::decode(rec, len, decoded, page_size_, &out) != SPECKV_OK) return bypass();  // cannot happen: our own record
    std::memset(decoded + out, 0, page_size_ - out);
    std::memcpy(d, rec, len);
    std::memset(d + len, 0, page_size_ - len);
    counters_->bump(PoolCounters::kEncPages);
    counters_->bump(PoolCounters::kEncRaw, logical);
    counters_->bump(PoolCounters::kEncStored, len);
    return true;
}

}  // namespace speckv
