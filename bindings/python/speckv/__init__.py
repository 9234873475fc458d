# SPDX-License-Identifier: Apache-2.0
"""speckv for Python: a small ctypes binding for scripts and notebooks.

    import speckv
    with speckv.Pool("anon:?size=8M") as pool:
        h = pool.alloc(4096, speckv.FP16, speckv.Hint(request=1, layer=0))
        pool.write(h, 0, b"hello")
        buf = bytearray(5)
        pool.access(h, 0, buf)          # or pool.read(h, 0, 5) -> bytes
        print(pool.stats())             # a dict
        pool.free(h)

Prefix sharing: h0 = speckv.block_hash(tokens[:16]); h1 = speckv.block_hash(
tokens[16:32], parent=h0); pool.publish(handle, h1); pool.lookup(tenant, h1).

Address translation: pool.translate(tenant, request, layer, token_pos) ->
(handle, offset) of the block whose alloc hint covers the token, or None.

Near-memory page selection (docs/selection.md): sp = speckv.SelectParams(
kv_heads=8, head_dim=128, q_per_kv=4, budget=64, context_tokens=n);
pages = pool.select(tenant, request, layer, q, sp) -> [PageRef, ...];
near = pool.attend(tenant, request, layer, q, sp, exclude=pages) -> Partial;
near.merge(gpu_partial) -> Partial (speckv.merge_partials).

L4 cold tier (docs/tiers.md section 9): open the pool with config
cfg.set("cold.path", "/nvme/engine.l4"); pool.demote(h) moves a block to that
file now, its next access brings it back (stats l4_blocks, l4_demotions, ...).

The library is loaded at run time from $SPECKV_LIB, else the soname
libspeckv.so.0, else ctypes.util.find_library("speckv"); one of another major version is refused (VersionError, code
SPECKV_EVERSION) with a message naming both versions. Every failure raises a
SpeckvError subclass carrying .code (the negative SPECKV_E* status) and
.message (the library's detail). A Pool may be used from several threads.
"""

import array
import collections
import contextlib
import ctypes
import ctypes.util
import json
import math
import operator
import os
import threading

__all__ = [
    "Pool", "Config", "Hint", "SpeckvError", "load", "check_version", "version_text",
    "library_version", "replay", "OPAQUE", "FP16", "BF16", "FP32",
    "BINDING_VERSION_NUMBER", "DEFAULT_LIBRARY", "block_hash", "HASH_BYTES", "HASH_NATIVE",
    "HASH_VLLM_CBOR", "Published", "TenantUsage", "HINT_HAS_HASH", "HINT_KEYS", "HINT_VALUES", "HINT_SPAN",
    "SelectParams", "PageRef", "Partial", "Selection", "merge_partials",
    "LOG_ERROR", "LOG_WARN", "LOG_INFO", "LOG_DEBUG",
]

# The version of speckv.h this binding was written against.
BINDING_VERSION_NUMBER = 100  # 0.1.0
DEFAULT_LIBRARY = "libspeckv.so.0"

OPAQUE, FP16, BF16, FP32 = 0, 1, 2, 3
# Log levels (SPECKV_LOG_*), as Config.set_log's callback receives them.
LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3
# Hint flags (SPECKV_HINT_*). HINT_HAS_HASH is set by Hint from content_hash;
# HINT_KEYS / HINT_VALUES make the block's pages use config codec.key_mode /
# codec.value_mode instead of codec.mode (docs/codec.md section 17).
HINT_HAS_HASH = 0x1
HINT_KEYS = 0x2
HINT_VALUES = 0x4
# HINT_SPAN (prefetch hints): the hinted unit's reader reads from the pool only
# the blocks that start before token_count (docs/tiers.md "Read spans").
HINT_SPAN = 0x8
_HINT_HAS_HASH = HINT_HAS_HASH

# Block content hashes (speckv_block_hash, speckv_publish).
HASH_BYTES = 32
HASH_NATIVE = 0      # SHA-256 of speckv's binary encoding, salted with the tenant
HASH_VLLM_CBOR = 1   # SHA-256 of canonical CBOR [parent, [tokens...], extra], as vLLM's sha256_cbor


# ------------------------------------------------------------------ errors

class SpeckvError(Exception):
    """A failed speckv call: .code (SPECKV_E*, negative) and .message."""

    code = None
    name = "SPECKV_E?"

    def __init__(self, code, message, op=""):
        self.code = code
        self.message = message
        self.op = op
        super().__init__("%s%s (%d): %s" % (op + ": " if op else "", _NAMES.get(code, "SPECKV_E?"), code, message))

    def __str__(self):
        # Not KeyError's quoted repr for BadHandleError.
        return self.args[0] if self.args else ""


def _err(name, code, *bases):
    cls = type(name, (SpeckvError,) + bases, {"code": code, "name": "SPECKV_E" + name[:-5].upper()})
    return cls


InvalidError = _err("InvalidError", -1, ValueError)
NoMemError = _err("NoMemError", -2, MemoryError)
NoSpaceError = _err("NoSpaceError", -3)
NotFoundError = _err("NotFoundError", -4, LookupError)
ExistError = _err("ExistError", -5)
BadHandleError = _err("BadHandleError", -6, KeyError)
CorruptError = _err("CorruptError", -7)
VersionError = _err("VersionError", -8)
IOError_ = _err("IOError_", -9, OSError)
PermError = _err("PermError", -10, PermissionError)
BusyError = _err("BusyError", -11)
RangeError = _err("RangeError", -12, IndexError)
NotPoolError = _err("NotPoolError", -13)
URIError = _err("URIError", -14, ValueError)
NotSupportedError = _err("NotSupportedError", -15, NotImplementedError)
StructError = _err("StructError", -16)
InternalError = _err("InternalError", -17)
QuotaError = _err("QuotaError", -18)

_NAMES = {
    -1: "SPECKV_EINVAL", -2: "SPECKV_ENOMEM", -3: "SPECKV_ENOSPC", -4: "SPECKV_ENOENT",
    -5: "SPECKV_EEXIST", -6: "SPECKV_EBADHANDLE", -7: "SPECKV_ECORRUPT", -8: "SPECKV_EVERSION",
    -9: "SPECKV_EIO", -10: "SPECKV_EPERM", -11: "SPECKV_EBUSY", -12: "SPECKV_ERANGE",
    -13: "SPECKV_ENOTPOOL", -14: "SPECKV_EURI", -15: "SPECKV_ENOTSUP", -16: "SPECKV_ESTRUCT",
    -17: "SPECKV_EINTERNAL", -18: "SPECKV_EQUOTA",
}
_CLASSES = {c.code: c for c in (
    InvalidError, NoMemError, NoSpaceError, NotFoundError, ExistError, BadHandleError,
    CorruptError, VersionError, IOError_, PermError, BusyError, RangeError, NotPoolError,
    URIError, NotSupportedError, StructError, InternalError, QuotaError)}
for _c in _CLASSES.values():
    _c.name = _NAMES[_c.code]
    __all__.append(_c.__name__)
# A nicer public name for the EIO class (IOError is a builtin alias of OSError).
SpeckvIOError = IOError_
__all__.append("SpeckvIOError")


def error_for(code, message, op=""):
    """The SpeckvError subclass instance for a status code."""
    cls = _CLASSES.get(code, SpeckvError)
    return cls(code, message, op)


# ------------------------------------------------------------------ the C ABI

class _Hint(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("tenant", ctypes.c_uint64), ("request", ctypes.c_uint64),
        ("layer", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("token_pos", ctypes.c_uint64),
        ("token_count", ctypes.c_uint64), ("content_hash", ctypes.c_uint8 * HASH_BYTES),
    ]


_STATS_FIELDS = (
    "pool_bytes", "page_size", "pages_total", "pages_used", "blocks_live", "blocks_max", "allocs",
    "frees", "bytes_written", "bytes_read", "reads", "cache_hits", "cache_misses",
    "checksum_failures", "prefetch_hints", "attached",
    # sharing, pool-wide
    "blocks_published", "shared_bytes", "lookups", "lookup_hits", "dedup_bytes", "evictions",
    "reclaimed_blocks",
    # tiers and prefetch, this process
    "l2_hits", "sync_reads", "prefetch_pages", "prefetch_used", "prefetch_wasted",
    "prefetch_wasted_bytes", "prefetch_ignored", "prefetch_dropped", "link_bytes", "tlb_hits",
    "tlb_misses",
)
_STATS_FIELDS_U32 = ("prefetch_beta_ppm", "prefetch_depth")
# codec, this process (uint64_t, after the two uint32_t)
_STATS_FIELDS_CODEC = (
    "codec_pages_encoded", "codec_raw_bytes", "codec_stored_bytes", "codec_pages_bypassed",
    "codec_pages_decoded",
)
# L4 cold tier, the whole pool (uint64_t, the last fields; docs/tiers.md §9)
_STATS_FIELDS_L4 = (
    "l4_blocks", "l4_bytes", "l4_demotions", "l4_promotions", "l4_demote_failures",
)
_STATS_ALL = _STATS_FIELDS + _STATS_FIELDS_U32 + _STATS_FIELDS_CODEC + _STATS_FIELDS_L4


class _Stats(ctypes.Structure):
    _fields_ = ([("struct_size", ctypes.c_size_t)] + [(f, ctypes.c_uint64) for f in _STATS_FIELDS]
                + [(f, ctypes.c_uint32) for f in _STATS_FIELDS_U32]
                + [(f, ctypes.c_uint64) for f in _STATS_FIELDS_CODEC]
                + [(f, ctypes.c_uint64) for f in _STATS_FIELDS_L4])


class _BlockMeta(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("bytes", ctypes.c_uint64), ("dtype", ctypes.c_int32),
        ("flags", ctypes.c_uint32), ("tenant", ctypes.c_uint64), ("request", ctypes.c_uint64),
        ("layer", ctypes.c_uint32), ("reserved", ctypes.c_uint32), ("token_pos", ctypes.c_uint64),
        ("token_count", ctypes.c_uint64), ("content_hash", ctypes.c_uint8 * HASH_BYTES),
    ]


class _SelectParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("kv_heads", ctypes.c_uint32), ("head_dim", ctypes.c_uint32),
        ("q_per_kv", ctypes.c_uint32), ("budget", ctypes.c_uint32), ("recent", ctypes.c_uint32),
        ("band", ctypes.c_float), ("scale", ctypes.c_float), ("context_tokens", ctypes.c_uint64),
    ]


class _PageRef(ctypes.Structure):
    _fields_ = [
        ("block", ctypes.c_uint64), ("offset", ctypes.c_uint64), ("token_pos", ctypes.c_uint64),
        ("tokens", ctypes.c_uint32), ("score", ctypes.c_float),
    ]


class _Partial(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("out", ctypes.POINTER(ctypes.c_float)),
        ("max_score", ctypes.POINTER(ctypes.c_float)), ("sum_exp", ctypes.POINTER(ctypes.c_float)),
    ]


_P = ctypes.c_void_p
_I = ctypes.c_int
_U64 = ctypes.c_uint64
_SZ = ctypes.c_size_t
_S = ctypes.c_char_p
# speckv_log_fn: void (*)(void *user, int level, const char *msg).
_LOG_FN = ctypes.CFUNCTYPE(None, _P, _I, _S)
_SIGS = {
    "speckv_version_number": (ctypes.c_uint32, []),
    "speckv_version_string": (_S, []),
    "speckv_strerror": (_S, [_I]),
    "speckv_errmsg": (_S, []),
    "speckv_config_new": (_I, [ctypes.POINTER(_P)]),
    "speckv_config_free": (None, [_P]),
    "speckv_config_set_int": (_I, [_P, _S, ctypes.c_int64]),
    "speckv_config_set_str": (_I, [_P, _S, _S]),
    "speckv_config_get_int": (_I, [_P, _S, ctypes.POINTER(ctypes.c_int64)]),
    "speckv_config_bounds": (_I, [_S] + [ctypes.POINTER(ctypes.c_int64)] * 3),
    "speckv_config_load_toml": (_I, [_P, _S]),
    "speckv_config_set_log": (_I, [_P, _LOG_FN, _P]),
    "speckv_config_load_toml_string": (_I, [_P, _S, _SZ]),
    "speckv_pool_open": (_I, [_S, _P, ctypes.POINTER(_P)]),
    "speckv_pool_close": (_I, [_P]),
    "speckv_alloc": (_I, [_P, _U64, _I, ctypes.POINTER(_Hint), ctypes.POINTER(_U64)]),
    "speckv_free": (_I, [_P, _U64]),
    "speckv_write": (_I, [_P, _U64, _U64, _P, _SZ]),
    "speckv_access": (_I, [_P, _U64, _U64, _P, _SZ, ctypes.c_uint32]),
    "speckv_block_info": (_I, [_P, _U64, ctypes.POINTER(_BlockMeta)]),
    "speckv_pin": (_I, [_P, _U64, ctypes.POINTER(_P), ctypes.POINTER(_SZ)]),
    "speckv_unpin": (_I, [_P, _U64]),
    "speckv_demote": (_I, [_P, _U64]),
    "speckv_prefetch": (_I, [_P, ctypes.POINTER(_Hint)]),
    "speckv_translate": (_I, [_P, _U64, _U64, ctypes.c_uint32, _U64, ctypes.POINTER(_U64), ctypes.POINTER(_U64)]),
    "speckv_select": (_I, [_P, _U64, _U64, ctypes.c_uint32, _P, _SZ, ctypes.POINTER(_SelectParams),
                           ctypes.POINTER(_PageRef), _SZ, ctypes.POINTER(_SZ), ctypes.POINTER(_SZ)]),
    "speckv_attend": (_I, [_P, _U64, _U64, ctypes.c_uint32, _P, _SZ, ctypes.POINTER(_SelectParams),
                           ctypes.POINTER(_PageRef), _SZ, ctypes.POINTER(_Partial)]),
    "speckv_merge_partials": (_I, [ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(_Partial),
                                   ctypes.POINTER(_Partial), ctypes.POINTER(_Partial)]),
    "speckv_block_hash": (_I, [_I, _U64, _P, _P, _SZ, _P, _SZ, _P]),
    "speckv_publish": (_I, [_P, _U64, _P, ctypes.POINTER(_U64)]),
    "speckv_lookup": (_I, [_P, _U64, _P, ctypes.POINTER(_U64)]),
    "speckv_tenant_set_quota": (_I, [_P, _U64, _U64]),
    "speckv_tenant_usage": (_I, [_P, _U64, ctypes.POINTER(_U64), ctypes.POINTER(_U64)]),
    "speckv_stats": (_I, [_P, ctypes.POINTER(_Stats)]),
    "speckv_stats_json": (_I, [_P, ctypes.c_char_p, _SZ, ctypes.POINTER(_SZ)]),
    "speckv_stat": (_I, [_P, ctypes.c_char_p, ctypes.POINTER(_U64)]),
}

_lib = None
_lock = threading.Lock()


def version_text(n):
    """'1.2.3' for 10203."""
    return "%d.%d.%d" % (n // 10000, n // 100 % 100, n % 100)


def check_version(library):
    """The compatibility rule: the library's major version must equal the
    binding's and the library must be at least the version the binding was
    written for (minor releases only add). Raises VersionError otherwise."""
    if library // 10000 != BINDING_VERSION_NUMBER // 10000 or library < BINDING_VERSION_NUMBER:
        raise VersionError(
            -8, "incompatible libspeckv: the library is version %s but this binding needs %d.x, at least %s"
            % (version_text(library), BINDING_VERSION_NUMBER // 10000, version_text(BINDING_VERSION_NUMBER)),
            "load")


def _open_library(path):
    """(path, CDLL): an explicit path or $SPECKV_LIB is the only candidate;
    otherwise the soname (the loader's own search: ld.so.cache, the system
    directories, LD_LIBRARY_PATH), then ctypes.util.find_library("speckv")
    (on Linux a soname from ldconfig, gcc or ld: useful where it names
    another file than libspeckv.so.0; a wrong major is then refused)."""
    explicit = path or os.environ.get("SPECKV_LIB")
    candidates = [explicit] if explicit else [DEFAULT_LIBRARY]
    if not explicit:
        found = ctypes.util.find_library("speckv")
        if found and found != DEFAULT_LIBRARY:
            candidates.append(found)
    errors = []
    for c in candidates:
        try:
            return c, ctypes.CDLL(c)
        except OSError as e:
            errors.append(str(e))
    hint = "" if explicit else " (install libspeckv0 or set SPECKV_LIB to the library's path)"
    raise NotFoundError(-4, "cannot load libspeckv: %s%s" % ("; ".join(errors), hint), "load")


def load(path=None):
    """Loads libspeckv once per process (path, else $SPECKV_LIB, else the
    soname, else ctypes.util.find_library("speckv")) and returns the ctypes.CDLL. Raises NotFoundError if it cannot be
    opened, VersionError if its major version differs."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        path, lib = _open_library(path)
        vn = getattr(lib, "speckv_version_number", None)
        if vn is None:
            raise NotSupportedError(-15, "%s lacks speckv_version_number" % path, "load")
        vn.restype, vn.argtypes = ctypes.c_uint32, []
        check_version(vn())  # first: another major may lack functions
        for name, (res, args) in _SIGS.items():
            try:
                f = getattr(lib, name)
            except AttributeError:
                raise NotSupportedError(-15, "libspeckv lacks %s" % name, "load") from None
            f.restype, f.argtypes = res, args
        _lib = lib
        return lib


def library_version():
    """(number, text) of the loaded library, e.g. (100, '0.1.0')."""
    lib = load()
    return lib.speckv_version_number(), lib.speckv_version_string().decode()


def _check(lib, rc, op):
    if rc != 0:
        msg = (lib.speckv_errmsg() or b"").decode(errors="replace")
        if not msg:
            msg = (lib.speckv_strerror(rc) or b"").decode(errors="replace")
        raise error_for(rc, msg, op)


def _enc(s, what):
    if not isinstance(s, (str, bytes)):
        raise InvalidError(-1, "%s must be str" % what)
    b = s.encode() if isinstance(s, str) else s
    if b"\0" in b:
        raise InvalidError(-1, "%s contains a NUL byte" % what)
    return b


def _buffer(obj, writable):
    """(address, length, keepalive) of a bytes-like object, without copying
    writable buffers. Read-only inputs (bytes) are passed by address too."""
    if obj is None:
        return None, 0, None
    mv = memoryview(obj)
    if not mv.contiguous:
        raise InvalidError(-1, "buffer must be contiguous")
    mv = mv.cast("B")
    n = mv.nbytes
    if n == 0:
        return None, 0, mv
    if writable:
        if mv.readonly:
            raise InvalidError(-1, "destination buffer is read-only (use bytearray or a writable memoryview)")
        c = (ctypes.c_char * n).from_buffer(mv)
        return ctypes.addressof(c), n, (mv, c)
    if mv.readonly:
        b = mv.tobytes() if not isinstance(obj, bytes) else obj
        return ctypes.cast(ctypes.c_char_p(b), _P).value, n, b
    c = (ctypes.c_char * n).from_buffer(mv)
    return ctypes.addressof(c), n, (mv, c)


def _bytes_arg(obj, what):
    """bytes of a bytes-like object (not of an int or a str)."""
    try:
        return memoryview(obj).tobytes()
    except TypeError:
        raise InvalidError(-1, "%s must be a bytes-like object, not %s" % (what, type(obj).__name__)) from None


def _hash_arg(h, what="hash"):
    """A HASH_BYTES-long bytes object from any bytes-like object."""
    b = _bytes_arg(h, what)
    if len(b) != HASH_BYTES:
        raise InvalidError(-1, "%s must be %d bytes, not %d" % (what, HASH_BYTES, len(b)))
    return b


def _uint(v, bits, what):
    """v as an int in [0, 2**bits) (numpy integers too), else InvalidError."""
    try:
        n = operator.index(v)
    except TypeError:
        n = None
    if n is None or not 0 <= n < 1 << bits:
        raise InvalidError(-1, "%s must be an integer in [0, 2**%d), not %r" % (what, bits, v))
    return n


def _u32_array(tokens):
    """Token ids as a uint32 array (copied; any iterable of ints, numpy arrays too)."""
    code = "I" if array.array("I").itemsize == 4 else "L"
    try:
        a = array.array(code, tokens)
    except (OverflowError, TypeError) as e:
        raise InvalidError(-1, "tokens must be integers in [0, 2**32): %s" % e) from None
    if a.itemsize != 4:
        raise InvalidError(-1, "no 32-bit unsigned array type on this platform")
    return a


def block_hash(tokens, parent=None, *, extra=None, algo=HASH_NATIVE, tenant=0):
    """The chained hash of one prefix block, H(parent, tokens, extra), as 32 bytes.

    The same inputs give the same bytes in every process, binding and
    machine. `tokens` is an iterable of token ids (0 <= id < 2**32);
    `parent` is the previous block's hash (None for the first block);
    `extra` is what else decides the KV (model, LoRA, ...): raw bytes for
    HASH_NATIVE, exactly one CBOR data item for HASH_VLLM_CBOR (None = CBOR
    null). `tenant` salts HASH_NATIVE only.

        h0 = speckv.block_hash(tokens[0:16], tenant=7)
        h1 = speckv.block_hash(tokens[16:32], h0, tenant=7)
    """
    lib = load()
    tok = _u32_array(tokens)
    tp = tok.buffer_info()[0] if len(tok) else None
    pb = _hash_arg(parent, "parent") if parent is not None else None
    if extra is None:
        ep, elen = None, 0
    else:
        eb = _bytes_arg(extra, "extra")
        # An empty extra is passed as present (not NULL, which means CBOR null).
        ep, elen = ctypes.cast(ctypes.c_char_p(eb), _P).value, len(eb)
    out = ctypes.create_string_buffer(HASH_BYTES)
    _check(lib, lib.speckv_block_hash(algo, tenant, pb, tp, len(tok), ep, elen, out), "block_hash")
    return out.raw


Published = collections.namedtuple("Published", "handle existed")
Published.__doc__ = """What Pool.publish did: `handle` is the published block, on which the caller
now holds a reference (release it with Pool.free); `existed` is True when
the tenant already had a block under the hash (SPECKV_EEXIST), in which
case the block given to publish stays unpublished and should be freed."""

TenantUsage = collections.namedtuple("TenantUsage", "pages_used max_pages")
TenantUsage.__doc__ = "Pages a tenant's blocks occupy now, and its cap (0 = none)."


# ------------------------------------------------------------ page selection

def _f32_array(values, what):
    """values as a contiguous array.array('f') (copied): any buffer of
    float32 (array('f'), numpy float32) or any iterable of numbers."""
    try:
        mv = memoryview(values)
    except TypeError:
        mv = None
    if mv is not None and mv.format in ("f", "<f", "=f") and mv.itemsize == 4 and mv.c_contiguous:
        a = array.array("f")
        a.frombytes(mv.cast("B"))
        return a
    try:
        return array.array("f", values)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidError(-1, "%s must be float32 values: %s" % (what, e)) from None


def _f32_ptr(a):
    return ctypes.cast(a.buffer_info()[0], ctypes.POINTER(ctypes.c_float))


class SelectParams:
    """Geometry and policy of Pool.select and Pool.attend (speckv_select_params,
    docs/selection.md). A K row holds kv_heads * head_dim FP16 or FP32 keys;
    the query has kv_heads * q_per_kv heads of head_dim floats, head-major.

    recent: the most recent pages always selected (None = config select.recent).
    band: steady selection, in logit units: a page selected by the previous
    call for the same (tenant, request, layer) stays while its score is >=
    the cut - band (None = config select.band_milli). scale: the logit scale
    (None = 1/sqrt(head_dim)). context_tokens: tokens [0, context_tokens)
    exist; later rows are ignored."""

    __slots__ = ("kv_heads", "head_dim", "q_per_kv", "budget", "recent", "band", "scale", "context_tokens")

    def __init__(self, kv_heads, head_dim, q_per_kv=1, budget=1, recent=None, band=None, scale=None,
                 context_tokens=0):
        self.kv_heads, self.head_dim, self.q_per_kv = kv_heads, head_dim, q_per_kv
        self.budget, self.recent, self.band, self.scale = budget, recent, band, scale
        self.context_tokens = context_tokens

    @property
    def q_heads(self):
        return self.kv_heads * self.q_per_kv

    @property
    def q_len(self):
        """Floats of a query: q_heads * head_dim."""
        return self.q_heads * self.head_dim

    def _raw(self):
        r = _SelectParams()
        r.struct_size = ctypes.sizeof(_SelectParams)
        r.kv_heads = _uint(self.kv_heads, 32, "kv_heads")
        r.head_dim = _uint(self.head_dim, 32, "head_dim")
        r.q_per_kv = _uint(self.q_per_kv, 32, "q_per_kv")
        r.budget = _uint(self.budget, 32, "budget")
        r.recent = 0xFFFFFFFF if self.recent is None else _uint(self.recent, 32, "recent")
        try:
            r.band = -1.0 if self.band is None else float(self.band)
            r.scale = 0.0 if self.scale is None else float(self.scale)
        except (TypeError, ValueError):
            raise InvalidError(-1, "band and scale must be numbers or None") from None
        r.context_tokens = _uint(self.context_tokens, 64, "context_tokens")
        return r

    def __repr__(self):
        return ("SelectParams(kv_heads=%r, head_dim=%r, q_per_kv=%r, budget=%r, recent=%r, band=%r, scale=%r, "
                "context_tokens=%r)" % (self.kv_heads, self.head_dim, self.q_per_kv, self.budget, self.recent,
                                        self.band, self.scale, self.context_tokens))


PageRef = collections.namedtuple("PageRef", "block offset token_pos tokens score")
PageRef.__doc__ = """One K page of a selection (speckv_page_ref): the K block holding it, the
page's byte offset in the block, its first token, its tokens below
context_tokens, and its score: an upper bound of the largest logit any
query head gets on its keys (inf for a page without a summary yet, e.g.
the one being appended). Pool.attend matches pages by (block, offset)."""


class Selection(list):
    """What Pool.select returns: a list of PageRef in token order, with
    .total_pages = the K pages there are (below context_tokens)."""

    total_pages = 0


class Partial:
    """A partial attention result per query head (speckv_partial), mergeable
    exactly: out[h*head_dim ...] is the softmax-weighted mean of V over the
    pages it covers, max_score[h] the largest logit, sum_exp[h] the sum of
    exp(logit - max_score[h]). The three are array.array('f') (buffers:
    numpy.frombuffer works without a copy); any float sequences may be given."""

    __slots__ = ("out", "max_score", "sum_exp")

    def __init__(self, out, max_score, sum_exp):
        self.out = _f32_array(out, "out")
        self.max_score = _f32_array(max_score, "max_score")
        self.sum_exp = _f32_array(sum_exp, "sum_exp")

    @classmethod
    def empty(cls, q_heads, head_dim):
        """The result over no page, the identity of the merge: out 0, max -inf, sum 0."""
        return cls(array.array("f", bytes(4 * q_heads * head_dim)), array.array("f", [-math.inf]) * q_heads,
                   array.array("f", bytes(4 * q_heads)))

    @property
    def q_heads(self):
        return len(self.max_score)

    @property
    def head_dim(self):
        return len(self.out) // len(self.max_score) if len(self.max_score) else 0

    def _shape(self, what):
        h = len(self.max_score)
        if len(self.sum_exp) != h:
            raise InvalidError(-1, "partial %s: %d max_score but %d sum_exp" % (what, h, len(self.sum_exp)),
                               "merge_partials")
        if h == 0 or not len(self.out) or len(self.out) % h:
            raise InvalidError(-1, "partial %s: out has %d floats for %d query heads (need q_heads * head_dim, "
                               "both > 0)" % (what, len(self.out), h), "merge_partials")
        d = len(self.out) // h
        if h > 0xFFFFFFFF or d > 0xFFFFFFFF:
            raise InvalidError(-1, "partial %s: %d heads x %d is too large" % (what, h, d), "merge_partials")
        return h, d

    def _raw(self):
        return _Partial(ctypes.sizeof(_Partial), _f32_ptr(self.out), _f32_ptr(self.max_score),
                        _f32_ptr(self.sum_exp))

    def merge(self, other):
        """merge_partials(self, other)."""
        return merge_partials(self, other)

    def __eq__(self, other):
        if not isinstance(other, Partial):
            return NotImplemented
        return (self.out, self.max_score, self.sum_exp) == (other.out, other.max_score, other.sum_exp)

    __hash__ = None

    def __repr__(self):
        return "Partial(q_heads=%d, head_dim=%d)" % (self.q_heads, self.head_dim)


def merge_partials(a, b):
    """The exact merge of partials a and b over disjoint page sets, as a new
    Partial (speckv_merge_partials, the flash-decoding merge): M = max(m_a,
    m_b), w_i = sum_i exp(m_i - M), o = (w_a o_a + w_b o_b) / (w_a + w_b).
    Both must have the same shape, else InvalidError."""
    h, d = a._shape("a")
    hb, db = b._shape("b")
    if (h, d) != (hb, db):
        raise InvalidError(-1, "partials differ in shape: %d x %d and %d x %d" % (h, d, hb, db), "merge_partials")
    lib = load()
    out = Partial.empty(h, d)
    ra, rb, ro = a._raw(), b._raw(), out._raw()
    _check(lib, lib.speckv_merge_partials(h, d, ctypes.byref(ra), ctypes.byref(rb), ctypes.byref(ro)),
           "merge_partials")
    return out


# ------------------------------------------------------------------ objects

class Hint:
    """What a block holds. All fields default to 0; content_hash is HASH_BYTES (32) bytes or None.
    flags are further SPECKV_HINT_* flags (HINT_KEYS, HINT_VALUES); HINT_HAS_HASH
    is ignored there: it follows content_hash."""

    __slots__ = ("tenant", "request", "layer", "token_pos", "token_count", "content_hash", "flags")

    def __init__(self, tenant=0, request=0, layer=0, token_pos=0, token_count=0, content_hash=None,
                 flags=0):
        self.tenant, self.request, self.layer = tenant, request, layer
        self.token_pos, self.token_count, self.content_hash = token_pos, token_count, content_hash
        self.flags = flags

    def _raw(self):
        h = _Hint()
        h.struct_size = ctypes.sizeof(_Hint)
        h.tenant, h.request, h.layer = self.tenant, self.request, self.layer
        h.token_pos, h.token_count = self.token_pos, self.token_count
        flags = operator.index(self.flags)
        if not 0 <= flags <= 0xFFFFFFFF:
            raise InvalidError(-1, "hint flags %d out of the uint32_t range" % flags)
        h.flags = flags & ~_HINT_HAS_HASH
        if self.content_hash is not None:
            ch = _hash_arg(self.content_hash, "content_hash")
            h.flags |= _HINT_HAS_HASH
            h.content_hash[:] = list(ch)
        return h

    def __repr__(self):
        return "Hint(tenant=%d, request=%d, layer=%d, token_pos=%d, token_count=%d, flags=%#x)" % (
            self.tenant, self.request, self.layer, self.token_pos, self.token_count, self.flags)


class Config:
    """Settings used when opening a pool (keys as in the TOML file).
    One thread at a time. Closed by close() or the with-statement."""

    def __init__(self):
        self._lib = load()
        p = _P()
        _check(self._lib, self._lib.speckv_config_new(ctypes.byref(p)), "config_new")
        self._c = p

    def _live(self):
        if not self._c:
            raise InvalidError(-1, "config is closed")
        return self._c

    def close(self):
        if getattr(self, "_c", None):
            self._lib.speckv_config_free(self._c)
            self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def set(self, key, value):
        """Sets an int key (int value) or any key from a string ("8G")."""
        if isinstance(value, bool) or isinstance(value, int):
            rc = self._lib.speckv_config_set_int(self._live(), _enc(key, "key"), int(value))
        else:
            rc = self._lib.speckv_config_set_str(self._live(), _enc(key, "key"), _enc(value, "value"))
        _check(self._lib, rc, "config_set")

    def set_log(self, fn):
        """Routes the log of pools opened with this config to fn(level, message)
        (level: LOG_ERROR .. LOG_DEBUG, message: str), from any library thread;
        None: no callback (silent, or stderr under SPECKV_LOG=stderr). Only
        messages up to key "log.level" (default 1, warnings) are passed. An
        exception fn raises is dropped. Pools keep the callback until closed."""
        if fn is None:
            cb = None
        else:
            def cb_(user, level, msg):
                try:
                    fn(level, msg.decode("utf-8", "replace"))
                except BaseException:  # must not unwind into the library
                    pass
            cb = _LOG_FN(cb_)
        _check(self._lib, self._lib.speckv_config_set_log(self._live(), cb if cb is not None else _LOG_FN(), None),
               "config_set_log")
        self._log_cb = cb

    def get(self, key):
        v = ctypes.c_int64()
        _check(self._lib, self._lib.speckv_config_get_int(self._live(), _enc(key, "key"), ctypes.byref(v)),
               "config_get_int")
        return v.value

    @staticmethod
    def bounds(key):
        """(min, max, default) of an integer key."""
        lib = load()
        lo, hi, d = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        _check(lib, lib.speckv_config_bounds(_enc(key, "key"), ctypes.byref(lo), ctypes.byref(hi), ctypes.byref(d)),
               "config_bounds")
        return lo.value, hi.value, d.value

    def load_toml(self, path):
        _check(self._lib, self._lib.speckv_config_load_toml(self._live(), _enc(os.fspath(path), "path")),
               "config_load_toml")

    def load_toml_string(self, text):
        b = text.encode() if isinstance(text, str) else bytes(text)
        _check(self._lib, self._lib.speckv_config_load_toml_string(self._live(), b, len(b)),
               "config_load_toml_string")


class _InFlight:
    """Counts calls in flight so that close() waits for them (speckv.h: close
    must not race with other calls on the pool)."""

    __slots__ = ("pool",)

    def __init__(self, pool):
        self.pool = pool

    def __enter__(self):
        pool = self.pool
        with pool._cv:
            if not pool._p or pool._closing:
                raise InvalidError(-1, "pool is closed")
            pool._calls += 1
            return pool._p

    def __exit__(self, *exc):
        pool = self.pool
        with pool._cv:
            pool._calls -= 1
            if pool._calls == 0:
                pool._cv.notify_all()


class Pool:
    """An open pool. Use as a context manager or call close(). Any thread may
    use it at once; close() waits for calls in flight, later calls raise."""

    def __init__(self, uri, config=None):
        self._lib = load()
        self._cv = threading.Condition()
        self._calls = 0
        self._closing = False
        self._p = None
        p = _P()
        cfg = config._live() if config is not None else None
        # The library calls the config's log callback until close: keep it alive.
        self._log_cb = getattr(config, "_log_cb", None)
        _check(self._lib, self._lib.speckv_pool_open(_enc(uri, "uri"), cfg, ctypes.byref(p)), "pool_open")
        self._p = p
        self.uri = uri

    def _use(self):
        return _InFlight(self)

    def close(self):
        cv = getattr(self, "_cv", None)
        if cv is None:
            return
        with cv:
            self._closing = True  # refuse new calls, then let those in flight finish
            cv.wait_for(lambda: self._calls == 0)
            p, self._p = self._p, None
        if p:
            _check(self._lib, self._lib.speckv_pool_close(p), "pool_close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # A safety net only; close() is the way (it reports the status).
        try:
            self.close()
        except Exception:
            pass

    def alloc(self, nbytes, dtype=OPAQUE, hint=None):
        """Allocates a block of nbytes (> 0); returns its handle (an int)."""
        out = _U64()
        h = hint._raw() if hint is not None else None
        with self._use() as p:
            rc = self._lib.speckv_alloc(p, nbytes, dtype, ctypes.byref(h) if h is not None else None,
                                        ctypes.byref(out))
            _check(self._lib, rc, "alloc")
        return out.value

    def free(self, handle):
        """Frees a block; a double free raises BadHandleError. For a published
        block it releases one reference this process holds (from publish or
        lookup); the block stays published."""
        with self._use() as p:
            _check(self._lib, self._lib.speckv_free(p, handle), "free")

    def write(self, handle, offset, data):
        """Copies a bytes-like object into the block at offset."""
        addr, n, keep = _buffer(data, writable=False)
        with self._use() as p:
            _check(self._lib, self._lib.speckv_write(p, handle, offset, addr, n), "write")
        del keep

    def access(self, handle, offset, dst):
        """Reads len(dst) verified bytes at offset into a writable buffer
        (bytearray, memoryview, array, numpy array) without copying."""
        addr, n, keep = _buffer(dst, writable=True)
        with self._use() as p:
            _check(self._lib, self._lib.speckv_access(p, handle, offset, addr, n, 0), "access")
        del keep

    def read(self, handle, offset, length):
        """Reads length bytes at offset into a new bytearray."""
        buf = bytearray(length)
        self.access(handle, offset, buf)
        return buf

    def block_size(self, handle):
        """A block's size in bytes (speckv_block_info: the data is neither
        read nor verified)."""
        m = _BlockMeta(struct_size=ctypes.sizeof(_BlockMeta))
        with self._use() as p:
            _check(self._lib, self._lib.speckv_block_info(p, handle, ctypes.byref(m)), "block_info")
        return m.bytes

    @contextlib.contextmanager
    def pin(self, handle):
        """Zero-copy view of a whole verified block, as a read-only memoryview:

            with pool.pin(h) as mv:
                first = mv[0]

        The view is released on exit (using it afterwards raises ValueError);
        meanwhile this process cannot write or free the block. Other
        processes are not prevented from writing it in speckv 0.1."""
        ptr, n = _P(), _SZ()
        with self._use() as p:
            _check(self._lib, self._lib.speckv_pin(p, handle, ctypes.byref(ptr), ctypes.byref(n)), "pin")
            mv = None
            try:
                if n.value:
                    mv = memoryview((ctypes.c_char * n.value).from_address(ptr.value)).cast("B").toreadonly()
                else:
                    mv = memoryview(b"")
                yield mv
            finally:
                if mv is not None:
                    mv.release()
                _check(self._lib, self._lib.speckv_unpin(p, handle), "unpin")

    def demote(self, handle):
        """Moves a block to the L4 cold tier now (docs/tiers.md §9): its bytes
        go to the L4 file and its pages in the pool are freed. The handle
        stays valid: the next access, pin, write or prefetch brings the block
        back. Does nothing more when it is in L4 already. Only the pool handle
        holding the L4 tier (opened with config "cold.path") can do this; any
        other raises NotSupportedError. A pinned block, or one referenced by
        another process, raises BusyError; a full L4 file NoSpaceError; a
        failed L4 write SpeckvIOError (the block stays in the pool, whole)."""
        with self._use() as p:
            _check(self._lib, self._lib.speckv_demote(p, handle), "demote")

    def publish(self, handle, hash):
        """Publishes a written block under `hash` (32 bytes, see block_hash) for
        its tenant (the tenant of its alloc hint): it becomes immutable and
        findable with lookup() from every process attached to the pool.
        Returns Published(handle, existed): the block to use from now on,
        with a reference held on it (release with free()), and whether the
        tenant already had a block under this hash, in which case `handle`
        stays unpublished and the caller should free it."""
        hb = _hash_arg(hash)
        out = _U64()
        with self._use() as p:
            rc = self._lib.speckv_publish(p, handle, hb, ctypes.byref(out))
            if rc == -5:  # SPECKV_EEXIST: the tenant's existing block, referenced
                return Published(out.value, True)
            _check(self._lib, rc, "publish")
        return Published(out.value, False)

    def lookup(self, tenant, hash):
        """The handle of the block `tenant` published under `hash`, with a
        reference taken on it (release with free()); None if there is none.
        Other tenants' blocks are never found."""
        hb = _hash_arg(hash)
        out = _U64()
        with self._use() as p:
            rc = self._lib.speckv_lookup(p, tenant, hb, ctypes.byref(out))
            if rc == -4:  # SPECKV_ENOENT
                return None
            _check(self._lib, rc, "lookup")
        return out.value

    def set_tenant_quota(self, tenant, max_pages):
        """Caps the pages `tenant`'s blocks may occupy, for every process of
        the pool; 0 removes the cap. An alloc over it raises QuotaError."""
        with self._use() as p:
            _check(self._lib, self._lib.speckv_tenant_set_quota(p, tenant, max_pages), "tenant_set_quota")

    def tenant_usage(self, tenant):
        """TenantUsage(pages_used, max_pages) of a tenant (max_pages 0 = no cap)."""
        used, cap = _U64(), _U64()
        with self._use() as p:
            _check(self._lib, self._lib.speckv_tenant_usage(p, tenant, ctypes.byref(used), ctypes.byref(cap)),
                   "tenant_usage")
        return TenantUsage(used.value, cap.value)

    def prefetch(self, hint):
        h = hint._raw()
        with self._use() as p:
            _check(self._lib, self._lib.speckv_prefetch(p, ctypes.byref(h)), "prefetch")

    def translate(self, tenant, request, layer, token_pos):
        """Address translation: (handle, offset) of the live block allocated
        with a hint of (tenant, request, layer) whose token range
        [token_pos, token_pos + token_count) covers `token_pos`, `offset`
        being the token's index inside that block; None when no block covers
        it (never allocated with such a hint, or freed; a pool opened with
        "tenant.id" sees only its own tenant's blocks). No reference is
        taken. A per-process TLB answers repeated questions (stats keys
        tlb_hits, tlb_misses)."""
        # ctypes would truncate an out-of-range value silently and answer for another block.
        tenant, request = _uint(tenant, 64, "tenant"), _uint(request, 64, "request")
        layer, token_pos = _uint(layer, 32, "layer"), _uint(token_pos, 64, "token_pos")
        out, off = _U64(), _U64()
        with self._use() as p:
            rc = self._lib.speckv_translate(p, tenant, request, layer, token_pos, ctypes.byref(out),
                                            ctypes.byref(off))
            if rc == -4:  # SPECKV_ENOENT
                return None
            _check(self._lib, rc, "translate")
        return out.value, off.value

    def select(self, tenant, request, layer, q, params):
        """Near-memory page selection (speckv_select): the params.budget K pages
        of (tenant, request, layer) that matter most for query q
        (params.q_len float32 values, head-major; a list, array('f') or numpy
        float32 array), as a Selection (a list of PageRef in token order,
        with .total_pages): the `recent` last pages, the pages the steady
        rule keeps from this pool handle's previous call for the same
        (tenant, request, layer), then the best upper bounds. All the pages
        when there are fewer than the budget.

        The K pages are those of live blocks allocated with HINT_KEYS and
        that (tenant, request, layer); they have summaries in a pool created
        with config pool.summary_bytes >= 16 + 4 * kv_heads * head_dim and
        written with select.channels = kv_heads * head_dim (else
        NotSupportedError). NotFoundError when there is no K page;
        InvalidError for a wrong q length, geometry, budget 0, or q not finite."""
        tenant, request = _uint(tenant, 64, "tenant"), _uint(request, 64, "request")
        layer = _uint(layer, 32, "layer")
        qa = _f32_array(q, "q")
        sp = params._raw()
        # The selection has min(budget, pages) refs. Start small so that a
        # budget of "everything" (2**32 - 1) allocates no more than the pages
        # there are: SPECKV_ERANGE changes nothing and says how many there are.
        cap = max(1, min(sp.budget, 256))
        n, pages = _SZ(), _SZ()
        while True:
            out = (_PageRef * cap)()
            with self._use() as p:
                rc = self._lib.speckv_select(p, tenant, request, layer, qa.buffer_info()[0] if len(qa) else None,
                                             len(qa), ctypes.byref(sp), out, cap, ctypes.byref(n),
                                             ctypes.byref(pages))
            if rc == -12 and min(pages.value, sp.budget) > cap:  # SPECKV_ERANGE
                cap = min(pages.value, sp.budget)
                continue
            _check(self._lib, rc, "select")
            break
        sel = Selection(PageRef(r.block, r.offset, r.token_pos, r.tokens, r.score) for r in out[:n.value])
        sel.total_pages = pages.value
        return sel

    def attend(self, tenant, request, layer, q, params, exclude=()):
        """Attention of q over the K/V pages of (tenant, request, layer) that are
        not in `exclude` (PageRefs, matched by block and offset; typically
        what select() returned and the GPU attends itself), computed next to
        the pool (speckv_attend), as a Partial with q_heads * head_dim
        outputs. The V rows are those of blocks allocated with HINT_VALUES,
        same layout. Merge it with the GPU's part with Partial.merge."""
        tenant, request = _uint(tenant, 64, "tenant"), _uint(request, 64, "request")
        layer = _uint(layer, 32, "layer")
        qa = _f32_array(q, "q")
        sp = params._raw()
        ex = list(exclude)
        exa = (_PageRef * max(1, len(ex)))()
        try:
            for i, r in enumerate(ex):
                exa[i] = _PageRef(r[0], r[1], r[2], r[3], r[4])
        except (TypeError, IndexError):
            raise InvalidError(-1, "exclude must hold PageRef values") from None
        # The library writes only when len(q) == q_heads * head_dim, so
        # arrays sized from q itself are always large enough.
        heads = len(qa) // sp.head_dim if sp.head_dim else 0
        part = Partial(array.array("f", bytes(4 * max(1, len(qa)))), array.array("f", bytes(4 * max(1, heads))),
                       array.array("f", bytes(4 * max(1, heads))))
        raw = part._raw()
        with self._use() as p:
            rc = self._lib.speckv_attend(p, tenant, request, layer, qa.buffer_info()[0] if len(qa) else None,
                                         len(qa), ctypes.byref(sp), exa if ex else None, len(ex), ctypes.byref(raw))
            _check(self._lib, rc, "attend")
        del part.out[len(qa):], part.max_score[heads:], part.sum_exp[heads:]
        return part

    def stats(self):
        """The counters as a dict (from speckv_stats_json): every field of
        speckv_pool_stats, plus the library's derived values (prefetch_beta
        as a fraction, hit_rate, precision, tlb_hit_rate, codec_ratio =
        codec_raw_bytes / codec_stored_bytes) and l4_holder (a bool: this
        pool handle holds the L4 tier)."""
        d = json.loads(self.stats_json())
        if "prefetch_beta" in d and "prefetch_beta_ppm" not in d:
            # The JSON has beta with 6 decimals: exactly the struct's ppm.
            d["prefetch_beta_ppm"] = int(round(d["prefetch_beta"] * 1e6))
        return d

    def stats_json(self):
        need = _SZ()
        buf = ctypes.create_string_buffer(512)
        while True:
            with self._use() as p:
                rc = self._lib.speckv_stats_json(p, buf, len(buf), ctypes.byref(need))
            if rc == -12 and need.value + 1 > len(buf):
                buf = ctypes.create_string_buffer(need.value + 1)
                continue
            _check(self._lib, rc, "stats_json")
            return buf.value.decode()

    def stat(self, name):
        """One counter by its key in the stats JSON (speckv_stat): the way
        to read counters added after 0.1.0."""
        v = _U64()
        with self._use() as p:
            _check(self._lib, self._lib.speckv_stat(p, _enc(name, "name"), ctypes.byref(v)), "stat")
        return v.value

    def stats_struct(self):
        """The counters as a dict, from the speckv_pool_stats struct."""
        s = _Stats()
        s.struct_size = ctypes.sizeof(_Stats)
        with self._use() as p:
            _check(self._lib, self._lib.speckv_stats(p, ctypes.byref(s)), "stats")
        return {f: getattr(s, f) for f in _STATS_ALL}


# ------------------------------------------------------------------ replay

def replay(pool, trace):
    """Replays a simple op trace against a pool and returns a summary dict.

    `trace` is an iterable of lines (a file object works) or of token lists;
    blank lines and '#' comments are skipped. Blocks are named by the trace
    (any word), handles are tracked here. Ops:

        alloc NAME BYTES [DTYPE [REQUEST LAYER TOKEN_POS TOKEN_COUNT]]
        write NAME OFFSET LENGTH [SEED]    # deterministic bytes from SEED
        access NAME OFFSET LENGTH
        prefetch REQUEST LAYER TOKEN_POS
        free NAME

    DTYPE is opaque|fp16|bf16|fp32. A failing op raises its SpeckvError with
    the line number prepended to the message (op field).
    """
    dtypes = {"opaque": OPAQUE, "fp16": FP16, "bf16": BF16, "fp32": FP32}
    names = {}
    counts = {}
    nbytes = {"written": 0, "read": 0}
    for lineno, line in enumerate(trace, 1):
        tok = line.split() if isinstance(line, str) else list(line)
        if not tok or tok[0].startswith("#"):
            continue
        op, a = tok[0], tok[1:]
        try:
            if op == "alloc":
                hint = None
                if len(a) >= 7:
                    hint = Hint(request=int(a[3]), layer=int(a[4]), token_pos=int(a[5]), token_count=int(a[6]))
                names[a[0]] = pool.alloc(int(a[1]), dtypes[a[2]] if len(a) > 2 else OPAQUE, hint)
            elif op == "write":
                off, n = int(a[1]), int(a[2])
                seed = int(a[3]) if len(a) > 3 else 0
                pool.write(names[a[0]], off, bytes((seed + i * 7) & 0xFF for i in range(n)))
                nbytes["written"] += n
            elif op == "access":
                n = int(a[2])
                pool.read(names[a[0]], int(a[1]), n)
                nbytes["read"] += n
            elif op == "prefetch":
                pool.prefetch(Hint(request=int(a[0]), layer=int(a[1]), token_pos=int(a[2])))
            elif op == "free":
                pool.free(names.pop(a[0]))
            else:
                raise InvalidError(-1, "unknown op %r" % op)
        except SpeckvError as e:
            e.op = "trace line %d (%s)" % (lineno, op)
            e.args = ("%s: %s" % (e.op, e.args[0]),)
            raise
        except (IndexError, ValueError, KeyError) as e:
            raise InvalidError(-1, "bad or unknown operand: %s" % e, "trace line %d (%s)" % (lineno, op)) from None
        counts[op] = counts.get(op, 0) + 1
    return {"ops": counts, "bytes_written": nbytes["written"], "bytes_read": nbytes["read"],
            "live_blocks": dict(names)}
