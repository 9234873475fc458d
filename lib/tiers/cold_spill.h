// SPDX-License-Identifier: Apache-2.0
// Where the L4 cold tier sends what it has no room for: a store behind it
// (L5, lib/remote/spill.h; docs/remote.md "Demotion to L5"). Keys are the
// tier's keys (block handles), within a store id the tier keeps in its
// directory beside the file (bind), so a later holder of the file finds the
// same copies. The tier calls it under its own mutex, one batch at a time;
// an implementation verifies what it returns.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace speckv {

class ColdSpill {
  public:
    struct PutItem {
        uint64_t key;
        const void *data;
        size_t len;
        bool ok = false;  // out: stored
    };
    struct GetItem {
        uint64_t key;
        void *dst;
        size_t len;       // the bytes put under the key: exactly these come back
        int status = 0;   // out: SPECKV_OK; SPECKV_ENOENT: no sound copy (evicted, deleted,
                          // overwritten, damaged); SPECKV_EIO: the store did not answer
    };
    struct DelItem {
        uint64_t key;
        bool ok = false;  // out: the store answered (the copy is gone, or was not there)
    };
    virtual ~ColdSpill() = default;
    // The namespace of the keys from now on (before any put, get or del):
    // the tier's store id, the same for every holder of the file.
    virtual void bind(uint64_t store_id) { (void)store_id; }
    virtual void put(std::span<PutItem> items) = 0;
    virtual void get(std::span<GetItem> items) = 0;
    virtual void del(std::span<DelItem> items) = 0;
};

}  // namespace speckv
