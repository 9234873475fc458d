// SPDX-License-Identifier: Apache-2.0
// The one JSON library of speckv: nlohmann/json (Debian's nlohmann-json3-dev,
// header-only). Every JSON the library, the CLI and the tools write is built
// as a Json value and printed by json_text; every JSON they read (except the
// trace reader's hot path) is parsed by json_parse.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "util/json_fwd.h"  // Json: objects keep their keys in the order they were added

namespace speckv {

// Compact text: no spaces, no trailing newline. Strings are escaped as JSON
// wants; bytes that are not UTF-8 (a path, a tenant name) become U+FFFD, so
// the text is always valid JSON. Never throws.
std::string json_text(const Json &j);

// The same on one line with a space after each ',' and ':' ({"a": 1, "b": [2, 3]}):
// the trace replay and codec bench reports, whose readers grep them.
std::string json_text_spaced(const Json &j);

// A measured figure to `digits` significant digits (as "%.*g" printed it):
// null when not finite, an integer when whole.
Json json_number(double v, int digits);

// A ratio as reports print it: rounded to 6 decimals ("%.6f" without the
// trailing zeros: 0.833333, 0.5, 0.0).
double json_fixed6(double v);

// Parses `text` as one JSON value (nothing but whitespace after it). On
// failure returns false and, if `why` is given, says where and why.
bool json_parse(std::string_view text, Json *out, std::string *why = nullptr);

}  // namespace speckv
