// SPDX-License-Identifier: Apache-2.0
// Fuzz target: URI text (up to the first newline) and TOML config text (the rest).
#include <cstring>
#include <string_view>

#include "config/config.h"
#include "config/uri.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string_view all(reinterpret_cast<const char *>(data), size);
    size_t nl = all.find('\n');
    std::string_view uri = all.substr(0, nl);
    speckv::Uri u;
    speckv::parse_uri(uri, &u);
    int64_t v;
    speckv::parse_size(uri, &v);
    if (nl != std::string_view::npos) {
        speckv::Config c;
        c.load_toml_text(all.substr(nl + 1), "fuzz");
    }
    return 0;
}
