// SPDX-License-Identifier: Apache-2.0
// The public header from C++, with nothing else of speckv in sight.
#include "speckv.h"

#include <cstdio>
#include <type_traits>

static_assert(std::is_standard_layout_v<speckv_hint>);
static_assert(std::is_standard_layout_v<speckv_pool_stats>);
static_assert(sizeof(speckv_handle) == 8);

int main() {
    speckv_pool *p = nullptr;
    if (speckv_pool_open("anon:?size=8M", nullptr, &p) != SPECKV_OK) return 1;
    speckv_handle h = SPECKV_HANDLE_INVALID;
    int rc = speckv_alloc(p, 64, SPECKV_DTYPE_BF16, nullptr, &h);
    speckv_pool_close(p);
    std::printf("speckv %s from C++: alloc rc=%d\n", speckv_version_string(), rc);
    return rc == SPECKV_OK && speckv_version_number() == SPECKV_VERSION_NUMBER ? 0 : 1;
}
