// SPDX-License-Identifier: Apache-2.0
// The list of pool backends (registry.h).
#include "backend/registry.h"

namespace speckv {

namespace {

// In the order messages name them.
const Backend *const kBackends[] = {&kFileBackend, &kAnonBackend, &kDaxBackend, &kNumaBackend};

}  // namespace

const Backend *find_backend(std::string_view scheme) {
    for (const Backend *b : kBackends)
        if (scheme == b->scheme) return b;
    return nullptr;
}

const Backend &backend_of(const Uri &u) {
    for (const Backend *b : kBackends)
        if (b->id == u.scheme) return *b;
    return kFileBackend;  // not reached: every Scheme has a row
}

std::string backend_schemes(bool colon) {
    std::string s;
    const size_t n = sizeof kBackends / sizeof kBackends[0];
    for (size_t i = 0; i < n; i++) {
        if (i) s += i + 1 == n ? " or " : ", ";
        s += kBackends[i]->scheme;
        if (colon) s += ':';
    }
    return s;
}

}  // namespace speckv
