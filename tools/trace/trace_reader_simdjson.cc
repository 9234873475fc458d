// SPDX-License-Identifier: Apache-2.0
// The Mooncake reader's simdjson path (mooncake_json.h). Built with
// SPECKV_TRACE_SIMDJSON when CMake finds simdjson; otherwise available() is
// false and parse() always hands the line back.
#include <cstring>

#include "mooncake_json.h"

#ifdef SPECKV_TRACE_SIMDJSON
#include <simdjson.h>
#endif

namespace speckv_trace {

namespace {
constexpr size_t kMaxLine = 64 * 1024;  // longer lines go to the hand-written parser
constexpr size_t kMaxDepth = 64;        // below the hand-written parser's limit, so depth never decides here
}  // namespace

#ifdef SPECKV_TRACE_SIMDJSON

struct MooncakeFast::Impl {
    simdjson::dom::parser parser{kMaxLine};
    std::vector<char> buf = std::vector<char>(kMaxLine + simdjson::SIMDJSON_PADDING);
    bool ready = false;
};

bool MooncakeFast::available() { return true; }
MooncakeFast::MooncakeFast() : impl_(std::make_unique<Impl>()) {
    impl_->ready = impl_->parser.allocate(kMaxLine, kMaxDepth) == simdjson::SUCCESS;
}
MooncakeFast::~MooncakeFast() = default;

bool MooncakeFast::parse(std::string_view line, double *ts, int64_t *in, int64_t *out, std::vector<uint64_t> *ids) {
    // Escapes are left to the hand-written parser: it reads \uXXXX in a key
    // as '?', so an escaped key name must not match here when it would not there.
    if (!impl_->ready || line.size() > kMaxLine || std::memchr(line.data(), '\\', line.size())) return false;
    std::memcpy(impl_->buf.data(), line.data(), line.size());
    std::memset(impl_->buf.data() + line.size(), 0, simdjson::SIMDJSON_PADDING);
    simdjson::dom::element doc;
    if (impl_->parser.parse(impl_->buf.data(), line.size(), false).get(doc) != simdjson::SUCCESS) return false;
    simdjson::dom::object obj;
    if (doc.get_object().get(obj) != simdjson::SUCCESS) return false;
    bool seen[4] = {false, false, false, false};
    const size_t first_id = ids->size();
    for (simdjson::dom::key_value_pair kv : obj) {
        const std::string_view k = kv.key;
        int which = k == "timestamp" ? 0 : k == "input_length" ? 1 : k == "output_length" ? 2 : k == "hash_ids" ? 3 : -1;
        if (which < 0) continue;  // unknown keys: valid JSON (the parse checked), skipped
        if (seen[which]) return ids->resize(first_id), false;
        seen[which] = true;
        const simdjson::dom::element v = kv.value;
        if (which == 0) {
            switch (v.type()) {
            case simdjson::dom::element_type::INT64: *ts = static_cast<double>(int64_t(v)); break;
            case simdjson::dom::element_type::UINT64: *ts = static_cast<double>(uint64_t(v)); break;
            case simdjson::dom::element_type::DOUBLE: *ts = double(v); break;
            default: return ids->resize(first_id), false;
            }
        } else if (which < 3) {
            if (v.type() != simdjson::dom::element_type::INT64) return ids->resize(first_id), false;
            (which == 1 ? *in : *out) = int64_t(v);
        } else {
            simdjson::dom::array a;
            if (v.get_array().get(a) != simdjson::SUCCESS) return ids->resize(first_id), false;
            for (simdjson::dom::element e : a) {
                if (e.type() != simdjson::dom::element_type::INT64) return ids->resize(first_id), false;
                int64_t x = int64_t(e);
                if (x < 0) return ids->resize(first_id), false;
                ids->push_back(static_cast<uint64_t>(x));
            }
        }
    }
    if (!(seen[0] && seen[1] && seen[2] && seen[3])) return ids->resize(first_id), false;
    return true;
}

#else

struct MooncakeFast::Impl {};
bool MooncakeFast::available() { return false; }
MooncakeFast::MooncakeFast() = default;
MooncakeFast::~MooncakeFast() = default;
bool MooncakeFast::parse(std::string_view, double *, int64_t *, int64_t *, std::vector<uint64_t> *) { return false; }

#endif

}  // namespace speckv_trace
