// SPDX-License-Identifier: Apache-2.0
// The names of the KV-event parts a header needs without their definitions
// (events/publisher.h, events/encode.h; docs/events.md).
#pragma once
#include <cstdint>

namespace speckv::events {
class Publisher;             // events/publisher.h: KV events for routers
enum class Medium : uint8_t;  // events/encode.h: where a block is
}  // namespace speckv::events
