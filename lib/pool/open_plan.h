// SPDX-License-Identifier: Apache-2.0
// What Pool::open asks a backend for, decided before any memory is taken:
// the pool's geometry from the URI's parameters over the configuration
// (size=, page_size=, max_blocks=, create= win over pool.size, ...), who may
// own its file (owner=/group=/mode= over pool.owner/...), and the PoolMaker
// the backend formats or adopts fresh memory with. OpenPlan owns those
// checks and their messages. Invariants: a plan that plan_open accepted has
// a power-of-two page size in [4 KiB, 2 MiB], a positive size that is a
// multiple of it, a URI size within pool.size's bounds and create in {0, 1};
// the maker reads the plan it was made from, which must outlive the open.
// attach_uri is the other way in: a pool that exists, mapped by its backend.
#pragma once
#include <cstdint>
#include <string>

#include "backend/registry.h"
#include "config/config.h"
#include "config/uri.h"
#include "util/file_access.h"

namespace speckv {

struct OpenPlan {
    int64_t size = 0, page_size = 0, max_blocks = 0, create = 0;
    uint32_t summary_bytes = 0;  // pool.summary_bytes
    FileAccess access;
};

// Reads and checks the plan; writes the owner, group and mode into the URI's
// parameters, so that every backend below sees them.
int plan_open(Uri *uri, const Config &cfg, OpenPlan *out);

// The geometry check, the format of fresh memory and the adoption of a
// device mapped whole, for `plan`.
PoolMaker pool_maker(const OpenPlan *plan);

// Maps the existing pool a URI names from outside its processes (inspect,
// check, reset): SPECKV_ENOTSUP for a scheme whose pools are process-private,
// its message ending with `none_why`. *target (may be null): the URI's target.
int attach_uri(const std::string &uri_text, bool writable, const char *none_why, Mapping *out,
               std::string *target = nullptr);

}  // namespace speckv
