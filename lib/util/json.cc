// SPDX-License-Identifier: Apache-2.0
#include "util/json.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace speckv {

std::string json_text(const Json &j) {
    // indent -1: compact; replace: invalid UTF-8 becomes U+FFFD instead of an exception.
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string json_text_spaced(const Json &j) {
    // Indented by 0, every newline is the library's own (strings escape theirs):
    // after '{' or '[', before '}' or ']', or after ','. Only the last keeps a space.
    std::string t = j.dump(0, ' ', false, Json::error_handler_t::replace), o;
    o.reserve(t.size());
    for (char c : t) {
        if (c != '\n') o += c;
        else if (!o.empty() && o.back() == ',') o += ' ';
    }
    return o;
}

Json json_number(double v, int digits) {
    if (!std::isfinite(v)) return nullptr;
    char b[64];
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    double r = std::strtod(b, nullptr);
    if (r == std::trunc(r) && std::fabs(r) < 9.0e15) return static_cast<int64_t>(r);
    return r;
}

double json_fixed6(double v) {
    if (!std::isfinite(v)) return 0.0;  // JSON has no NaN or infinity
    double r = std::round(v * 1e6) / 1e6;
    return r == 0.0 ? 0.0 : r;  // no "-0.0"
}

bool json_parse(std::string_view text, Json *out, std::string *why) {
    try {
        *out = Json::parse(text.begin(), text.end());
        return true;
    } catch (const Json::exception &e) {
        if (why) *why = e.what();
        return false;
    }
}

}  // namespace speckv
