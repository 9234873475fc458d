// dax: backend (device-dax via libdaxctl). Filled in by the devices work (issue 8).
#include "backend.h"
#include "speckv.h"
#include "status.h"

namespace speckv {

int Mapping::open_dax(const std::string &path, bool, Mapping *) {
    return fail(SPECKV_ENOTSUP, "the dax: backend is not available in speckv %s yet (%s)", SPECKV_VERSION_STRING,
                path.c_str());
}

}  // namespace speckv
