// SPDX-License-Identifier: Apache-2.0
// The pool backends by URI scheme. Each backend describes itself once, in its
// own file, as a `Backend`: its scheme name, how the URI text after
// "scheme:" parses, which URI parameters it takes beyond the common ones, how
// a process opens (attaches or creates) a pool on it, how the CLI maps an
// existing one from outside, and where its memory sits. parse_uri, Pool's
// open / inspect / reset and placement_for_uri look the scheme up here
// instead of switching on it. Adding a backend: its `Backend` in its file, a
// Scheme value (config/uri.h) and one line in kBackends (registry.cc).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "config/uri.h"
#include "util/file_access.h"

namespace speckv {

// What the pool layer hands a backend to make a new pool; the backend never
// sees the pool format. Each returns a status (with its detail message).
struct PoolMaker {
    void *ctx;
    // The pool's geometry fits the requested size: asked before any memory is taken.
    int (*plan)(void *ctx);
    // Formats fresh, zeroed memory as a pool.
    int (*init)(void *ctx, unsigned char *base, size_t size);
    // A device mapped whole: formats it over its own size when it holds no
    // pool and `create` is set; otherwise checks it is one.
    int (*adopt)(void *ctx, const Mapping &m, bool create);
};

struct OpenArgs {
    size_t size;               // pool.size, or the URI's size=
    bool create;               // create a missing pool (pool.create, or create=)
    const FileAccess &access;  // owner / group / mode of a pool file
    const PoolMaker &make;
};

struct Backend {
    const char *scheme;  // "file": URIs start with "file:"
    Scheme id;
    // The URI text between "scheme:" and '?' into u->target (and u->named,
    // u->node). SPECKV_OK, or SPECKV_EURI with a detail message.
    int (*parse_target)(std::string_view rest, Uri *u);
    bool file_params;  // takes owner=, group=, mode= (its pool is a file)
    bool numa_params;  // takes policy=, name=
    // Opens the pool a process uses: attaches it, or creates it (a.create).
    int (*open)(const Uri &u, const OpenArgs &a, Mapping *out);
    // Maps an existing pool from outside the processes using it (pool
    // inspect, check, reset). Null for memory private to one process.
    int (*attach)(const Uri &u, bool writable, Mapping *out);
    // What messages call the pool when not its path (e.g. "anonymous
    // pool"); null, or a null result: the URI's target.
    const char *(*label)(const Uri &u);
    bool prefault;  // pool.prefault applies (a file in the page cache)
    // Where its memory is; null: local memory.
    Placement (*placement)(const Uri &u);
};

extern const Backend kFileBackend, kAnonBackend;  // backend_file.cc
extern const Backend kDaxBackend;                 // backend_dax.cc
extern const Backend kNumaBackend;                // backend_numa.cc

// The backend of a scheme name, or null.
const Backend *find_backend(std::string_view scheme);
// The backend of a parsed URI.
const Backend &backend_of(const Uri &u);
// The scheme names for messages: "file, anon, dax or numa"; with `colon`,
// "file:, anon:, dax: or numa:".
std::string backend_schemes(bool colon);

}  // namespace speckv
