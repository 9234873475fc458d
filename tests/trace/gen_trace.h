// SPDX-License-Identifier: Apache-2.0
// A generated trace as the text of a native-format file, for the trace tests.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trace.h"

namespace speckv_trace {

inline std::string make_trace(const GenOptions &g) {
    char *buf = nullptr;
    size_t len = 0;
    std::FILE *f = open_memstream(&buf, &len);
    write_header(f, Format::Native, g.block_tokens);
    Generator gen(g);
    Request r;
    while (gen.next(&r)) write_request(f, Format::Native, r);
    std::fclose(f);
    std::string t(buf, len);
    std::free(buf);
    return t;
}

}  // namespace speckv_trace
