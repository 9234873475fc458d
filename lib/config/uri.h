// SPDX-License-Identifier: Apache-2.0
// Pool URIs: scheme, target and query parameters (README.md, "Pool URIs").
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace speckv {

// One per backend (backend/registry.h: each backend's row says which).
enum class Scheme { File, Anon, Dax, Numa };

struct Uri {
    Scheme scheme = Scheme::File;
    // file: the file path (resolved); dax: the device path; numa: the node
    // number text, or for a named numa: pool (name=) its shared file.
    std::string target;
    // file:NAME, or numa:N?name=NAME: a file in default_pool_dir().
    bool named = false;
    int node = -1;     // numa: the node number
    std::string name;  // numa: the name= value ("" = unnamed, process-private)
    // Query parameters, already validated: size, page_size, max_blocks, create;
    // for numa:, policy (0 = bind, 1 = preferred); for file: and numa:,
    // owner (uid), group (gid) and mode (permission bits) of the pool file
    // (lib/util/file_access.h).
    std::map<std::string, int64_t> params;
};

// Parses `text` into *out. Returns SPECKV_OK or SPECKV_EURI with a detail
// message naming the problem.
int parse_uri(std::string_view text, Uri *out);

// Parses an octal file mode such as "0640" for a pool file: the owner's read
// and write bits set, nothing beyond 0666. False otherwise.
bool parse_file_mode(std::string_view text, int64_t *out);

// Parses "4096", "8G", "64MiB", "1k" (binary multiples) into bytes.
// Returns false on anything else, including overflow.
bool parse_size(std::string_view text, int64_t *out);

// A pool name (file:NAME, numa:N?name=NAME): 1-200 characters of
// [A-Za-z0-9._-], not starting with '.'.
bool valid_pool_name(std::string_view name);

// The directory named pools live in: $XDG_RUNTIME_DIR/speckv, else /dev/shm,
// else /tmp.
std::string default_pool_dir();

// The file a named pool lives in: default_pool_dir() + "/" + name + suffix
// ("/speckv-" in the shared /dev/shm and /tmp). file:NAME uses ".pool",
// numa:N?name=NAME ".numa.pool". `name` must be a valid pool name.
std::string named_pool_path(std::string_view name, std::string_view suffix);

}  // namespace speckv
