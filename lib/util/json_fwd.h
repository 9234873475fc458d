// SPDX-License-Identifier: Apache-2.0
// The name of speckv's JSON value type, for headers that only pass one along
// (util/json.h has the library itself and the helpers).
#pragma once
#include <nlohmann/json_fwd.hpp>

namespace speckv {
// Objects keep their keys in the order they were added.
using Json = nlohmann::ordered_json;
}  // namespace speckv
