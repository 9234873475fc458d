// SPDX-License-Identifier: Apache-2.0
// The Mooncake JSONL reader's fast path (trace_reader_simdjson.cc): one line
// parsed with simdjson's DOM parser. It only ever accepts: a line it cannot
// take whole (any error, a duplicate or missing key, a value of another
// type, a backslash anywhere, nesting deeper than 64, a line over 64 KiB) is
// handed back, and the hand-written parser decides and words the error, so
// accepted lines and error messages are the same with and without it.
// Internal to speckv_trace.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace speckv_trace {

class MooncakeFast {
  public:
    // False when the library was built without simdjson (see available()).
    static bool available();
    MooncakeFast();
    ~MooncakeFast();
    // True: *ts, *in, *out and *ids hold the line's four keys (ids
    // appended); false: nothing is known, ask the hand-written parser.
    bool parse(std::string_view line, double *ts, int64_t *in, int64_t *out, std::vector<uint64_t> *ids);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace speckv_trace
