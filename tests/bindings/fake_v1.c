// SPDX-License-Identifier: Apache-2.0
/* A stand-in "libspeckv" of another major version (1.0.0), for the tests
 * that every binding refuses it with a message naming both versions. It
 * deliberately has nothing but the version functions. */
#include <stdint.h>

__attribute__((visibility("default"))) uint32_t speckv_version_number(void) { return 10000; }
__attribute__((visibility("default"))) const char *speckv_version_string(void) { return "1.0.0"; }
