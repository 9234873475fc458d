// SPDX-License-Identifier: Apache-2.0
// Where the project's data lives (models and request traces; data/README.md):
// $SPECKV_DATA_DIR when it is set and not empty, else the directory CMake
// compiled in (cache variable SPECKV_DATA_DIR, default <source tree>/data).
#pragma once

#include <cstdlib>
#include <string>

#ifndef SPECKV_DATA_DIR_DEFAULT
#error "SPECKV_DATA_DIR_DEFAULT is not defined: link the CMake target speckv_data"
#endif

namespace speckv_data {

inline std::string dir() {
    const char *e = std::getenv("SPECKV_DATA_DIR");
    return e && *e ? std::string(e) : std::string(SPECKV_DATA_DIR_DEFAULT);
}

// A file of the data directory, e.g. path("models/stories260K/stories260K.bin").
inline std::string path(const std::string &rel) { return dir() + "/" + rel; }

// The message for a data file that cannot be read: where it was looked for and how to point elsewhere.
inline std::string missing(const std::string &file) {
    return file + " cannot be read: the project's data is in data/ of the repository (data/README.md); "
                  "SPECKV_DATA_DIR=DIR points at another copy";
}

}  // namespace speckv_data
