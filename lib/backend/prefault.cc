// SPDX-License-Identifier: Apache-2.0
#include "backend/prefault.h"

#include <sys/mman.h>

#include <cerrno>

namespace speckv {

bool prefault_mapping(void *base, size_t size, bool writable, size_t limit) {
    if (!base || size == 0) return false;
#ifdef MADV_HUGEPAGE
    // Harmless where THP for shmem is off ("never"); with "advise" the pool's
    // 2 MiB-aligned data area is then backed by huge pages on first touch.
    (void)madvise(base, size, MADV_HUGEPAGE);
#endif
    if (limit == 0 || size > limit) return false;
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
    // A pool file is preallocated (posix_fallocate), so populating maps pages
    // that exist already: no memory is added, only page-table entries.
    int saved = errno;
    bool ok = madvise(base, size, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0;
    errno = saved;
    return ok;
#else
    (void)writable;
    return false;
#endif
}

}  // namespace speckv
