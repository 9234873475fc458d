// SPDX-License-Identifier: Apache-2.0
// Fuzz target: request traces as users download them (tools/trace/
// trace_reader.cc: Mooncake JSONL, Azure CSV, the native format).
// Input byte 0: bits 0-1 choose the format (auto, mooncake, azure, native),
// bit 2 skip_bad; the rest is the file's text, read through to its end.
// Beyond not crashing, every request returned must be what the readers
// promise (docs/trace.md): a finite, non-negative time that never goes back,
// lengths in range, ids 0, 1, 2, ...; and an error names its line.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "trace.h"

using namespace speckv_trace;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const Format kFormats[4] = {Format::Auto, Format::Mooncake, Format::Azure, Format::Native};
    std::string err;
    auto r = open_reader_text(std::string(reinterpret_cast<const char *>(data) + 1, size - 1), kFormats[data[0] & 3],
                              (data[0] & 4) != 0, &err);
    if (!r) {
        if (err.empty()) std::abort();  // refused without a reason
        return 0;
    }
    Request q;
    double last = 0;
    uint64_t n = 0;
    int rc;
    while ((rc = r->next(&q)) == 1) {
        if (!std::isfinite(q.arrival_ms) || q.arrival_ms < 0 || (n && q.arrival_ms < last) || q.id != n ||
            q.input_len > 100000000 || q.output_len > 100000000)
            std::abort();
        last = q.arrival_ms;
        n++;
    }
    if (rc == -1 && r->error().empty()) std::abort();
    return 0;
}
