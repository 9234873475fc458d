// SPDX-License-Identifier: Apache-2.0
/*
 * speckv.h — the public C interface of speckv, a KV-cache store for LLM serving
 * engines that keeps KV pages in a large (CXL-attached) memory pool.
 *
 * This is the ONLY public header. Nothing else under include/, lib/ or cli/ is
 * part of the interface, and no symbol other than the speckv_* functions below
 * is exported from libspeckv.so.
 *
 * Conventions (see docs/speckv.3.md, `man 3 speckv`, for the long form):
 *   - Every function that can fail returns an int status: SPECKV_OK (0) or a
 *     negative SPECKV_E* code. Results come back through out-pointers.
 *     Codes are only ever added, never renumbered.
 *   - speckv_strerror(code) gives static text; speckv_errmsg() gives the detail
 *     of the most recent failure on the calling thread.
 *   - No function throws, aborts or exits on bad input.
 *   - Destroy/close functions accept NULL.
 *   - Structs that cross the boundary start with `size_t struct_size`, which the
 *     caller sets to sizeof(the struct) as it knows it; a size the library does
 *     not know is rejected with SPECKV_ESTRUCT. Structs only grow at the end,
 *     and the sizes of earlier releases stay accepted.
 *   - Compatibility: the SONAME is libspeckv.so.<SPECKV_VERSION_MAJOR>; within
 *     one major version releases only add functions, codes and struct fields.
 *     A dlopen user checks speckv_version_number() / 10000 == the major it was
 *     built for.
 *
 * Threading: a speckv_pool may be used from any number of threads at once.
 * A speckv_config must not be modified concurrently with its own use.
 * fork(): a child must open its own pool handles; it may close (or just drop)
 * the ones it inherited, which leaves the parent's attachment untouched, but
 * must not use them otherwise.
 */
#ifndef SPECKV_H
#define SPECKV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SPECKV_API
#elif defined(__GNUC__) || defined(__clang__)
#define SPECKV_API __attribute__((visibility("default")))
#else
#define SPECKV_API
#endif

/* ---------------------------------------------------------------- version */

/* The single source of truth of the release version: CMake reads these lines. */
#define SPECKV_VERSION_MAJOR 0
#define SPECKV_VERSION_MINOR 1
#define SPECKV_VERSION_PATCH 0
#define SPECKV_VERSION_NUMBER \
    (SPECKV_VERSION_MAJOR * 10000 + SPECKV_VERSION_MINOR * 100 + SPECKV_VERSION_PATCH)
#define SPECKV_VERSION_STRING "0.1.0"

/* The version of the library actually loaded, as SPECKV_VERSION_NUMBER.
 * Compare with the macro to detect a header/library mismatch (dlopen users).
 * Since 0.1.0. */
SPECKV_API uint32_t speckv_version_number(void);

/* The loaded library's version as static text, e.g. "0.1.0". Since 0.1.0. */
SPECKV_API const char *speckv_version_string(void);

/* ---------------------------------------------------------- status codes */

#define SPECKV_OK 0
#define SPECKV_EINVAL (-1)      /* an argument is invalid (NULL, out of bounds, bad enum) */
#define SPECKV_ENOMEM (-2)      /* host memory exhausted */
#define SPECKV_ENOSPC (-3)      /* the pool has no room (pages or block slots) */
#define SPECKV_ENOENT (-4)      /* no such pool, file, key or entry */
#define SPECKV_EEXIST (-5)      /* it already exists */
#define SPECKV_EBADHANDLE (-6)  /* handle was freed or never issued by this pool */
#define SPECKV_ECORRUPT (-7)    /* a checksum or invariant failed: data not returned */
#define SPECKV_EVERSION (-8)    /* pool format newer than this library understands */
#define SPECKV_EIO (-9)         /* an operating-system I/O call failed */
#define SPECKV_EPERM (-10)      /* permission denied */
#define SPECKV_EBUSY (-11)      /* resource in use (pinned block, page being written) */
#define SPECKV_ERANGE (-12)     /* offset/length outside the block */
#define SPECKV_ENOTPOOL (-13)   /* the file or device does not hold a speckv pool */
#define SPECKV_EURI (-14)       /* malformed URI or unknown scheme/parameter */
#define SPECKV_ENOTSUP (-15)    /* valid request this build or backend cannot do */
#define SPECKV_ESTRUCT (-16)    /* struct_size does not match a known layout */
#define SPECKV_EINTERNAL (-17)  /* a bug in speckv: please report it */
#define SPECKV_EQUOTA (-18)     /* the tenant's page quota would be exceeded */

/* Static English text for a status code; never NULL (unknown codes get
 * "unknown error"). Since 0.1.0. */
SPECKV_API const char *speckv_strerror(int code);

/* Detail of the most recent call on this thread that failed (for example
 * which page failed its checksum), like errno: successful calls leave it
 * unchanged, so read it right after the failing call. "" if no call on this
 * thread has failed yet. Never NULL; valid until the next failing call on
 * this thread. Since 0.1.0. */
SPECKV_API const char *speckv_errmsg(void);

/* ---------------------------------------------------------------- logging */

#define SPECKV_LOG_ERROR 0
#define SPECKV_LOG_WARN 1
#define SPECKV_LOG_INFO 2
#define SPECKV_LOG_DEBUG 3

/* A log sink. `msg` is NUL-terminated and valid only during the call. It may be
 * called from any thread the library runs, including background threads, so it
 * must be thread-safe. */
typedef void (*speckv_log_fn)(void *user, int level, const char *msg);

/* ----------------------------------------------------------------- config */

/* Settings used when opening a pool. Keys are the same as in the TOML file,
 * with a dot between table and key ("pool.size" is `[pool] size = ...`).
 * The full list with bounds and defaults is in README.md ("Configuration") and can be
 * queried with speckv_config_bounds(). Not thread-safe: one thread at a time. */
typedef struct speckv_config speckv_config;

/* Creates a config holding the defaults. *out is set on success.
 * Returns SPECKV_OK, SPECKV_EINVAL (out NULL), SPECKV_ENOMEM. Since 0.1.0. */
SPECKV_API int speckv_config_new(speckv_config **out);

/* Frees a config; NULL is accepted. A pool opened with it keeps its own copy.
 * Since 0.1.0. */
SPECKV_API void speckv_config_free(speckv_config *cfg);

/* Sets an integer key. Sizes are in bytes, booleans are 0/1.
 * Returns SPECKV_OK, SPECKV_EINVAL (NULL, value out of bounds, not an integer
 * key), SPECKV_ENOENT (unknown key). Since 0.1.0. */
SPECKV_API int speckv_config_set_int(speckv_config *cfg, const char *key, int64_t value);

/* Sets a string key. Integer keys also accept a string with a size suffix
 * ("8G", "4KiB"). Returns as speckv_config_set_int. Since 0.1.0. */
SPECKV_API int speckv_config_set_str(speckv_config *cfg, const char *key, const char *value);

/* Reads an integer key into *value. Returns SPECKV_OK, SPECKV_EINVAL,
 * SPECKV_ENOENT. Since 0.1.0. */
SPECKV_API int speckv_config_get_int(const speckv_config *cfg, const char *key, int64_t *value);

/* The inclusive bounds and default of an integer key (any out-pointer may be
 * NULL). Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_ENOENT. Since 0.1.0. */
SPECKV_API int speckv_config_bounds(const char *key, int64_t *min, int64_t *max, int64_t *dflt);

/* Applies every key of a TOML file. Unknown keys and bad values are errors
 * (nothing is applied then; the detail names the key and line).
 * Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_ENOENT (no file), SPECKV_EIO
 * (unreadable, or a directory). Since 0.1.0. */
SPECKV_API int speckv_config_load_toml(speckv_config *cfg, const char *path);

/* As speckv_config_load_toml, from `len` bytes of text in memory. Since 0.1.0. */
SPECKV_API int speckv_config_load_toml_string(speckv_config *cfg, const char *text, size_t len);

/* Routes the log of pools opened with this config to `fn` (NULL, the
 * default: silent, or stderr when the environment variable SPECKV_LOG is
 * "stderr" or "stderr:error|warn|info|debug", read at each message).
 * Messages above the level of key "log.level" are dropped.
 * The pool keeps `fn` and `user` (not the config): they must stay valid until
 * speckv_pool_close of every pool opened with them returns; after that it
 * never calls them. Returns SPECKV_OK, SPECKV_EINVAL (cfg NULL). Since 0.1.0. */
SPECKV_API int speckv_config_set_log(speckv_config *cfg, speckv_log_fn fn, void *user);

/* ------------------------------------------------------------------- pool */

/* An open pool. Thread-safe: any thread, concurrently. */
typedef struct speckv_pool speckv_pool;

/* A block handle. 0 is never a valid handle; handles are not reused while the
 * pool lives (a slot's generation counter changes on every reuse). A handle
 * belongs to the pool that issued it: a slot's first generation is drawn
 * from the pool's UUID, so another pool's handle is SPECKV_EBADHANDLE here
 * except by a 1-in-2^32 chance (docs/pool-format.md "Handles"). */
typedef uint64_t speckv_handle;
#define SPECKV_HANDLE_INVALID ((speckv_handle)0)

/* Opens (attaching or creating) a pool. URI grammar (README.md, "Pool URIs"):
 *   file:/path/to/pool[?size=8G&page_size=4096]  an mmap'd file, MAP_SHARED
 *   file:NAME[?size=...]       a named pool under $XDG_RUNTIME_DIR/speckv/ or
 *                              /dev/shm/ (the embedded default: "file:default")
 *   anon:?size=1G              private anonymous memory, gone at close
 *   dax:/dev/daxX.Y            device-dax (CXL Type-3) via libdaxctl, mapped whole,
 *                              formatted on first open
 *   numa:N?size=S[&policy=bind|preferred]  anonymous memory on NUMA node N
 *   numa:N?size=S&name=NAME  a shared tmpfs file bound to node N (other
 *                            processes and the CLI attach it by the same URI)
 * A missing file pool is created with the size from the URI or the config key
 * "pool.size" (unless "pool.create" is 0); an existing one is attached and its
 * geometry wins. Several processes may attach the same pool at once.
 * file: and numa: also take owner=, group= and mode= (docs/sharing.md
 * "Threat model"): new pool files are 0600 unless mode=/"pool.mode" widens
 * them; a pool file (or L4 file) owned by neither the effective user nor
 * root, unless owner=/group= or "pool.owner"/"pool.group" names its owner
 * or group, a symbolic link, or a file in a world-writable directory
 * without the sticky bit is SPECKV_EPERM. A URI size= outside "pool.size"'s
 * bounds is SPECKV_EINVAL.
 * cfg may be NULL (defaults). *out is set only on success.
 * Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_EURI, SPECKV_ENOENT, SPECKV_ENOTPOOL,
 * SPECKV_EVERSION, SPECKV_ECORRUPT, SPECKV_EPERM, SPECKV_EIO, SPECKV_ENOMEM,
 * SPECKV_EBUSY, SPECKV_ENOSPC, SPECKV_ENOTSUP. Since 0.1.0. */
SPECKV_API int speckv_pool_open(const char *uri, const speckv_config *cfg, speckv_pool **out);

/* Detaches from the pool and frees the handle; NULL is accepted. Blocks stay in
 * a file pool. Pointers from speckv_pin become invalid. The one exception to
 * "any thread, concurrently": no other call on this pool may be running or
 * start once close has begun (the caller orders that, as with free()).
 * Returns SPECKV_OK or SPECKV_EIO. Since 0.1.0. */
SPECKV_API int speckv_pool_close(speckv_pool *pool);

/* Element types of a block. OPAQUE bytes are stored as given. */
#define SPECKV_DTYPE_OPAQUE 0
#define SPECKV_DTYPE_FP16 1
#define SPECKV_DTYPE_BF16 2
#define SPECKV_DTYPE_FP32 3

#define SPECKV_HINT_HAS_HASH 0x1u /* content_hash is set */
/* The block holds keys / values: picks config codec.key_mode or
 * codec.value_mode instead of codec.mode for its pages (docs/codec.md §17). */
#define SPECKV_HINT_KEYS 0x2u
#define SPECKV_HINT_VALUES 0x4u
/* speckv_prefetch only: token_count is the hinted unit's read span: its
 * reader reads from the pool only the blocks that start before token
 * token_count (it holds the newer ones in faster memory; 0: none), so the
 * prefetcher fetches only those (docs/tiers.md "Read spans"). Without it,
 * speckv_prefetch ignores token_count. speckv_alloc ignores it. */
#define SPECKV_HINT_SPAN 0x8u

/* Bytes of a block content hash (speckv_block_hash, speckv_publish). */
#define SPECKV_HASH_BYTES 32

/* What a block holds, for placement, prefetch and prefix sharing. Set
 * struct_size = sizeof(speckv_hint). Unused fields should be zero.
 * One struct, two uses, on purpose: speckv_alloc reads it as the block's
 * coordinates (every field); speckv_prefetch reads it as the reader's position
 * (tenant, request, layer, token_pos; with SPECKV_HINT_SPAN also
 * token_count; the other fields are ignored). The
 * prefetcher finds blocks by matching the second against the first, so the
 * two share their fields and cannot drift apart. */
typedef struct speckv_hint {
    size_t struct_size;
    uint64_t tenant;       /* tenant id; scopes sharing */
    uint64_t request;      /* request (sequence) id */
    uint32_t layer;        /* transformer layer */
    uint32_t flags;        /* SPECKV_HINT_* */
    uint64_t token_pos;    /* first token position covered */
    uint64_t token_count;  /* number of tokens covered */
    uint8_t content_hash[SPECKV_HASH_BYTES]; /* prefix-block hash when SPECKV_HINT_HAS_HASH */
} speckv_hint;

/* Allocates a block of `bytes` bytes (> 0) of element type `dtype`. `hint`
 * may be NULL. The block's bytes read as zero until written.
 * Returns SPECKV_OK, SPECKV_EINVAL (bytes 0, bad dtype, NULL pool/out, a
 * hint whose token_pos + token_count passes 2^64),
 * SPECKV_ESTRUCT (hint->struct_size), SPECKV_ENOSPC (no contiguous room or no
 * block slot, or more bytes than the pool has pages for: any size up to
 * UINT64_MAX), SPECKV_EBUSY. Since 0.1.0. */
SPECKV_API int speckv_alloc(speckv_pool *pool, uint64_t bytes, int dtype,
                            const speckv_hint *hint, speckv_handle *out);

/* Frees a block. For a published block it releases one reference this
 * process holds (from speckv_publish or speckv_lookup); the block stays
 * published, and evictable once nobody holds one (see "sharing" below).
 * Returns SPECKV_OK, SPECKV_EBADHANDLE (already freed or never issued: a
 * double free is reported, never acted on; or a published block this process
 * holds no reference to), SPECKV_EBUSY (pinned by this process, or an
 * unpublished block pinned by another: speckv_errmsg() names it). Since 0.1.0. */
SPECKV_API int speckv_free(speckv_pool *pool, speckv_handle handle);

/* What a block is: its size, element type and the hint it was allocated
 * with. Set struct_size = sizeof(speckv_block_meta). */
typedef struct speckv_block_meta {
    size_t struct_size;
    uint64_t bytes;        /* the block's size as allocated */
    int32_t dtype;         /* SPECKV_DTYPE_* */
    uint32_t flags;        /* the hint's SPECKV_HINT_* flags */
    uint64_t tenant;
    uint64_t request;
    uint32_t layer;
    uint32_t reserved;     /* zero */
    uint64_t token_pos;
    uint64_t token_count;
    uint8_t content_hash[SPECKV_HASH_BYTES]; /* the hint's, or the published hash */
} speckv_block_meta;

/* Describes a live block (any process's) without reading or verifying its
 * data. Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_ESTRUCT, SPECKV_EBADHANDLE.
 * Since 0.1.0. */
SPECKV_API int speckv_block_info(speckv_pool *pool, speckv_handle handle, speckv_block_meta *out);

/* Copies `len` bytes from `src` into the block at `offset`. Each page's
 * checksum is updated with its data. Concurrent writes to the same bytes race
 * (last writer wins per page); readers never see a page whose checksum does
 * not match. Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_EBADHANDLE, SPECKV_ERANGE
 * (offset+len past the block), SPECKV_EBUSY (pinned, or a page stuck in a write
 * by a dead process: run `speckv pool check`); for a packed block (config
 * codec.pack: its coded pages share fewer pool pages, which a write first
 * gives back) also SPECKV_ENOSPC / SPECKV_EQUOTA when there is no room for
 * its pages and SPECKV_ECORRUPT for a damaged image; the block then stays
 * packed and readable. Since 0.1.0. */
SPECKV_API int speckv_write(speckv_pool *pool, speckv_handle handle, uint64_t offset,
                            const void *src, size_t len);

/* Access flags (none defined yet; pass 0). */
#define SPECKV_ACCESS_DEFAULT 0u

/* Reads `len` bytes of the block at `offset` into `dst`, verifying each page's
 * CRC32C first (and decoding once the block is compressed). A page that fails
 * its checksum is quarantined and SPECKV_ECORRUPT is returned with the page
 * number in speckv_errmsg(); no byte of it is copied as if valid.
 * A block in the L4 cold tier is brought back first; in a process that does
 * not hold the tier, by asking the holder (config cold.wait_ms bounds the
 * wait; docs/tiers.md §9.1).
 * Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_EBADHANDLE, SPECKV_ERANGE,
 * SPECKV_ECORRUPT, SPECKV_EBUSY (also: in L4 and not brought back in time, or
 * no process holds the tier). Since 0.1.0. */
SPECKV_API int speckv_access(speckv_pool *pool, speckv_handle handle, uint64_t offset,
                             void *dst, size_t len, uint32_t flags);

/* Zero-copy read: verifies the whole block (a page this process already
 * verified at its current version, held in its L1 cache or checksummed at an
 * earlier pin, is not checksummed again; with "cache.bytes" = 0 every pin
 * checks) and returns a read-only pointer to its bytes and their count. A
 * pinned block is referenced while pinned: no process frees, evicts, demotes
 * to L4 or packs it under the pointer, and this process cannot write it,
 * until every pin is released with speckv_unpin. Writes by other processes
 * while pinned are not prevented in 0.1. A packed block is unpacked first.
 * Returns as speckv_access, and as speckv_write for a packed block. Since 0.1.0. */
SPECKV_API int speckv_pin(speckv_pool *pool, speckv_handle handle, const void **ptr, size_t *len);

/* Releases one pin. Returns SPECKV_OK, SPECKV_EBADHANDLE, SPECKV_EINVAL (not
 * pinned). Since 0.1.0. */
SPECKV_API int speckv_unpin(speckv_pool *pool, speckv_handle handle);

/* Moves a block to the L4 cold tier now (docs/tiers.md §9): its bytes go to
 * the L4 file and its pages in the pool are freed; the handle stays valid and
 * the next access, pin or prefetch brings the block back, in any process
 * (one without the tier asks the holder). Only the process
 * holding the pool's L4 tier (opened with config cold.path) can do this; it
 * also demotes the coldest blocks by itself when an allocation finds no room.
 * Returns SPECKV_OK (also when the block is in L4 already), SPECKV_EBADHANDLE,
 * SPECKV_ENOTSUP (this handle does not hold the L4 tier), SPECKV_EBUSY
 * (pinned, referenced by another process, or written meanwhile),
 * SPECKV_ENOSPC (the L4 file is full), SPECKV_EIO (an L4 write failed; the
 * block stays in the pool, whole). Since 0.1.0. */
SPECKV_API int speckv_demote(speckv_pool *pool, speckv_handle handle);

/* A prefetch hint: `hint->request` (of `hint->tenant`) is about to run
 * `hint->layer` at `hint->token_pos`. Returns at once: a background thread of
 * this pool handle (started by the first hint) learns from the hints and the
 * accesses which blocks come next (layer-ahead, the order requests run in a
 * continuous batch), chooses how far ahead to fetch (UCB over the observed
 * payoff) and how aggressively (feedback from the L3->L2 link utilisation),
 * and reads and verifies those blocks' pages into the prefetch buffer (L2),
 * from where speckv_access then serves them. Blocks are found by their alloc
 * hint (tenant, request, layer, token range): see speckv_translate. A hint
 * for an unknown request or a freed block is ignored and counted; a full hint
 * queue drops the hint and counts it. Of each unit (request, layer) only
 * what its reader reads from the pool is fetched: a hint flagged
 * SPECKV_HINT_SPAN says how much of the hinted unit that is (an engine that
 * keeps the newest tokens in HBM); for other units, the span the reader
 * read last time is used (docs/tiers.md "Read spans"). Reads never depend on a prefetch: a
 * page that is not in L1 or L2 is read synchronously. docs/tiers.md.
 * Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_ESTRUCT. Since 0.1.0. */
SPECKV_API int speckv_prefetch(speckv_pool *pool, const speckv_hint *hint);

/* Address translation: the block that holds token `token_pos` of (tenant,
 * request, layer), among live blocks allocated with a hint whose
 * [token_pos, token_pos + token_count) covers it, and the token's index inside
 * that block (*token_offset may be NULL). A small per-process TLB sits in
 * front of the pool's translation index (stats tlb_hits/tlb_misses).
 * Returns SPECKV_OK, SPECKV_ENOENT (no such block), SPECKV_EINVAL. Since 0.1.0. */
SPECKV_API int speckv_translate(speckv_pool *pool, uint64_t tenant, uint64_t request, uint32_t layer,
                                uint64_t token_pos, speckv_handle *out, uint64_t *token_offset);

/* ---------------------------------------------------------------- sharing */
/* Content-addressed blocks, shared by every process attached to a pool
 * (docs/sharing.md). A writer fills a block, then publishes it under the hash
 * of what it holds; any process of the same tenant can then find it with
 * speckv_lookup instead of computing and storing the same KV again.
 *
 * References. Publish and a successful lookup each give the calling process a
 * reference to the block; speckv_free releases one. While any process holds a
 * reference the block is never evicted. With none left it stays published and
 * findable, and becomes evictable: when an alloc finds no room, unreferenced
 * published blocks are evicted, least recently used first, instead of the
 * alloc failing. A process that exits or dies has its references dropped.
 *
 * Unpublished blocks belong to the process that allocated them. If that
 * process dies (SIGKILL, crash) they are reclaimed: nothing says their
 * contents were complete. A clean speckv_pool_close leaves them in the pool.
 *
 * A published block is immutable: speckv_write on it fails with SPECKV_EPERM.
 * Publish is the commit point: a lookup never returns a block before its
 * publish completed, so readers never see a partial write. */

/* Hash algorithms of speckv_block_hash (docs/sharing.md gives the exact bytes). */
#define SPECKV_HASH_NATIVE 0    /* SHA-256 of speckv's binary encoding, tenant-salted */
#define SPECKV_HASH_VLLM_CBOR 1 /* SHA-256 of canonical CBOR [parent, [tokens...], extra],
                                   as vLLM's sha256_cbor prefix-cache hash */

/* The chained hash of one prefix block: out = H(parent, tokens, extra). The
 * same inputs give the same 32 bytes in every process, binding and machine:
 * no seed, no per-process state. `parent` is the previous block's hash
 * (SPECKV_HASH_BYTES bytes) or NULL for the first block. `extra` holds what
 * else decides the KV (model id, LoRA id, ...): raw bytes for
 * SPECKV_HASH_NATIVE; one complete CBOR data item for SPECKV_HASH_VLLM_CBOR
 * (NULL = CBOR null). `tenant` salts SPECKV_HASH_NATIVE only (vLLM puts its
 * cache salt in `extra`). Returns SPECKV_OK, SPECKV_EINVAL (unknown algo, out
 * NULL, tokens NULL with ntokens > 0, malformed CBOR extra), SPECKV_ENOMEM,
 * SPECKV_EINTERNAL (libcrypto provides no SHA-256: its reason in
 * speckv_errmsg). Since 0.1.0. */
SPECKV_API int speckv_block_hash(int algo, uint64_t tenant, const uint8_t *parent, const uint32_t *tokens,
                                 size_t ntokens, const void *extra, size_t extra_len,
                                 uint8_t out[SPECKV_HASH_BYTES]);

/* Publishes a written block under `hash` for its tenant (the tenant of its
 * alloc hint). On success the caller holds a reference and *canonical (may be
 * NULL) is `handle`. If the tenant already has a block published under this
 * hash, returns SPECKV_EEXIST, leaves `handle` unpublished (free it) and, when
 * canonical is not NULL, sets *canonical to the published block and gives the
 * caller a reference to it (so it cannot be evicted before it is used).
 * Returns SPECKV_OK, SPECKV_EEXIST, SPECKV_EINVAL (NULL hash), SPECKV_EBADHANDLE,
 * SPECKV_EPERM (already published, or another tenant's block), SPECKV_EBUSY.
 * Since 0.1.0. */
SPECKV_API int speckv_publish(speckv_pool *pool, speckv_handle handle, const uint8_t hash[SPECKV_HASH_BYTES],
                              speckv_handle *canonical);

/* Finds the block `tenant` published under `hash` and takes a reference to it
 * (release it with speckv_free). A pool opened with "tenant.id" set may only
 * look up its own tenant. Returns SPECKV_OK, SPECKV_ENOENT (no such block for
 * this tenant: other tenants' blocks are never found), SPECKV_EINVAL,
 * SPECKV_EPERM (tenant differs from "tenant.id"). Since 0.1.0. */
SPECKV_API int speckv_lookup(speckv_pool *pool, uint64_t tenant, const uint8_t hash[SPECKV_HASH_BYTES],
                             speckv_handle *out);

/* Caps the pages `tenant`'s blocks may occupy (0 removes the cap). Stored in
 * the pool: it holds for every process. An alloc over the cap fails with
 * SPECKV_EQUOTA after evicting what it may of that tenant's unreferenced
 * blocks. Lowering a cap below the current use is allowed (new allocs fail).
 * Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_EPERM (pool bound to a tenant by
 * "tenant.id", or read-only), SPECKV_ENOSPC (tenant table full), SPECKV_EBUSY.
 * Since 0.1.0. */
SPECKV_API int speckv_tenant_set_quota(speckv_pool *pool, uint64_t tenant, uint64_t max_pages);

/* Pages `tenant`'s blocks occupy now and its cap (0 = none); either pointer
 * may be NULL. Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_EBUSY. Since 0.1.0. */
SPECKV_API int speckv_tenant_usage(speckv_pool *pool, uint64_t tenant, uint64_t *pages_used, uint64_t *max_pages);

/* ------------------------------------------------------------------ stats */

/* Counters. Set struct_size = sizeof(speckv_pool_stats). Pool-wide fields (pages,
 * blocks) come from the shared pool; the others count this process only.
 * This struct is complete as of 0.1.0 and does not grow: later counters are
 * read by name (speckv_stat) or from speckv_stats_json, so adding one never
 * changes the ABI. */
typedef struct speckv_pool_stats {
    size_t struct_size;
    uint64_t pool_bytes;       /* size of the mapping */
    uint64_t page_size;
    uint64_t pages_total;      /* data pages */
    uint64_t pages_used;
    uint64_t blocks_live;
    uint64_t blocks_max;
    uint64_t allocs;           /* this process: successful allocs */
    uint64_t frees;
    uint64_t bytes_written;
    uint64_t bytes_read;
    uint64_t reads;            /* speckv_access calls that succeeded */
    uint64_t cache_hits;       /* pages served from the verified-page cache */
    uint64_t cache_misses;     /* pages read and checksummed from the pool */
    uint64_t checksum_failures;
    uint64_t prefetch_hints;
    uint64_t attached;         /* processes attached to the pool now */
    /* Sharing (pool-wide, all processes). */
    uint64_t blocks_published; /* published blocks in the pool now */
    uint64_t shared_bytes;     /* bytes of those blocks */
    uint64_t lookups;          /* speckv_lookup calls, ever */
    uint64_t lookup_hits;      /* ... that found a block */
    uint64_t dedup_bytes;      /* bytes not stored again thanks to sharing:
                                  block bytes of every lookup hit and publish collision */
    uint64_t evictions;        /* unreferenced published blocks evicted for room */
    uint64_t reclaimed_blocks; /* blocks of dead processes reclaimed */
    /* Tiers and prefetch (this process). docs/design.md §6: hit rate = l2_hits /
     * (l2_hits + sync_reads); precision = prefetch_used / (prefetch_used +
     * prefetch_wasted); waste = prefetch_wasted_bytes. cache_hits are L1 hits. */
    uint64_t l2_hits;          /* pages served from the prefetch buffer (L2) */
    uint64_t sync_reads;       /* pages read synchronously from the pool (in neither L1 nor L2) */
    uint64_t prefetch_pages;   /* pages the prefetcher brought into L2 */
    uint64_t prefetch_used;    /* prefetched pages read before they left L2 */
    uint64_t prefetch_wasted;  /* prefetched pages that left L2 unread */
    uint64_t prefetch_wasted_bytes;
    uint64_t prefetch_ignored; /* hints naming no known block (unknown request, freed block) */
    uint64_t prefetch_dropped; /* hints dropped: the hint queue was full */
    uint64_t link_bytes;       /* bytes moved L3 -> L2 by the prefetcher (record bytes for coded pages) */
    uint64_t tlb_hits;
    uint64_t tlb_misses;
    uint32_t prefetch_beta_ppm; /* aggressiveness beta, parts per million (1000000 = full) */
    uint32_t prefetch_depth;    /* depth k (units ahead) of the last plan */
    /* Codec (this process; docs/codec.md §17). A page is encoded when a
     * write completes it and the block's mode is not raw. */
    uint64_t codec_pages_encoded;  /* pages stored as codec records */
    uint64_t codec_raw_bytes;      /* their bytes in clear */
    uint64_t codec_stored_bytes;   /* their record bytes (what L3 holds and the link carries) */
    uint64_t codec_pages_bypassed; /* pages the codec left in clear (NaN/Inf, no gain, record > page) */
    uint64_t codec_pages_decoded;  /* coded pages decoded on a read, prefetch or pin */
    /* L4 cold tier (the whole pool; docs/tiers.md §9). Since 0.1.0. */
    uint64_t l4_blocks;            /* blocks in L4 now (pages free in the pool, bytes in the L4 file) */
    uint64_t l4_bytes;             /* their bytes */
    uint64_t l4_demotions;         /* blocks moved L3 -> L4, ever, by any process */
    uint64_t l4_promotions;        /* blocks moved back L4 -> L3, ever */
    uint64_t l4_demote_failures;   /* demotions that failed (the block stayed in the pool, whole) */
} speckv_pool_stats;

/* Fills *out (up to out->struct_size). Returns SPECKV_OK, SPECKV_EINVAL,
 * SPECKV_ESTRUCT. Since 0.1.0. */
SPECKV_API int speckv_stats(speckv_pool *pool, speckv_pool_stats *out);

/* Writes the stats as one JSON object into buf (NUL-terminated, at most cap
 * bytes) and the full length without the NUL into *needed (may be NULL).
 * Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_ERANGE (cap too small: call again
 * with *needed + 1). While other threads use the pool (the prefetch thread
 * among them) the text can grow between two calls: allocate some headroom
 * and call again on SPECKV_ERANGE. Since 0.1.0. */
SPECKV_API int speckv_stats_json(speckv_pool *pool, char *buf, size_t cap, size_t *needed);

/* One counter by name: *value = the integer that speckv_stats_json's object
 * holds under the top-level key `name` (e.g. "l4_demotions",
 * "lookup_hits"). This is how counters added after 0.1.0 are read:
 * speckv_pool_stats does not grow any more, new counters appear only in the
 * JSON and here. Returns SPECKV_OK, SPECKV_EINVAL (NULL argument, or `name`
 * holds no non-negative integer, e.g. a ratio or an object), SPECKV_ENOENT
 * (no such counter in this library). Since 0.1.0. */
SPECKV_API int speckv_stat(speckv_pool *pool, const char *name, uint64_t *value);

/* ================================================== experimental interface
 * Everything above is the stable core: within a major version it only grows.
 * What follows may still change before 1.0 (names, structs, semantics), so it
 * is declared only when the includer asks for it by defining
 * SPECKV_EXPERIMENTAL before including this header (as zstd keeps its
 * unstable API behind ZSTD_STATIC_LINKING_ONLY). The functions are exported
 * either way; code built without the macro uses the stable core only. */
#ifdef SPECKV_EXPERIMENTAL

/* ---- Near-memory page selection (docs/selection.md; the PNM-KV / PnG-KV
 * design). For contexts far larger than the GPU holds: the pool scores the
 * K pages of (tenant, request, layer) against the query next to the memory
 * and returns only the few that matter (speckv_select); the rest can be
 * attended next to the pool too (speckv_attend) and merged exactly with the
 * GPU's part (speckv_merge_partials).
 *
 * Pages: the K blocks of (tenant, request, layer) are the live blocks
 * allocated with SPECKV_HINT_KEYS and that (tenant, request, layer), ordered
 * by token_pos; each holds rows of kv_heads * head_dim FP16 or FP32 keys, and
 * a data page holds whole rows. A K page written to its end gets a summary
 * (per-channel min and max, docs/selection.md §1) in the pool's summary
 * area, kept with the page like its checksum: pools are created with
 * config pool.summary_bytes >= 16 + 4 * kv_heads * head_dim, and the writer
 * sets select.channels = kv_heads * head_dim. The V rows of the same tokens
 * are in blocks hinted SPECKV_HINT_VALUES with the same row layout. */
typedef struct speckv_select_params {
    size_t struct_size;
    uint32_t kv_heads;      /* KV heads in a row */
    uint32_t head_dim;
    uint32_t q_per_kv;      /* query heads per KV head (GQA group size), >= 1 */
    uint32_t budget;        /* pages to select, >= 1 (forced pages included) */
    uint32_t recent;        /* the most recent pages always selected; UINT32_MAX = config select.recent */
    float band;             /* steady selection: a page selected last step stays while its score is
                               >= the cut - band (logit units); < 0 = config select.band_milli */
    float scale;            /* logit scale; 0 = 1/sqrt(head_dim) */
    uint64_t context_tokens;/* tokens [0, context_tokens) exist; later rows are ignored */
    /* Since 0.1.0, appended (a struct_size without it is accepted and means 0):
     * a budget in tokens instead of pages. When > 0 it replaces `budget`: the
     * fewest pages whose tokens add up to at least budget_tokens, with a page
     * counted as the tokens a full page holds (page_size / row bytes). */
    uint64_t budget_tokens;
} speckv_select_params;

/* One K page: where it is, which tokens, and its score (an upper bound of
 * the largest logit any query head of any group gets on its keys; +inf for a
 * page without a summary yet, e.g. the one being appended: always kept). */
typedef struct speckv_page_ref {
    speckv_handle block;
    uint64_t offset;        /* byte offset of the page in the block */
    uint64_t token_pos;     /* first token of the page */
    uint32_t tokens;        /* tokens of the page below context_tokens */
    float score;
} speckv_page_ref;

/* Selects params->budget pages of (tenant, request, layer) for query `q`
 * (q_heads * head_dim floats, head-major; q_len = their count): the `recent`
 * last pages, pages kept by the steady rule from this handle's previous call
 * for the same (tenant, request, layer), then the best upper bounds (ties:
 * the earlier page). O(pages) work next to the pool; deterministic. Writes
 * the selection in token order to out[0..*n_out) (cap >= budget, or all pages
 * when there are fewer); *n_pages (may be NULL) = the K pages there are.
 * Returns SPECKV_OK, SPECKV_EINVAL (NULL, q_len, geometry, budget 0, q not
 * finite), SPECKV_ESTRUCT, SPECKV_ENOENT (no K page), SPECKV_ERANGE (cap),
 * SPECKV_ENOTSUP (pool without summary area; dtype not FP16/FP32; rows that
 * straddle pages), SPECKV_ECORRUPT (a summary fails its checksum: the page is
 * named). The arguments are checked first: bad ones are SPECKV_EINVAL or
 * SPECKV_ESTRUCT even on a pool without a summary area. Since 0.1.0. */
SPECKV_API int speckv_select(speckv_pool *pool, uint64_t tenant, uint64_t request, uint32_t layer,
                             const float *q, size_t q_len, const speckv_select_params *params,
                             speckv_page_ref *out, size_t cap, size_t *n_out, size_t *n_pages);

/* A partial attention result per query head, mergeable exactly (the
 * flash-decoding merge): out[h * head_dim ...] = softmax-weighted mean of V
 * over the pages it covers, max_score[h] = largest logit, sum_exp[h] =
 * sum of exp(logit - max_score[h]). Empty: out 0, max -inf, sum 0. */
typedef struct speckv_partial {
    size_t struct_size;
    float *out;             /* q_heads * head_dim */
    float *max_score;       /* q_heads */
    float *sum_exp;         /* q_heads */
} speckv_partial;

/* Attention of `q` over the K/V pages of (tenant, request, layer) that are
 * NOT in exclude[0..n_exclude) (matched by block and offset; typically what
 * speckv_select returned and the GPU attends itself), computed next to the
 * pool: pages are read (and decoded) there, only the partial comes back.
 * Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_ESTRUCT, SPECKV_ENOENT (no K page,
 * or a K page without the V rows of its tokens), SPECKV_ENOTSUP, SPECKV_ECORRUPT.
 * Since 0.1.0. */
SPECKV_API int speckv_attend(speckv_pool *pool, uint64_t tenant, uint64_t request, uint32_t layer,
                             const float *q, size_t q_len, const speckv_select_params *params,
                             const speckv_page_ref *exclude, size_t n_exclude, speckv_partial *out);

/* out = the exact merge of partials a and b over disjoint page sets (out may
 * alias a or b): M = max(m_a, m_b), w_i = sum_i exp(m_i - M), o = (w_a o_a +
 * w_b o_b) / (w_a + w_b). Returns SPECKV_OK, SPECKV_EINVAL, SPECKV_ESTRUCT.
 * Since 0.1.0. */
SPECKV_API int speckv_merge_partials(uint32_t q_heads, uint32_t head_dim, const speckv_partial *a,
                                     const speckv_partial *b, speckv_partial *out);

#endif /* SPECKV_EXPERIMENTAL */

#ifdef __cplusplus
}
#endif

#endif /* SPECKV_H */
