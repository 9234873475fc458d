// numa: backend (libnuma). Filled in by the devices work (issue 8).
#include "backend.h"
#include "speckv.h"
#include "status.h"

namespace speckv {

int Mapping::open_numa(int node, size_t, int, Mapping *) {
    return fail(SPECKV_ENOTSUP, "the numa: backend is not available in speckv %s yet (node %d)", SPECKV_VERSION_STRING,
                node);
}

}  // namespace speckv
