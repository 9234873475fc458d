// SPDX-License-Identifier: Apache-2.0
// The codec's presets (docs/codec.md §9): each mode's parameters and name.
#include <cstring>

#include "codec/codec.h"

namespace speckv::codec {

namespace {


struct Preset {
    const char *name;
    Params p;
};

// docs/codec.md §9. Index = mode id.
constexpr Preset kPresets[kModeCount] = {
    {"raw", {0, 0, 0, 0}},
    {"paper", {8, kGroupPage, kOrderLinear, kEntropyRle}},
    {"int8", {8, kGroupPage, kOrderNone, kEntropyBytes}},
    {"k8", {8, kGroupChannel, kOrderColumnar, kEntropyRice}},
    {"v8", {8, kGroupToken, kOrderLinear, kEntropyRice}},
    {"k6", {6, kGroupChannel, kOrderColumnar, kEntropyRice}},
    {"v6", {6, kGroupToken, kOrderLinear, kEntropyRice}},
    {"k5", {5, kGroupChannel, kOrderColumnar, kEntropyRice}},
    {"v5", {5, kGroupToken, kOrderLinear, kEntropyRice}},
    {"p8r", {8, kGroupPage, kOrderLinear, kEntropyRice}},
    {"k4", {4, kGroupChannel, kOrderColumnar, kEntropyRice}},
    {"v4", {4, kGroupToken, kOrderLinear, kEntropyRice}},
    // §13 (wide quantiser, b 9..12, Rice only)
    {"k9", {9, kGroupChannel, kOrderColumnar, kEntropyRice}},
    {"k10", {10, kGroupChannel, kOrderColumnar, kEntropyRice}},
    {"k12", {12, kGroupChannel, kOrderColumnar, kEntropyRice}},
    // §16 (from the delta-order measurement §14.2: no delta wins for V)
    {"vp8", {8, kGroupPage, kOrderNone, kEntropyRice}},
    {"vp6", {6, kGroupPage, kOrderNone, kEntropyRice}},
    {"vp5", {5, kGroupPage, kOrderNone, kEntropyRice}},
    // §18 (split Rice: the Rice presets above with entropy 3)
    {"k8s", {8, kGroupChannel, kOrderColumnar, kEntropySplitRice}},
    {"v8s", {8, kGroupToken, kOrderLinear, kEntropySplitRice}},
    {"k6s", {6, kGroupChannel, kOrderColumnar, kEntropySplitRice}},
    {"v6s", {6, kGroupToken, kOrderLinear, kEntropySplitRice}},
    {"k5s", {5, kGroupChannel, kOrderColumnar, kEntropySplitRice}},
    {"v5s", {5, kGroupToken, kOrderLinear, kEntropySplitRice}},
    {"p8rs", {8, kGroupPage, kOrderLinear, kEntropySplitRice}},
    {"k4s", {4, kGroupChannel, kOrderColumnar, kEntropySplitRice}},
    {"v4s", {4, kGroupToken, kOrderLinear, kEntropySplitRice}},
    {"k9s", {9, kGroupChannel, kOrderColumnar, kEntropySplitRice}},
    {"k10s", {10, kGroupChannel, kOrderColumnar, kEntropySplitRice}},
    {"k12s", {12, kGroupChannel, kOrderColumnar, kEntropySplitRice}},
    {"vp8s", {8, kGroupPage, kOrderNone, kEntropySplitRice}},
    {"vp6s", {6, kGroupPage, kOrderNone, kEntropySplitRice}},
    {"vp5s", {5, kGroupPage, kOrderNone, kEntropySplitRice}},
    // §19 (fixed-width packed, asymmetric quantiser: K per channel, V per token)
    {"k3p", {3, kGroupChannel, kOrderNone, kEntropyPacked}},
    {"v3p", {3, kGroupToken, kOrderNone, kEntropyPacked}},
    {"k4p", {4, kGroupChannel, kOrderNone, kEntropyPacked}},
    {"v4p", {4, kGroupToken, kOrderNone, kEntropyPacked}},
    {"k5p", {5, kGroupChannel, kOrderNone, kEntropyPacked}},
    {"v5p", {5, kGroupToken, kOrderNone, kEntropyPacked}},
};

}  // namespace

Params mode_params(Mode m) {
    auto i = size_t(m);
    return i < size_t(kModeCount) ? kPresets[i].p : Params{0, 0, 0, 0};
}
const char *mode_name(Mode m) {
    auto i = size_t(m);
    return i < size_t(kModeCount) ? kPresets[i].name : "?";
}
bool mode_from_name(const char *name, Mode *out) {
    if (!name) return false;
    for (int i = 0; i < kModeCount; i++)
        if (std::strcmp(name, kPresets[i].name) == 0) {
            *out = Mode(i);
            return true;
        }
    return false;
}

}  // namespace speckv::codec
