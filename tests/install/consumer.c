// SPDX-License-Identifier: Apache-2.0
/* A tiny program built against the installed speckv. */
#include <speckv.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    speckv_pool *p = NULL;
    speckv_handle h;
    char in[64] = "installed speckv works", out[64];
    if (speckv_version_number() != SPECKV_VERSION_NUMBER) return 1;
    if (speckv_pool_open("anon:?size=8M", NULL, &p) != SPECKV_OK) return 2;
    if (speckv_alloc(p, sizeof in, SPECKV_DTYPE_OPAQUE, NULL, &h) != SPECKV_OK) return 3;
    if (speckv_write(p, h, 0, in, sizeof in) != SPECKV_OK) return 4;
    if (speckv_access(p, h, 0, out, sizeof out, 0) != SPECKV_OK) return 5;
    speckv_pool_close(p);
    puts(out);
    return strcmp(in, out) != 0;
}
