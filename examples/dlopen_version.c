// SPDX-License-Identifier: Apache-2.0
/* dlopen_version.c — load libspeckv at run time and refuse an incompatible one.
 *
 * Serving engines often dlopen speckv so that it stays optional. The header is
 * still the contract: its SPECKV_VERSION_* macros say what this program was
 * built against, and speckv_version_number() says what was actually loaded.
 * Rule: same major version, and a library at least as new as the header
 * (minor releases only add functions; a new function must be looked up with
 * dlsym and may be missing from an older library).
 *
 *   dlopen_version [LIBRARY]     (default: $SPECKV_LIB, else libspeckv.so.0)
 * Exit status: 0 compatible and working, 1 incompatible or failing, 2 not found.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "speckv.h"

/* One typedef per function we use, taken from the prototypes in speckv.h. */
typedef uint32_t (*version_number_fn)(void);
typedef const char *(*version_string_fn)(void);
typedef const char *(*strerror_fn)(int);
typedef const char *(*errmsg_fn)(void);
typedef int (*pool_open_fn)(const char *, const speckv_config *, speckv_pool **);
typedef int (*pool_close_fn)(speckv_pool *);
typedef int (*alloc_fn)(speckv_pool *, uint64_t, int, const speckv_hint *, speckv_handle *);
typedef int (*free_fn)(speckv_pool *, speckv_handle);

/* Returns nonzero when a library of version `lib` can be used by this program. */
static int compatible(uint32_t lib) {
    return lib / 10000 == SPECKV_VERSION_MAJOR && lib >= SPECKV_VERSION_NUMBER;
}

static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p) fprintf(stderr, "dlopen_version: %s is missing: %s\n", name, dlerror());
    return p;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : getenv("SPECKV_LIB");
    if (!path || !*path) path = "libspeckv.so.0";

    /* The check itself, with a value no real library has. */
    if (compatible((SPECKV_VERSION_MAJOR + 1) * 10000)) {
        fprintf(stderr, "dlopen_version: the check accepted another major version\n");
        return 1;
    }

    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen_version: cannot load %s: %s\n", path, dlerror());
        return 2;
    }
    version_number_fn version_number;
    version_string_fn version_string;
    *(void **)&version_number = sym(h, "speckv_version_number");
    *(void **)&version_string = sym(h, "speckv_version_string");
    if (!version_number || !version_string) return 1;

    uint32_t lib = version_number();
    if (!compatible(lib)) {
        fprintf(stderr,
                "dlopen_version: %s is speckv %u.%u.%u but this program was built against %s "
                "(needs %d.x, at least %s)\n",
                path, lib / 10000, lib / 100 % 100, lib % 100, SPECKV_VERSION_STRING, SPECKV_VERSION_MAJOR,
                SPECKV_VERSION_STRING);
        return 1;
    }
    printf("loaded %s: speckv %s (built against %s)\n", path, version_string(), SPECKV_VERSION_STRING);

    /* Use it: open a private pool, allocate and free one block. */
    strerror_fn str_error;
    errmsg_fn errmsg;
    pool_open_fn pool_open;
    pool_close_fn pool_close;
    alloc_fn alloc;
    free_fn free_block;
    *(void **)&str_error = sym(h, "speckv_strerror");
    *(void **)&errmsg = sym(h, "speckv_errmsg");
    *(void **)&pool_open = sym(h, "speckv_pool_open");
    *(void **)&pool_close = sym(h, "speckv_pool_close");
    *(void **)&alloc = sym(h, "speckv_alloc");
    *(void **)&free_block = sym(h, "speckv_free");
    if (!str_error || !errmsg || !pool_open || !pool_close || !alloc || !free_block) return 1;

    speckv_pool *pool = NULL;
    int rc = pool_open("anon:?size=8M", NULL, &pool);
    speckv_handle b = SPECKV_HANDLE_INVALID;
    if (rc == SPECKV_OK) rc = alloc(pool, 4096, SPECKV_DTYPE_FP16, NULL, &b);
    if (rc == SPECKV_OK) rc = free_block(pool, b);
    if (rc == SPECKV_OK) rc = free_block(pool, b) == SPECKV_EBADHANDLE ? SPECKV_OK : SPECKV_EINTERNAL;
    if (rc != SPECKV_OK) {
        fprintf(stderr, "dlopen_version: %s: %s\n", str_error(rc), errmsg());
        pool_close(pool);
        return 1;
    }
    printf("allocated and freed block 0x%llx; a double free is refused\n", (unsigned long long)b);
    rc = pool_close(pool);
    /* No dlclose: a library with background threads may still be running. */
    return rc == SPECKV_OK ? 0 : 1;
}
