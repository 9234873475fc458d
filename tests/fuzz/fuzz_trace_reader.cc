// SPDX-License-Identifier: Apache-2.0
// Fuzz target: request traces as users download them (tools/trace/
// trace_reader.cc: Mooncake JSONL, Azure CSV, the native format).
// Input byte 0: bits 0-1 choose the format (auto, mooncake, azure, native),
// bit 2 skip_bad; the rest is the file's text, read through to its end.
// Beyond not crashing, every request returned must be what the readers
// promise (docs/trace.md): a finite, non-negative time that never goes back,
// lengths in range, ids 0, 1, 2, ...; and an error names its line. With
// simdjson built in, the Mooncake reader's two parsers (simdjson's fast path
// and the hand-written one) must return the same requests and error.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trace.h"

using namespace speckv_trace;

namespace {

// Reads the text through; aborts on a broken promise. Returns what was read
// (each request's fields, then the error) for the parsers' comparison.
std::string read_through(const uint8_t *data, size_t size, JsonParser jp) {
    static const Format kFormats[4] = {Format::Auto, Format::Mooncake, Format::Azure, Format::Native};
    std::string err;
    auto r = open_reader_text(std::string(reinterpret_cast<const char *>(data) + 1, size - 1), kFormats[data[0] & 3],
                              (data[0] & 4) != 0, &err, jp);
    if (!r) {
        if (err.empty()) std::abort();  // refused without a reason
        return "refused: " + err;
    }
    Request q;
    double last = 0;
    uint64_t n = 0;
    int rc;
    std::string seen;
    while ((rc = r->next(&q)) == 1) {
        if (!std::isfinite(q.arrival_ms) || q.arrival_ms < 0 || (n && q.arrival_ms < last) || q.id != n ||
            q.input_len > 100000000 || q.output_len > 100000000)
            std::abort();
        last = q.arrival_ms;
        n++;
        char b[96];
        std::snprintf(b, sizeof b, "%a %u %u %llu:", q.arrival_ms, q.input_len, q.output_len, static_cast<unsigned long long>(q.line));
        seen += b;
        for (uint64_t id : q.hash_ids) seen += std::to_string(id) + ",";
        seen += "\n";
    }
    if (rc == -1 && r->error().empty()) std::abort();
    return seen + (rc < 0 ? r->error() : "end") + " " + std::to_string(r->skipped());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    std::string hand = read_through(data, size, JsonParser::Hand);
    if (simdjson_available() && read_through(data, size, JsonParser::Simdjson) != hand) std::abort();
    return 0;
}
