// SPDX-License-Identifier: Apache-2.0
//! Raw bindings to `libspeckv.so.0`, loaded at run time with `dlopen`.
//!
//! Nothing here links against libspeckv: [`load`] opens the library named by
//! the `SPECKV_LIB` environment variable (a path), or the soname
//! `libspeckv.so.0` through the normal search path, resolves every function
//! of `speckv.h` 0.1 with `dlsym`, and refuses a library whose
//! `speckv_version_number()` has another major version (see [`check_version`]).
//!
//! The declarations mirror `include/speckv.h`; read its comments for what each
//! function does. Every call is `unsafe`: use the `speckv` crate for a safe API.
#![allow(non_camel_case_types)]

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::Mutex;

// ------------------------------------------------------------------ version

/// The version of `speckv.h` these declarations were written against.
pub const SPECKV_VERSION_MAJOR: u32 = 0;
pub const SPECKV_VERSION_MINOR: u32 = 1;
pub const SPECKV_VERSION_PATCH: u32 = 0;
pub const SPECKV_VERSION_NUMBER: u32 =
    SPECKV_VERSION_MAJOR * 10000 + SPECKV_VERSION_MINOR * 100 + SPECKV_VERSION_PATCH;

/// The soname loaded when `SPECKV_LIB` is not set.
pub const DEFAULT_LIBRARY: &str = "libspeckv.so.0";

// ------------------------------------------------------------- status codes

pub const SPECKV_OK: c_int = 0;
pub const SPECKV_EINVAL: c_int = -1;
pub const SPECKV_ENOMEM: c_int = -2;
pub const SPECKV_ENOSPC: c_int = -3;
pub const SPECKV_ENOENT: c_int = -4;
pub const SPECKV_EEXIST: c_int = -5;
pub const SPECKV_EBADHANDLE: c_int = -6;
pub const SPECKV_ECORRUPT: c_int = -7;
pub const SPECKV_EVERSION: c_int = -8;
pub const SPECKV_EIO: c_int = -9;
pub const SPECKV_EPERM: c_int = -10;
pub const SPECKV_EBUSY: c_int = -11;
pub const SPECKV_ERANGE: c_int = -12;
pub const SPECKV_ENOTPOOL: c_int = -13;
pub const SPECKV_EURI: c_int = -14;
pub const SPECKV_ENOTSUP: c_int = -15;
pub const SPECKV_ESTRUCT: c_int = -16;
pub const SPECKV_EINTERNAL: c_int = -17;
pub const SPECKV_EQUOTA: c_int = -18;

pub const SPECKV_LOG_ERROR: c_int = 0;
pub const SPECKV_LOG_WARN: c_int = 1;
pub const SPECKV_LOG_INFO: c_int = 2;
pub const SPECKV_LOG_DEBUG: c_int = 3;

pub const SPECKV_DTYPE_OPAQUE: c_int = 0;
pub const SPECKV_DTYPE_FP16: c_int = 1;
pub const SPECKV_DTYPE_BF16: c_int = 2;
pub const SPECKV_DTYPE_FP32: c_int = 3;

pub const SPECKV_HINT_HAS_HASH: u32 = 0x1;
/// The block holds keys: its pages use config `codec.key_mode` (docs/codec.md §17).
pub const SPECKV_HINT_KEYS: u32 = 0x2;
/// The block holds values: its pages use config `codec.value_mode`.
pub const SPECKV_HINT_VALUES: u32 = 0x4;
/// speckv_prefetch: token_count is the hinted unit's read span (docs/tiers.md "Read spans").
pub const SPECKV_HINT_SPAN: u32 = 0x8;
pub const SPECKV_HASH_BYTES: usize = 32;
pub const SPECKV_HASH_NATIVE: c_int = 0;
pub const SPECKV_HASH_VLLM_CBOR: c_int = 1;
pub const SPECKV_ACCESS_DEFAULT: u32 = 0;

pub type speckv_handle = u64;
pub const SPECKV_HANDLE_INVALID: speckv_handle = 0;

// -------------------------------------------------------------------- types

/// Opaque `speckv_config`.
#[repr(C)]
pub struct speckv_config {
    _opaque: [u8; 0],
}

/// Opaque `speckv_pool`.
#[repr(C)]
pub struct speckv_pool {
    _opaque: [u8; 0],
}

pub type speckv_log_fn = Option<unsafe extern "C" fn(user: *mut c_void, level: c_int, msg: *const c_char)>;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct speckv_hint {
    pub struct_size: usize,
    pub tenant: u64,
    pub request: u64,
    pub layer: u32,
    pub flags: u32,
    pub token_pos: u64,
    pub token_count: u64,
    pub content_hash: [u8; SPECKV_HASH_BYTES],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct speckv_block_meta {
    pub struct_size: usize,
    pub bytes: u64,
    pub dtype: i32,
    pub flags: u32,
    pub tenant: u64,
    pub request: u64,
    pub layer: u32,
    pub reserved: u32,
    pub token_pos: u64,
    pub token_count: u64,
    pub content_hash: [u8; SPECKV_HASH_BYTES],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct speckv_pool_stats {
    pub struct_size: usize,
    pub pool_bytes: u64,
    pub page_size: u64,
    pub pages_total: u64,
    pub pages_used: u64,
    pub blocks_live: u64,
    pub blocks_max: u64,
    pub allocs: u64,
    pub frees: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub reads: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub checksum_failures: u64,
    pub prefetch_hints: u64,
    pub attached: u64,
    pub blocks_published: u64,
    pub shared_bytes: u64,
    pub lookups: u64,
    pub lookup_hits: u64,
    pub dedup_bytes: u64,
    pub evictions: u64,
    pub reclaimed_blocks: u64,
    pub l2_hits: u64,
    pub sync_reads: u64,
    pub prefetch_pages: u64,
    pub prefetch_used: u64,
    pub prefetch_wasted: u64,
    pub prefetch_wasted_bytes: u64,
    pub prefetch_ignored: u64,
    pub prefetch_dropped: u64,
    pub link_bytes: u64,
    pub tlb_hits: u64,
    pub tlb_misses: u64,
    pub prefetch_beta_ppm: u32,
    pub prefetch_depth: u32,
    pub codec_pages_encoded: u64,
    pub codec_raw_bytes: u64,
    pub codec_stored_bytes: u64,
    pub codec_pages_bypassed: u64,
    pub codec_pages_decoded: u64,
    pub l4_blocks: u64,
    pub l4_bytes: u64,
    pub l4_demotions: u64,
    pub l4_promotions: u64,
    pub l4_demote_failures: u64,
}

/// Near-memory page selection: the geometry and policy of `speckv_select`
/// and `speckv_attend` (speckv.h, docs/selection.md).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct speckv_select_params {
    pub struct_size: usize,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub q_per_kv: u32,
    pub budget: u32,
    /// UINT32_MAX = config `select.recent`.
    pub recent: u32,
    /// < 0 = config `select.band_milli`.
    pub band: f32,
    /// 0 = 1/sqrt(head_dim).
    pub scale: f32,
    pub context_tokens: u64,
}

/// One K page of a selection.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct speckv_page_ref {
    pub block: speckv_handle,
    pub offset: u64,
    pub token_pos: u64,
    pub tokens: u32,
    pub score: f32,
}

/// A partial attention result: three caller-owned arrays (`out` has
/// q_heads * head_dim floats, `max_score` and `sum_exp` q_heads each).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct speckv_partial {
    pub struct_size: usize,
    pub out: *mut f32,
    pub max_score: *mut f32,
    pub sum_exp: *mut f32,
}

impl Default for speckv_partial {
    fn default() -> Self {
        speckv_partial {
            struct_size: std::mem::size_of::<speckv_partial>(),
            out: std::ptr::null_mut(),
            max_score: std::ptr::null_mut(),
            sum_exp: std::ptr::null_mut(),
        }
    }
}

// ------------------------------------------------------------ the functions

/// Every function of `speckv.h` 0.1, resolved from one loaded library.
/// The fields are named as the C functions.
#[derive(Clone, Copy)]
pub struct Api {
    pub speckv_version_number: unsafe extern "C" fn() -> u32,
    pub speckv_version_string: unsafe extern "C" fn() -> *const c_char,
    pub speckv_strerror: unsafe extern "C" fn(code: c_int) -> *const c_char,
    pub speckv_errmsg: unsafe extern "C" fn() -> *const c_char,
    pub speckv_config_new: unsafe extern "C" fn(out: *mut *mut speckv_config) -> c_int,
    pub speckv_config_free: unsafe extern "C" fn(cfg: *mut speckv_config),
    pub speckv_config_set_int:
        unsafe extern "C" fn(cfg: *mut speckv_config, key: *const c_char, value: i64) -> c_int,
    pub speckv_config_set_str:
        unsafe extern "C" fn(cfg: *mut speckv_config, key: *const c_char, value: *const c_char) -> c_int,
    pub speckv_config_get_int:
        unsafe extern "C" fn(cfg: *const speckv_config, key: *const c_char, value: *mut i64) -> c_int,
    pub speckv_config_bounds:
        unsafe extern "C" fn(key: *const c_char, min: *mut i64, max: *mut i64, dflt: *mut i64) -> c_int,
    pub speckv_config_load_toml: unsafe extern "C" fn(cfg: *mut speckv_config, path: *const c_char) -> c_int,
    pub speckv_config_load_toml_string:
        unsafe extern "C" fn(cfg: *mut speckv_config, text: *const c_char, len: usize) -> c_int,
    pub speckv_config_set_log:
        unsafe extern "C" fn(cfg: *mut speckv_config, f: speckv_log_fn, user: *mut c_void) -> c_int,
    pub speckv_pool_open: unsafe extern "C" fn(
        uri: *const c_char,
        cfg: *const speckv_config,
        out: *mut *mut speckv_pool,
    ) -> c_int,
    pub speckv_pool_close: unsafe extern "C" fn(pool: *mut speckv_pool) -> c_int,
    pub speckv_alloc: unsafe extern "C" fn(
        pool: *mut speckv_pool,
        bytes: u64,
        dtype: c_int,
        hint: *const speckv_hint,
        out: *mut speckv_handle,
    ) -> c_int,
    pub speckv_free: unsafe extern "C" fn(pool: *mut speckv_pool, handle: speckv_handle) -> c_int,
    pub speckv_write: unsafe extern "C" fn(
        pool: *mut speckv_pool,
        handle: speckv_handle,
        offset: u64,
        src: *const c_void,
        len: usize,
    ) -> c_int,
    pub speckv_access: unsafe extern "C" fn(
        pool: *mut speckv_pool,
        handle: speckv_handle,
        offset: u64,
        dst: *mut c_void,
        len: usize,
        flags: u32,
    ) -> c_int,
    pub speckv_block_info:
        unsafe extern "C" fn(pool: *mut speckv_pool, handle: speckv_handle, out: *mut speckv_block_meta) -> c_int,
    pub speckv_pin: unsafe extern "C" fn(
        pool: *mut speckv_pool,
        handle: speckv_handle,
        ptr: *mut *const c_void,
        len: *mut usize,
    ) -> c_int,
    pub speckv_unpin: unsafe extern "C" fn(pool: *mut speckv_pool, handle: speckv_handle) -> c_int,
    pub speckv_demote: unsafe extern "C" fn(pool: *mut speckv_pool, handle: speckv_handle) -> c_int,
    pub speckv_prefetch: unsafe extern "C" fn(pool: *mut speckv_pool, hint: *const speckv_hint) -> c_int,
    pub speckv_translate: unsafe extern "C" fn(
        pool: *mut speckv_pool,
        tenant: u64,
        request: u64,
        layer: u32,
        token_pos: u64,
        out: *mut speckv_handle,
        token_offset: *mut u64,
    ) -> c_int,
    pub speckv_select: unsafe extern "C" fn(
        pool: *mut speckv_pool,
        tenant: u64,
        request: u64,
        layer: u32,
        q: *const f32,
        q_len: usize,
        params: *const speckv_select_params,
        out: *mut speckv_page_ref,
        cap: usize,
        n_out: *mut usize,
        n_pages: *mut usize,
    ) -> c_int,
    pub speckv_attend: unsafe extern "C" fn(
        pool: *mut speckv_pool,
        tenant: u64,
        request: u64,
        layer: u32,
        q: *const f32,
        q_len: usize,
        params: *const speckv_select_params,
        exclude: *const speckv_page_ref,
        n_exclude: usize,
        out: *mut speckv_partial,
    ) -> c_int,
    pub speckv_merge_partials: unsafe extern "C" fn(
        q_heads: u32,
        head_dim: u32,
        a: *const speckv_partial,
        b: *const speckv_partial,
        out: *mut speckv_partial,
    ) -> c_int,
    pub speckv_block_hash: unsafe extern "C" fn(
        algo: c_int,
        tenant: u64,
        parent: *const u8,
        tokens: *const u32,
        ntokens: usize,
        extra: *const c_void,
        extra_len: usize,
        out: *mut u8,
    ) -> c_int,
    pub speckv_publish: unsafe extern "C" fn(
        pool: *mut speckv_pool,
        handle: speckv_handle,
        hash: *const u8,
        canonical: *mut speckv_handle,
    ) -> c_int,
    pub speckv_lookup:
        unsafe extern "C" fn(pool: *mut speckv_pool, tenant: u64, hash: *const u8, out: *mut speckv_handle) -> c_int,
    pub speckv_tenant_set_quota: unsafe extern "C" fn(pool: *mut speckv_pool, tenant: u64, max_pages: u64) -> c_int,
    pub speckv_tenant_usage:
        unsafe extern "C" fn(pool: *mut speckv_pool, tenant: u64, pages_used: *mut u64, max_pages: *mut u64) -> c_int,
    pub speckv_stats: unsafe extern "C" fn(pool: *mut speckv_pool, out: *mut speckv_pool_stats) -> c_int,
    pub speckv_stats_json:
        unsafe extern "C" fn(pool: *mut speckv_pool, buf: *mut c_char, cap: usize, needed: *mut usize) -> c_int,
}

// ------------------------------------------------------------------ loading

const RTLD_NOW: c_int = 2;

#[link(name = "dl")]
extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
}

/// Why the library could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// `dlopen` failed; the text is `dlerror()`'s.
    Open(String),
    /// The library lacks a function of speckv.h 0.1.
    Symbol(String),
    /// The library's major version differs from this binding's, or it is
    /// older than the version this binding was written for.
    Version { library: u32, binding: u32 },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Open(s) => write!(f, "cannot load libspeckv: {}", s),
            LoadError::Symbol(s) => write!(f, "libspeckv lacks a symbol: {}", s),
            LoadError::Version { library, binding } => write!(
                f,
                "incompatible libspeckv: the library is version {} but this binding needs {}.x, at least {}",
                version_text(*library),
                binding / 10000,
                version_text(*binding)
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// "1.2.3" for 10203.
pub fn version_text(n: u32) -> String {
    format!("{}.{}.{}", n / 10000, n / 100 % 100, n % 100)
}

/// The compatibility rule: the library's major version must equal the
/// binding's, and the library must be at least the version the binding was
/// written against (minor releases only add functions).
pub fn check_version(library: u32) -> Result<(), LoadError> {
    if library / 10000 != SPECKV_VERSION_MAJOR || library < SPECKV_VERSION_NUMBER {
        return Err(LoadError::Version { library, binding: SPECKV_VERSION_NUMBER });
    }
    Ok(())
}

fn last_dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string.
    unsafe {
        let e = dlerror();
        if e.is_null() {
            "unknown dlopen error".to_string()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

macro_rules! resolve {
    ($lib:expr, $($name:ident),*) => {
        Api { $($name: {
            let p = dlsym($lib, concat!(stringify!($name), "\0").as_ptr() as *const c_char);
            if p.is_null() {
                return Err(LoadError::Symbol(stringify!($name).to_string()));
            }
            std::mem::transmute::<*mut c_void, _>(p)
        },)* }
    };
}

/// Opens `path` (a path or a soname) and resolves the API. The library is
/// never closed: the returned table lives for the whole process.
pub fn load_from(path: &str) -> Result<&'static Api, LoadError> {
    let c = CString::new(path).map_err(|_| LoadError::Open(format!("{:?}: path contains NUL", path)))?;
    // SAFETY: dlopen/dlsym are called with NUL-terminated strings; each symbol
    // is transmuted to the type its speckv.h declaration has.
    let api = unsafe {
        let lib = dlopen(c.as_ptr(), RTLD_NOW);
        if lib.is_null() {
            return Err(LoadError::Open(last_dlerror()));
        }
        // The version first: a library of another major may lack functions,
        // and "wrong version" is the more useful message then.
        let vp = dlsym(lib, "speckv_version_number\0".as_ptr() as *const c_char);
        if vp.is_null() {
            return Err(LoadError::Symbol("speckv_version_number".to_string()));
        }
        let version: unsafe extern "C" fn() -> u32 = std::mem::transmute(vp);
        check_version(version())?;
        resolve!(
            lib,
            speckv_version_number,
            speckv_version_string,
            speckv_strerror,
            speckv_errmsg,
            speckv_config_new,
            speckv_config_free,
            speckv_config_set_int,
            speckv_config_set_str,
            speckv_config_get_int,
            speckv_config_bounds,
            speckv_config_load_toml,
            speckv_config_load_toml_string,
            speckv_config_set_log,
            speckv_pool_open,
            speckv_pool_close,
            speckv_alloc,
            speckv_free,
            speckv_write,
            speckv_access,
            speckv_block_info,
            speckv_pin,
            speckv_unpin,
            speckv_demote,
            speckv_prefetch,
            speckv_translate,
            speckv_select,
            speckv_attend,
            speckv_merge_partials,
            speckv_block_hash,
            speckv_publish,
            speckv_lookup,
            speckv_tenant_set_quota,
            speckv_tenant_usage,
            speckv_stats,
            speckv_stats_json
        )
    };
    Ok(Box::leak(Box::new(api)))
}

static LOADED: Mutex<Option<&'static Api>> = Mutex::new(None);

/// The library named by `SPECKV_LIB`, or [`DEFAULT_LIBRARY`], loaded once per
/// process. A failure is not cached: a later call tries again.
pub fn load() -> Result<&'static Api, LoadError> {
    let mut g = match LOADED.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    if let Some(api) = *g {
        return Ok(api);
    }
    let path = std::env::var("SPECKV_LIB").unwrap_or_else(|_| DEFAULT_LIBRARY.to_string());
    let api = load_from(&path)?;
    *g = Some(api);
    Ok(api)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        // LP64 sizes of speckv.h 0.1 (content_hash is SPECKV_HASH_BYTES = 32).
        assert_eq!(std::mem::size_of::<speckv_hint>(), 80);
        assert_eq!(std::mem::size_of::<speckv_block_meta>(), 96);
        // speckv_pool_stats: struct_size, 34 uint64_t counters, 2 uint32_t,
        // then 5 uint64_t codec counters and 5 uint64_t L4 counters.
        assert_eq!(std::mem::size_of::<speckv_pool_stats>(), 368);
        assert_eq!(std::mem::align_of::<speckv_pool_stats>(), 8);
        let s = speckv_pool_stats::default();
        let base = &s as *const _ as usize;
        let off = |p: *const u8| p as usize - base;
        assert_eq!(off(&s.reclaimed_blocks as *const u64 as *const u8), 184);
        assert_eq!(off(&s.l2_hits as *const u64 as *const u8), 192);
        assert_eq!(off(&s.tlb_misses as *const u64 as *const u8), 272);
        assert_eq!(off(&s.prefetch_beta_ppm as *const u32 as *const u8), 280);
        assert_eq!(off(&s.prefetch_depth as *const u32 as *const u8), 284);
        assert_eq!(off(&s.codec_pages_encoded as *const u64 as *const u8), 288);
        assert_eq!(off(&s.codec_raw_bytes as *const u64 as *const u8), 296);
        assert_eq!(off(&s.codec_stored_bytes as *const u64 as *const u8), 304);
        assert_eq!(off(&s.codec_pages_bypassed as *const u64 as *const u8), 312);
        assert_eq!(off(&s.codec_pages_decoded as *const u64 as *const u8), 320);
        assert_eq!(off(&s.l4_blocks as *const u64 as *const u8), 328);
        assert_eq!(off(&s.l4_bytes as *const u64 as *const u8), 336);
        assert_eq!(off(&s.l4_demotions as *const u64 as *const u8), 344);
        assert_eq!(off(&s.l4_promotions as *const u64 as *const u8), 352);
        assert_eq!(off(&s.l4_demote_failures as *const u64 as *const u8), 360);
        assert_eq!((SPECKV_HINT_HAS_HASH, SPECKV_HINT_KEYS, SPECKV_HINT_VALUES, SPECKV_HINT_SPAN), (0x1, 0x2, 0x4, 0x8));
    }

    #[test]
    fn selection_layouts_match_the_header() {
        // offsetof() against include/speckv.h on LP64 (a C program printed these).
        assert_eq!(std::mem::size_of::<speckv_select_params>(), 48);
        assert_eq!(std::mem::align_of::<speckv_select_params>(), 8);
        let p = speckv_select_params::default();
        let base = &p as *const _ as usize;
        let off = |q: *const u8| q as usize - base;
        assert_eq!(off(&p.kv_heads as *const u32 as *const u8), 8);
        assert_eq!(off(&p.head_dim as *const u32 as *const u8), 12);
        assert_eq!(off(&p.q_per_kv as *const u32 as *const u8), 16);
        assert_eq!(off(&p.budget as *const u32 as *const u8), 20);
        assert_eq!(off(&p.recent as *const u32 as *const u8), 24);
        assert_eq!(off(&p.band as *const f32 as *const u8), 28);
        assert_eq!(off(&p.scale as *const f32 as *const u8), 32);
        assert_eq!(off(&p.context_tokens as *const u64 as *const u8), 40);

        assert_eq!(std::mem::size_of::<speckv_page_ref>(), 32);
        assert_eq!(std::mem::align_of::<speckv_page_ref>(), 8);
        let r = speckv_page_ref::default();
        let base = &r as *const _ as usize;
        let off = |q: *const u8| q as usize - base;
        assert_eq!(off(&r.block as *const u64 as *const u8), 0);
        assert_eq!(off(&r.offset as *const u64 as *const u8), 8);
        assert_eq!(off(&r.token_pos as *const u64 as *const u8), 16);
        assert_eq!(off(&r.tokens as *const u32 as *const u8), 24);
        assert_eq!(off(&r.score as *const f32 as *const u8), 28);

        assert_eq!(std::mem::size_of::<speckv_partial>(), 32);
        assert_eq!(std::mem::align_of::<speckv_partial>(), 8);
        let a = speckv_partial::default();
        assert_eq!(a.struct_size, 32);
        let base = &a as *const _ as usize;
        let off = |q: *const *mut f32| q as usize - base;
        assert_eq!(off(&a.out), 8);
        assert_eq!(off(&a.max_score), 16);
        assert_eq!(off(&a.sum_exp), 24);
    }

    #[test]
    fn version_rule() {
        assert!(check_version(SPECKV_VERSION_NUMBER).is_ok());
        assert!(check_version(SPECKV_VERSION_NUMBER + 1).is_ok());
        assert!(check_version(SPECKV_VERSION_NUMBER + 100).is_ok());
        let e = check_version(10000).unwrap_err();
        assert_eq!(e, LoadError::Version { library: 10000, binding: SPECKV_VERSION_NUMBER });
        let s = e.to_string();
        assert!(s.contains("1.0.0") && s.contains("0.1.0"), "{}", s);
        assert!(check_version(99).is_err()); // 0.0.99: older than the binding
    }

    #[test]
    fn missing_library_is_an_error() {
        match load_from("/nonexistent/libspeckv.so.0") {
            Err(LoadError::Open(_)) => {}
            Err(e) => panic!("unexpected {}", e),
            Ok(_) => panic!("loaded a nonexistent library"),
        }
    }
}
