// SPDX-License-Identifier: Apache-2.0
// Small text helpers shared by the library's reports and the CLI (JSON: util/json.h).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace speckv {

// Bytes in binary units: "512 B", "4.0 KiB", "1.5 GiB".
std::string human_bytes(uint64_t bytes);

}  // namespace speckv
