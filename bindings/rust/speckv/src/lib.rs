// SPDX-License-Identifier: Apache-2.0
//! Safe Rust bindings to speckv, a KV-cache pool for LLM serving engines.
//!
//! The library is loaded at run time (see `speckv_sys::load`): set
//! `SPECKV_LIB=/path/to/libspeckv.so.0` or put `libspeckv.so.0` on the loader
//! path. A library of another major version is refused with an [`Error`] of
//! code `SPECKV_EVERSION` whose message names both versions.
//!
//! ```no_run
//! let pool = speckv::Pool::open("anon:?size=8M")?;
//! let h = pool.alloc(4096, speckv::DType::Fp16, None)?;
//! pool.write(h, 0, &[1, 2, 3])?;
//! let mut buf = [0u8; 3];
//! pool.access(h, 0, &mut buf)?;
//! pool.free(h)?;
//! # Ok::<(), speckv::Error>(())
//! ```
//!
//! Threading follows `speckv.h`: a [`Pool`] is `Send + Sync` (any thread,
//! concurrently); a [`Config`] is `Send` but not `Sync` (one thread at a time):
//!
//! ```compile_fail
//! fn needs_sync<T: Sync>() {}
//! needs_sync::<speckv::Config>();
//! ```

use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::{self, NonNull};
use std::sync::Arc;

pub use speckv_sys as sys;
pub use speckv_sys::{check_version, version_text, LoadError};

/// The result of every fallible call.
pub type Result<T> = std::result::Result<T, Error>;

// -------------------------------------------------------------------- errors

/// What kind of failure a status code is. One variant per `SPECKV_E*` code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    InvalidArgument,
    OutOfMemory,
    NoSpace,
    NotFound,
    AlreadyExists,
    BadHandle,
    Corrupt,
    Version,
    Io,
    Permission,
    Busy,
    Range,
    NotPool,
    Uri,
    NotSupported,
    Struct,
    Internal,
    /// `SPECKV_EQUOTA`: the tenant's page quota would be exceeded.
    Quota,
    /// A code this binding does not know (from a newer library).
    Other(i32),
}

impl ErrorKind {
    /// The kind of a status code.
    pub fn from_code(code: i32) -> ErrorKind {
        match code {
            sys::SPECKV_EINVAL => ErrorKind::InvalidArgument,
            sys::SPECKV_ENOMEM => ErrorKind::OutOfMemory,
            sys::SPECKV_ENOSPC => ErrorKind::NoSpace,
            sys::SPECKV_ENOENT => ErrorKind::NotFound,
            sys::SPECKV_EEXIST => ErrorKind::AlreadyExists,
            sys::SPECKV_EBADHANDLE => ErrorKind::BadHandle,
            sys::SPECKV_ECORRUPT => ErrorKind::Corrupt,
            sys::SPECKV_EVERSION => ErrorKind::Version,
            sys::SPECKV_EIO => ErrorKind::Io,
            sys::SPECKV_EPERM => ErrorKind::Permission,
            sys::SPECKV_EBUSY => ErrorKind::Busy,
            sys::SPECKV_ERANGE => ErrorKind::Range,
            sys::SPECKV_ENOTPOOL => ErrorKind::NotPool,
            sys::SPECKV_EURI => ErrorKind::Uri,
            sys::SPECKV_ENOTSUP => ErrorKind::NotSupported,
            sys::SPECKV_ESTRUCT => ErrorKind::Struct,
            sys::SPECKV_EINTERNAL => ErrorKind::Internal,
            sys::SPECKV_EQUOTA => ErrorKind::Quota,
            c => ErrorKind::Other(c),
        }
    }

    /// The C name of the code, e.g. "SPECKV_EBADHANDLE".
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "SPECKV_EINVAL",
            ErrorKind::OutOfMemory => "SPECKV_ENOMEM",
            ErrorKind::NoSpace => "SPECKV_ENOSPC",
            ErrorKind::NotFound => "SPECKV_ENOENT",
            ErrorKind::AlreadyExists => "SPECKV_EEXIST",
            ErrorKind::BadHandle => "SPECKV_EBADHANDLE",
            ErrorKind::Corrupt => "SPECKV_ECORRUPT",
            ErrorKind::Version => "SPECKV_EVERSION",
            ErrorKind::Io => "SPECKV_EIO",
            ErrorKind::Permission => "SPECKV_EPERM",
            ErrorKind::Busy => "SPECKV_EBUSY",
            ErrorKind::Range => "SPECKV_ERANGE",
            ErrorKind::NotPool => "SPECKV_ENOTPOOL",
            ErrorKind::Uri => "SPECKV_EURI",
            ErrorKind::NotSupported => "SPECKV_ENOTSUP",
            ErrorKind::Struct => "SPECKV_ESTRUCT",
            ErrorKind::Internal => "SPECKV_EINTERNAL",
            ErrorKind::Quota => "SPECKV_EQUOTA",
            ErrorKind::Other(_) => "SPECKV_E?",
        }
    }
}

/// A failed call: the library's status code and the detail message
/// (`speckv_errmsg()`, or `speckv_strerror()` when the library gave none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: i32,
    pub message: String,
}

impl Error {
    /// An error made by the binding itself (no library call failed).
    pub fn new(code: i32, message: impl Into<String>) -> Error {
        Error { code, message: message.into() }
    }

    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_code(self.code)
    }

    /// Captures the detail of the last failure on this thread.
    fn last(api: &sys::Api, code: c_int) -> Error {
        // SAFETY: both return static or thread-local NUL-terminated text, never NULL.
        let msg = unsafe { cstr((api.speckv_errmsg)()) };
        let msg = if msg.is_empty() { unsafe { cstr((api.speckv_strerror)(code)) } } else { msg };
        Error { code, message: msg }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "speckv: {} ({}): {}", self.kind().name(), self.code, self.message)
    }
}

impl std::error::Error for Error {}

impl From<LoadError> for Error {
    fn from(e: LoadError) -> Error {
        let code = match e {
            LoadError::Version { .. } => sys::SPECKV_EVERSION,
            LoadError::Open(_) => sys::SPECKV_ENOENT,
            LoadError::Symbol(_) => sys::SPECKV_ENOTSUP,
        };
        Error { code, message: e.to_string() }
    }
}

unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

fn check(api: &sys::Api, rc: c_int) -> Result<()> {
    if rc == sys::SPECKV_OK {
        Ok(())
    } else {
        Err(Error::last(api, rc))
    }
}

fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(sys::SPECKV_EINVAL, format!("{} contains a NUL byte", what)))
}

fn api() -> Result<&'static sys::Api> {
    Ok(sys::load()?)
}

/// The loaded library's version as (number, text), e.g. (100, "0.1.0").
pub fn library_version() -> Result<(u32, String)> {
    let a = api()?;
    // SAFETY: no arguments; static text.
    unsafe { Ok(((a.speckv_version_number)(), cstr((a.speckv_version_string)()))) }
}

/// The library's static text for a status code.
pub fn strerror(code: i32) -> Result<String> {
    let a = api()?;
    // SAFETY: never NULL, static.
    Ok(unsafe { cstr((a.speckv_strerror)(code)) })
}

// -------------------------------------------------------------------- config

/// Log levels of [`Config::set_log`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

type LogSink = Box<dyn Fn(LogLevel, &str) + Send + Sync + 'static>;

unsafe extern "C" fn log_trampoline(user: *mut c_void, level: c_int, msg: *const c_char) {
    if user.is_null() || msg.is_null() {
        return;
    }
    let sink = &*(user as *const LogSink);
    let text = CStr::from_ptr(msg).to_string_lossy();
    let lvl = match level {
        sys::SPECKV_LOG_ERROR => LogLevel::Error,
        sys::SPECKV_LOG_WARN => LogLevel::Warn,
        sys::SPECKV_LOG_INFO => LogLevel::Info,
        _ => LogLevel::Debug,
    };
    // A panic must not unwind into C.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(lvl, &text)));
}

/// Settings used when opening a pool (keys as in the TOML file, see
/// docs/config.md). `Send` but not `Sync`: the header allows one thread at a time.
pub struct Config {
    raw: NonNull<sys::speckv_config>,
    api: &'static sys::Api,
    log: Option<Arc<LogSink>>,
}

// SAFETY: speckv.h: a config may move between threads but must not be used
// concurrently; &mut self methods and !Sync enforce that.
unsafe impl Send for Config {}

impl Config {
    /// A config holding the defaults.
    pub fn new() -> Result<Config> {
        let api = api()?;
        let mut p = ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check(api, unsafe { (api.speckv_config_new)(&mut p) })?;
        match NonNull::new(p) {
            Some(raw) => Ok(Config { raw, api, log: None }),
            None => Err(Error::new(sys::SPECKV_EINTERNAL, "speckv_config_new returned NULL")),
        }
    }

    pub fn set_int(&mut self, key: &str, value: i64) -> Result<()> {
        let k = c_string("key", key)?;
        // SAFETY: live config, NUL-terminated key.
        check(self.api, unsafe { (self.api.speckv_config_set_int)(self.raw.as_ptr(), k.as_ptr(), value) })
    }

    /// Sets a string key; integer keys accept size suffixes ("8G").
    pub fn set_str(&mut self, key: &str, value: &str) -> Result<()> {
        let k = c_string("key", key)?;
        let v = c_string("value", value)?;
        // SAFETY: as set_int.
        check(self.api, unsafe { (self.api.speckv_config_set_str)(self.raw.as_ptr(), k.as_ptr(), v.as_ptr()) })
    }

    pub fn get_int(&self, key: &str) -> Result<i64> {
        let k = c_string("key", key)?;
        let mut v = 0i64;
        // SAFETY: as set_int, out-pointer to a local.
        check(self.api, unsafe { (self.api.speckv_config_get_int)(self.raw.as_ptr(), k.as_ptr(), &mut v) })?;
        Ok(v)
    }

    /// (min, max, default) of an integer key.
    pub fn bounds(key: &str) -> Result<(i64, i64, i64)> {
        let api = api()?;
        let k = c_string("key", key)?;
        let (mut lo, mut hi, mut d) = (0i64, 0i64, 0i64);
        // SAFETY: out-pointers to locals.
        check(api, unsafe { (api.speckv_config_bounds)(k.as_ptr(), &mut lo, &mut hi, &mut d) })?;
        Ok((lo, hi, d))
    }

    pub fn load_toml(&mut self, path: &str) -> Result<()> {
        let p = c_string("path", path)?;
        // SAFETY: live config, NUL-terminated path.
        check(self.api, unsafe { (self.api.speckv_config_load_toml)(self.raw.as_ptr(), p.as_ptr()) })
    }

    pub fn load_toml_str(&mut self, text: &str) -> Result<()> {
        // SAFETY: pointer + length of a live &str.
        check(self.api, unsafe {
            (self.api.speckv_config_load_toml_string)(self.raw.as_ptr(), text.as_ptr() as *const c_char, text.len())
        })
    }

    /// Routes the log of pools opened with this config to `sink`, which may
    /// be called from library threads. Each pool keeps the sink alive for as
    /// long as it is open.
    pub fn set_log<F>(&mut self, sink: F) -> Result<()>
    where
        F: Fn(LogLevel, &str) + Send + Sync + 'static,
    {
        let b: Arc<LogSink> = Arc::new(Box::new(sink));
        let user = Arc::as_ptr(&b) as *mut c_void;
        // SAFETY: `user` points at the LogSink kept alive by self.log and by
        // every pool opened with this config.
        check(self.api, unsafe {
            (self.api.speckv_config_set_log)(self.raw.as_ptr(), Some(log_trampoline), user)
        })?;
        self.log = Some(b);
        Ok(())
    }

    /// Stops logging (the default).
    pub fn clear_log(&mut self) -> Result<()> {
        // SAFETY: live config.
        check(self.api, unsafe { (self.api.speckv_config_set_log)(self.raw.as_ptr(), None, ptr::null_mut()) })?;
        self.log = None;
        Ok(())
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        // SAFETY: owned, freed once.
        unsafe { (self.api.speckv_config_free)(self.raw.as_ptr()) }
    }
}

// ---------------------------------------------------------------------- pool

/// A block handle: a `u64` that stays valid across processes attached to the
/// same pool until the block is freed. Never 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(pub u64);

impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Element type of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    Opaque,
    Fp16,
    Bf16,
    Fp32,
}

impl DType {
    fn raw(self) -> c_int {
        match self {
            DType::Opaque => sys::SPECKV_DTYPE_OPAQUE,
            DType::Fp16 => sys::SPECKV_DTYPE_FP16,
            DType::Bf16 => sys::SPECKV_DTYPE_BF16,
            DType::Fp32 => sys::SPECKV_DTYPE_FP32,
        }
    }
}

/// `SPECKV_HINT_HAS_HASH`: set by [`Hint`] itself when `content_hash` is `Some`.
pub const HINT_HAS_HASH: u32 = sys::SPECKV_HINT_HAS_HASH;
/// `SPECKV_HINT_KEYS`: the block holds keys; its pages use config
/// `codec.key_mode` instead of `codec.mode` (docs/codec.md §17).
pub const HINT_KEYS: u32 = sys::SPECKV_HINT_KEYS;
/// `SPECKV_HINT_VALUES`: the block holds values; its pages use config
/// `codec.value_mode` instead of `codec.mode`.
pub const HINT_VALUES: u32 = sys::SPECKV_HINT_VALUES;
/// `SPECKV_HINT_SPAN` (prefetch hints): the hinted unit's reader reads from the pool only
/// the blocks that start before `token_count` (docs/tiers.md "Read spans").
pub const HINT_SPAN: u32 = sys::SPECKV_HINT_SPAN;

/// What a block holds (placement, prefetch, sharing, codec). `Default` is all zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hint {
    pub tenant: u64,
    pub request: u64,
    pub layer: u32,
    pub token_pos: u64,
    pub token_count: u64,
    /// The prefix-block hash (sets SPECKV_HINT_HAS_HASH), e.g. from [`block_hash`].
    pub content_hash: Option<BlockHash>,
    /// Further `SPECKV_HINT_*` flags: [`HINT_KEYS`], [`HINT_VALUES`].
    /// [`HINT_HAS_HASH`] is ignored here: it follows `content_hash`.
    pub flags: u32,
}

impl Hint {
    fn raw(&self) -> sys::speckv_hint {
        sys::speckv_hint {
            struct_size: std::mem::size_of::<sys::speckv_hint>(),
            tenant: self.tenant,
            request: self.request,
            layer: self.layer,
            flags: (self.flags & !sys::SPECKV_HINT_HAS_HASH)
                | if self.content_hash.is_some() { sys::SPECKV_HINT_HAS_HASH } else { 0 },
            token_pos: self.token_pos,
            token_count: self.token_count,
            content_hash: self.content_hash.unwrap_or([0; HASH_BYTES]),
        }
    }
}

/// Counters of [`Pool::stats`]; pool-wide fields come from the shared pool,
/// the others count this process only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
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
    /// Sharing, pool-wide: published blocks in the pool now.
    pub blocks_published: u64,
    /// Bytes of those blocks.
    pub shared_bytes: u64,
    /// `lookup` calls, ever.
    pub lookups: u64,
    /// ... that found a block.
    pub lookup_hits: u64,
    /// Bytes not stored again thanks to sharing (lookup hits and publish collisions).
    pub dedup_bytes: u64,
    /// Unreferenced published blocks evicted for room.
    pub evictions: u64,
    /// Blocks of dead processes reclaimed.
    pub reclaimed_blocks: u64,
    /// Tiers and prefetch, this process: pages served from the prefetch
    /// buffer (L2). `cache_hits` are the L1 hits.
    pub l2_hits: u64,
    /// Pages read synchronously from the pool (in neither L1 nor L2).
    pub sync_reads: u64,
    /// Pages the prefetcher brought into L2.
    pub prefetch_pages: u64,
    /// Prefetched pages read before they left L2.
    pub prefetch_used: u64,
    /// Prefetched pages that left L2 unread.
    pub prefetch_wasted: u64,
    /// Bytes of those pages.
    pub prefetch_wasted_bytes: u64,
    /// Hints naming no known block (unknown request, freed block).
    pub prefetch_ignored: u64,
    /// Hints dropped because the hint queue was full.
    pub prefetch_dropped: u64,
    /// Bytes moved L3 -> L2 by the prefetcher.
    pub link_bytes: u64,
    /// [`Pool::translate`] answers from the per-process TLB ...
    pub tlb_hits: u64,
    /// ... and from the pool's translation index.
    pub tlb_misses: u64,
    /// The prefetcher's aggressiveness beta in parts per million (1000000 = full).
    pub prefetch_beta_ppm: u32,
    /// Depth k (units ahead) of the prefetcher's last plan.
    pub prefetch_depth: u32,
    /// Codec, this process (docs/codec.md §17; config `codec.mode`): pages
    /// stored as codec records (encoded by the write that completed them).
    pub codec_pages_encoded: u64,
    /// Their bytes in clear.
    pub codec_raw_bytes: u64,
    /// Their record bytes (what L3 holds and the link carries).
    pub codec_stored_bytes: u64,
    /// Pages the codec left in clear (NaN/Inf, no gain, record larger than the page).
    pub codec_pages_bypassed: u64,
    /// Coded pages decoded on a read, prefetch or pin.
    pub codec_pages_decoded: u64,
    /// L4 cold tier, the whole pool (docs/tiers.md §9; config `cold.path`):
    /// blocks in L4 now (their pages free in the pool, their bytes in the L4 file).
    pub l4_blocks: u64,
    /// Their bytes.
    pub l4_bytes: u64,
    /// Blocks moved L3 -> L4, ever, by any process.
    pub l4_demotions: u64,
    /// Blocks moved back L4 -> L3, ever.
    pub l4_promotions: u64,
    /// Demotions that failed (the block stayed in the pool, whole).
    pub l4_demote_failures: u64,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl Stats {
    /// `l2_hits / (l2_hits + sync_reads)`; 0 before any read.
    pub fn hit_rate(&self) -> f64 {
        ratio(self.l2_hits, self.l2_hits + self.sync_reads)
    }

    /// `prefetch_used / (prefetch_used + prefetch_wasted)`; 0 before any prefetch.
    pub fn prefetch_precision(&self) -> f64 {
        ratio(self.prefetch_used, self.prefetch_used + self.prefetch_wasted)
    }

    /// `tlb_hits / (tlb_hits + tlb_misses)`; 0 before any translation.
    pub fn tlb_hit_rate(&self) -> f64 {
        ratio(self.tlb_hits, self.tlb_hits + self.tlb_misses)
    }

    /// `codec_raw_bytes / codec_stored_bytes` (the JSON's `codec_ratio`);
    /// 0 before any page is encoded.
    pub fn codec_ratio(&self) -> f64 {
        ratio(self.codec_raw_bytes, self.codec_stored_bytes)
    }
}

// ------------------------------------------------------------ page selection

/// Geometry and policy of [`Pool::select`] and [`Pool::attend`]
/// (`speckv_select_params`; docs/selection.md). A K row holds
/// `kv_heads * head_dim` FP16 or FP32 keys; the query has
/// `kv_heads * q_per_kv` heads of `head_dim` floats, head-major.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SelectParams {
    pub kv_heads: u32,
    pub head_dim: u32,
    /// Query heads per KV head (GQA group size), >= 1.
    pub q_per_kv: u32,
    /// Pages to select, >= 1 (the forced recent pages included).
    pub budget: u32,
    /// The most recent pages always selected; `None` = config `select.recent`.
    pub recent: Option<u32>,
    /// Steady selection: a page selected by the previous call for the same
    /// (tenant, request, layer) stays while its score is >= the cut - band
    /// (logit units); `None` = config `select.band_milli`.
    pub band: Option<f32>,
    /// Logit scale; `None` = 1/sqrt(head_dim).
    pub scale: Option<f32>,
    /// Tokens `[0, context_tokens)` exist; later rows are ignored.
    pub context_tokens: u64,
}

impl Default for SelectParams {
    /// One KV head, one query head per KV head, budget 1, config defaults,
    /// no context: set the geometry, budget and `context_tokens`.
    fn default() -> Self {
        SelectParams {
            kv_heads: 1,
            head_dim: 0,
            q_per_kv: 1,
            budget: 1,
            recent: None,
            band: None,
            scale: None,
            context_tokens: 0,
        }
    }
}

impl SelectParams {
    /// Query heads: `kv_heads * q_per_kv`.
    pub fn q_heads(&self) -> u64 {
        u64::from(self.kv_heads) * u64::from(self.q_per_kv)
    }

    /// Floats of a query: `q_heads() * head_dim`.
    pub fn q_len(&self) -> u64 {
        self.q_heads() * u64::from(self.head_dim)
    }

    fn raw(&self) -> sys::speckv_select_params {
        sys::speckv_select_params {
            struct_size: std::mem::size_of::<sys::speckv_select_params>(),
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            q_per_kv: self.q_per_kv,
            budget: self.budget,
            recent: self.recent.unwrap_or(u32::MAX),
            band: self.band.unwrap_or(-1.0),
            scale: self.scale.unwrap_or(0.0),
            context_tokens: self.context_tokens,
        }
    }
}

/// One K page of a selection (`speckv_page_ref`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PageRef {
    /// The K block holding the page.
    pub block: Handle,
    /// Byte offset of the page in the block.
    pub offset: u64,
    /// First token of the page.
    pub token_pos: u64,
    /// Tokens of the page below `context_tokens`.
    pub tokens: u32,
    /// An upper bound of the largest logit any query head gets on the
    /// page's keys; `+inf` for a page without a summary yet (e.g. the one
    /// being appended).
    pub score: f32,
}

impl PageRef {
    fn from_raw(r: &sys::speckv_page_ref) -> PageRef {
        PageRef { block: Handle(r.block), offset: r.offset, token_pos: r.token_pos, tokens: r.tokens, score: r.score }
    }

    fn raw(&self) -> sys::speckv_page_ref {
        sys::speckv_page_ref {
            block: self.block.0,
            offset: self.offset,
            token_pos: self.token_pos,
            tokens: self.tokens,
            score: self.score,
        }
    }

    /// The same page (block and offset; what [`Pool::attend`] matches on).
    pub fn same_page(&self, other: &PageRef) -> bool {
        self.block == other.block && self.offset == other.offset
    }
}

/// A partial attention result per query head (`speckv_partial`), mergeable
/// exactly with [`Partial::merge`]: `out[h * head_dim ..]` is the
/// softmax-weighted mean of V over the pages it covers, `max_score[h]` the
/// largest logit, `sum_exp[h]` the sum of `exp(logit - max_score[h])`.
#[derive(Clone, Debug, PartialEq)]
pub struct Partial {
    /// `q_heads * head_dim` floats.
    pub out: Vec<f32>,
    /// `q_heads` floats.
    pub max_score: Vec<f32>,
    /// `q_heads` floats.
    pub sum_exp: Vec<f32>,
}

impl Partial {
    /// The result over no page (the identity of the merge): out 0, max -inf, sum 0.
    pub fn empty(q_heads: usize, head_dim: usize) -> Partial {
        Partial {
            out: vec![0.0; q_heads * head_dim],
            max_score: vec![f32::NEG_INFINITY; q_heads],
            sum_exp: vec![0.0; q_heads],
        }
    }

    /// Query heads (`max_score.len()`).
    pub fn q_heads(&self) -> usize {
        self.max_score.len()
    }

    /// `out.len() / q_heads()` (0 when there is no head).
    pub fn head_dim(&self) -> usize {
        if self.max_score.is_empty() {
            0
        } else {
            self.out.len() / self.max_score.len()
        }
    }

    /// The exact merge of two partials over disjoint page sets
    /// (`speckv_merge_partials`, the flash-decoding merge). Both must have
    /// the same shape; anything else is `InvalidArgument`.
    pub fn merge(&self, other: &Partial) -> Result<Partial> {
        merge_partials(self, other)
    }

    fn check_shape(&self, what: &str) -> Result<(u32, u32)> {
        let h = self.max_score.len();
        let bad = |m: String| Error::new(sys::SPECKV_EINVAL, format!("partial {}: {}", what, m));
        if self.sum_exp.len() != h {
            return Err(bad(format!("{} max_score but {} sum_exp", h, self.sum_exp.len())));
        }
        if h == 0 || self.out.is_empty() || self.out.len() % h != 0 {
            return Err(bad(format!(
                "out has {} floats for {} query heads (need q_heads * head_dim, both > 0)",
                self.out.len(),
                h
            )));
        }
        let d = self.out.len() / h;
        match (u32::try_from(h), u32::try_from(d)) {
            (Ok(h), Ok(d)) => Ok((h, d)),
            _ => Err(bad(format!("{} heads x {} head_dim is too large", h, d))),
        }
    }

    /// The raw view; the arrays stay owned by `self` (the C side writes
    /// only through a `&mut` borrow, see the callers).
    fn raw(&mut self) -> sys::speckv_partial {
        sys::speckv_partial {
            struct_size: std::mem::size_of::<sys::speckv_partial>(),
            out: self.out.as_mut_ptr(),
            max_score: self.max_score.as_mut_ptr(),
            sum_exp: self.sum_exp.as_mut_ptr(),
        }
    }
}

/// The exact merge of partials `a` and `b` over disjoint page sets, as a
/// new partial: `M = max(m_a, m_b)`, `w_i = sum_i exp(m_i - M)`,
/// `o = (w_a o_a + w_b o_b) / (w_a + w_b)`. The shapes must agree.
pub fn merge_partials(a: &Partial, b: &Partial) -> Result<Partial> {
    let (h, d) = a.check_shape("a")?;
    let (hb, db) = b.check_shape("b")?;
    if (h, d) != (hb, db) {
        return Err(Error::new(
            sys::SPECKV_EINVAL,
            format!("partials differ in shape: {} x {} and {} x {}", h, d, hb, db),
        ));
    }
    let api = api()?;
    let mut out = Partial::empty(h as usize, d as usize);
    // The C side only reads a and b; the *mut in its struct is the header's.
    let ra = sys::speckv_partial {
        struct_size: std::mem::size_of::<sys::speckv_partial>(),
        out: a.out.as_ptr() as *mut f32,
        max_score: a.max_score.as_ptr() as *mut f32,
        sum_exp: a.sum_exp.as_ptr() as *mut f32,
    };
    let rb = sys::speckv_partial {
        struct_size: std::mem::size_of::<sys::speckv_partial>(),
        out: b.out.as_ptr() as *mut f32,
        max_score: b.max_score.as_ptr() as *mut f32,
        sum_exp: b.sum_exp.as_ptr() as *mut f32,
    };
    let mut ro = out.raw();
    // SAFETY: every array has the q_heads * head_dim / q_heads floats the
    // call reads or writes (checked above); `out` is exclusively ours.
    check(api, unsafe { (api.speckv_merge_partials)(h, d, &ra, &rb, &mut ro) })?;
    Ok(out)
}

// ------------------------------------------------------------------- sharing

/// Bytes of a block content hash (`SPECKV_HASH_BYTES`).
pub const HASH_BYTES: usize = sys::SPECKV_HASH_BYTES;

/// A block content hash, as [`block_hash`] computes it.
pub type BlockHash = [u8; HASH_BYTES];

/// The algorithm of [`block_hash`] (docs/sharing.md gives the exact bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashAlgo {
    /// SHA-256 of speckv's binary encoding, salted with the tenant.
    Native,
    /// SHA-256 of canonical CBOR `[parent, [tokens...], extra]`, as vLLM's
    /// `sha256_cbor` prefix-cache hash (the tenant is not used).
    VllmCbor,
}

impl HashAlgo {
    fn raw(self) -> c_int {
        match self {
            HashAlgo::Native => sys::SPECKV_HASH_NATIVE,
            HashAlgo::VllmCbor => sys::SPECKV_HASH_VLLM_CBOR,
        }
    }
}

/// The chained hash of one prefix block: `H(parent, tokens, extra)`. The
/// same inputs give the same 32 bytes in every process, binding and machine.
/// `parent` is the previous block's hash (`None` for the first block).
/// `extra` is what else decides the KV (model, LoRA, ...): raw bytes for
/// [`HashAlgo::Native`]; exactly one CBOR data item for
/// [`HashAlgo::VllmCbor`], where `None` means CBOR null. `tenant` salts
/// [`HashAlgo::Native`] only.
///
/// ```no_run
/// use speckv::{block_hash, HashAlgo};
/// let tokens: Vec<u32> = (0..32).collect();
/// let h0 = block_hash(HashAlgo::Native, 7, None, &tokens[..16], None)?;
/// let h1 = block_hash(HashAlgo::Native, 7, Some(&h0), &tokens[16..], None)?;
/// # Ok::<(), speckv::Error>(())
/// ```
pub fn block_hash(
    algo: HashAlgo,
    tenant: u64,
    parent: Option<&BlockHash>,
    tokens: &[u32],
    extra: Option<&[u8]>,
) -> Result<BlockHash> {
    let api = api()?;
    let mut out = [0u8; HASH_BYTES];
    let (ep, el) = extra.map_or((ptr::null(), 0), |e| (e.as_ptr() as *const c_void, e.len()));
    // SAFETY: every pointer is NULL or points at a live slice of the length
    // passed; `out` has HASH_BYTES bytes.
    check(api, unsafe {
        (api.speckv_block_hash)(
            algo.raw(),
            tenant,
            parent.map_or(ptr::null(), |p| p.as_ptr()),
            tokens.as_ptr(),
            tokens.len(),
            ep,
            el,
            out.as_mut_ptr(),
        )
    })?;
    Ok(out)
}

/// What [`Pool::publish`] did. Either way the caller now holds a reference
/// to [`Published::handle`], released with [`Pool::free`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// The block was published under the hash.
    New(Handle),
    /// The tenant already had this block published (`SPECKV_EEXIST`): this is
    /// that block. The block passed to `publish` stays unpublished: free it.
    Existing(Handle),
}

impl Published {
    /// The published block: the one to read from now on.
    pub fn handle(self) -> Handle {
        match self {
            Published::New(h) | Published::Existing(h) => h,
        }
    }

    /// True if another block was already published under the hash.
    pub fn existed(self) -> bool {
        matches!(self, Published::Existing(_))
    }
}

/// A tenant's page use and cap ([`Pool::tenant_usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantUsage {
    pub pages_used: u64,
    /// The cap; 0 = none.
    pub max_pages: u64,
}

/// An open pool. Closed on drop (use [`Pool::close`] to see the status).
/// `Send + Sync`: speckv.h allows any thread, concurrently.
pub struct Pool {
    raw: NonNull<sys::speckv_pool>,
    api: &'static sys::Api,
    // Keeps the log sink alive while the library may call it.
    _log: Option<Arc<LogSink>>,
}

// SAFETY: speckv.h: "a speckv_pool may be used from any number of threads at once".
unsafe impl Send for Pool {}
unsafe impl Sync for Pool {}

impl Pool {
    /// Opens (attaching or creating) a pool with the default settings, e.g.
    /// `file:/abs/path?size=64M` or `anon:?size=8M`.
    pub fn open(uri: &str) -> Result<Pool> {
        Pool::open_impl(uri, None)
    }

    /// Opens a pool with `cfg`; the pool keeps its own copy of the settings.
    pub fn open_with(uri: &str, cfg: &Config) -> Result<Pool> {
        Pool::open_impl(uri, Some(cfg))
    }

    fn open_impl(uri: &str, cfg: Option<&Config>) -> Result<Pool> {
        let api = api()?;
        let u = c_string("uri", uri)?;
        let craw = cfg.map_or(ptr::null(), |c| c.raw.as_ptr() as *const _);
        let mut p = ptr::null_mut();
        // SAFETY: NUL-terminated uri, live or NULL config, out-pointer to a local.
        check(api, unsafe { (api.speckv_pool_open)(u.as_ptr(), craw, &mut p) })?;
        match NonNull::new(p) {
            Some(raw) => Ok(Pool { raw, api, _log: cfg.and_then(|c| c.log.clone()) }),
            None => Err(Error::new(sys::SPECKV_EINTERNAL, "speckv_pool_open returned NULL")),
        }
    }

    /// Closes the pool and reports the library's status.
    pub fn close(self) -> Result<()> {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: owned; ManuallyDrop keeps Drop from closing it again.
        let rc = unsafe { (me.api.speckv_pool_close)(me.raw.as_ptr()) };
        let r = check(me.api, rc);
        // SAFETY: read once out of the ManuallyDrop, then dropped after the close.
        drop(unsafe { ptr::read(&me._log) });
        r
    }

    fn p(&self) -> *mut sys::speckv_pool {
        self.raw.as_ptr()
    }

    /// Allocates a block of `bytes` bytes (> 0); it reads as zero until written.
    pub fn alloc(&self, bytes: u64, dtype: DType, hint: Option<&Hint>) -> Result<Handle> {
        let h = hint.map(Hint::raw);
        let hp = h.as_ref().map_or(ptr::null(), |h| h as *const _);
        let mut out = 0u64;
        // SAFETY: live pool, hint NULL or a local, out-pointer to a local.
        check(self.api, unsafe { (self.api.speckv_alloc)(self.p(), bytes, dtype.raw(), hp, &mut out) })?;
        Ok(Handle(out))
    }

    /// Frees a block. A double free is reported as `BadHandle`, never acted on.
    /// For a published block it releases one reference this process holds
    /// (from [`Pool::publish`] or [`Pool::lookup`]); the block stays published.
    pub fn free(&self, h: Handle) -> Result<()> {
        // SAFETY: live pool.
        check(self.api, unsafe { (self.api.speckv_free)(self.p(), h.0) })
    }

    /// Copies `src` into the block at `offset`.
    pub fn write(&self, h: Handle, offset: u64, src: &[u8]) -> Result<()> {
        // SAFETY: pointer + length of a live slice.
        check(self.api, unsafe {
            (self.api.speckv_write)(self.p(), h.0, offset, src.as_ptr() as *const c_void, src.len())
        })
    }

    /// Reads `dst.len()` verified bytes of the block at `offset` into `dst`.
    pub fn access(&self, h: Handle, offset: u64, dst: &mut [u8]) -> Result<()> {
        // SAFETY: pointer + length of a live, exclusively borrowed slice.
        check(self.api, unsafe {
            (self.api.speckv_access)(
                self.p(),
                h.0,
                offset,
                dst.as_mut_ptr() as *mut c_void,
                dst.len(),
                sys::SPECKV_ACCESS_DEFAULT,
            )
        })
    }

    /// Reads `len` bytes at `offset` into a new vector.
    pub fn read_vec(&self, h: Handle, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.access(h, offset, &mut v)?;
        Ok(v)
    }

    /// Zero-copy view of the whole verified block, unpinned on drop. The block
    /// cannot be written or freed by this process meanwhile; other processes
    /// are not prevented from writing it in 0.1 (speckv.h).
    pub fn pin(&self, h: Handle) -> Result<Pinned<'_>> {
        let mut p: *const c_void = ptr::null();
        let mut n = 0usize;
        // SAFETY: out-pointers to locals.
        check(self.api, unsafe { (self.api.speckv_pin)(self.p(), h.0, &mut p, &mut n) })?;
        Ok(Pinned { pool: self, handle: h, ptr: p as *const u8, len: n, _not_send: PhantomData })
    }

    /// Moves a block to the L4 cold tier now (`speckv_demote`, docs/tiers.md
    /// §9): its bytes go to the L4 file and its pages in the pool are freed.
    /// The handle stays valid: the next access, pin, write or prefetch brings
    /// the block back. `Ok` also when it is in L4 already. Only the pool
    /// handle holding the L4 tier (opened with config `cold.path`) can do
    /// this; any other gets [`ErrorKind::NotSupported`]. A pinned block, or
    /// one referenced by another process, is [`ErrorKind::Busy`]; a full L4
    /// file [`ErrorKind::NoSpace`]; a failed L4 write [`ErrorKind::Io`] (the
    /// block stays in the pool, whole).
    ///
    /// ```no_run
    /// let mut cfg = speckv::Config::new()?;
    /// cfg.set_str("cold.path", "/mnt/nvme/engine.l4")?;
    /// let pool = speckv::Pool::open_with("file:/dev/shm/engine.pool?size=1G", &cfg)?;
    /// let h = pool.alloc(4096, speckv::DType::Fp16, None)?;
    /// pool.demote(h)?; // pool.read_vec(h, ..) brings it back
    /// # Ok::<(), speckv::Error>(())
    /// ```
    pub fn demote(&self, h: Handle) -> Result<()> {
        // SAFETY: live pool.
        check(self.api, unsafe { (self.api.speckv_demote)(self.p(), h.0) })
    }

    /// The size of a block in bytes (`speckv_block_info`: the data is neither
    /// read nor verified).
    pub fn block_len(&self, h: Handle) -> Result<u64> {
        let mut m = sys::speckv_block_meta {
            struct_size: std::mem::size_of::<sys::speckv_block_meta>(),
            ..Default::default()
        };
        // SAFETY: `m` is a live, correctly sized out-struct.
        check(self.api, unsafe { (self.api.speckv_block_info)(self.p(), h.0, &mut m) })?;
        Ok(m.bytes)
    }

    /// Announces that `hint.request` is about to run `hint.layer` at `hint.token_pos`.
    pub fn prefetch(&self, hint: &Hint) -> Result<()> {
        let h = hint.raw();
        // SAFETY: live pool, hint is a local.
        check(self.api, unsafe { (self.api.speckv_prefetch)(self.p(), &h) })
    }

    /// Address translation: the live block allocated with a hint of
    /// (`tenant`, `request`, `layer`) whose token range
    /// `[token_pos, token_pos + token_count)` covers `token_pos`, and the
    /// token's index inside that block; `None` when no block covers it
    /// (`SPECKV_ENOENT`: never allocated with such a hint, or freed; a pool
    /// opened with "tenant.id" sees only its own tenant's blocks).
    /// No reference is taken. A per-process TLB answers repeated questions
    /// (`Stats::tlb_hits`, `tlb_misses`).
    ///
    /// ```no_run
    /// # let pool = speckv::Pool::open("anon:?size=8M")?;
    /// if let Some((h, off)) = pool.translate(0, 7, 3, 20)? {
    ///     // token 20 of request 7, layer 3 is token `off` of block `h`
    /// #   let _ = (h, off);
    /// }
    /// # Ok::<(), speckv::Error>(())
    /// ```
    pub fn translate(&self, tenant: u64, request: u64, layer: u32, token_pos: u64) -> Result<Option<(Handle, u64)>> {
        let (mut h, mut off) = (0u64, 0u64);
        // SAFETY: live pool, out-pointers to locals.
        let rc = unsafe { (self.api.speckv_translate)(self.p(), tenant, request, layer, token_pos, &mut h, &mut off) };
        match rc {
            sys::SPECKV_OK => Ok(Some((Handle(h), off))),
            sys::SPECKV_ENOENT => Ok(None),
            rc => Err(Error::last(self.api, rc)),
        }
    }

    /// Near-memory page selection (`speckv_select`, docs/selection.md): the
    /// `params.budget` K pages of (`tenant`, `request`, `layer`) that matter
    /// most for query `q` (`params.q_len()` floats, head-major), in token
    /// order: the `recent` last pages, the pages the steady rule keeps from
    /// this pool handle's previous call for the same (tenant, request,
    /// layer), then the best upper bounds. All the pages when there are
    /// fewer than the budget.
    ///
    /// The K pages are those of live blocks allocated with [`HINT_KEYS`] and
    /// that (tenant, request, layer); they have summaries only in a pool
    /// created with config `pool.summary_bytes` >= 16 + 4 * kv_heads * head_dim
    /// and written with `select.channels` = kv_heads * head_dim (else
    /// `NotSupported`). `NotFound` when there is no K page.
    ///
    /// ```no_run
    /// # let pool = speckv::Pool::open("anon:?size=32M")?;
    /// let params = speckv::SelectParams {
    ///     kv_heads: 2, head_dim: 32, q_per_kv: 2, budget: 8, context_tokens: 1000,
    ///     ..Default::default()
    /// };
    /// let q = vec![0.1f32; params.q_len() as usize];
    /// let gpu_pages = pool.select(0, 7, 3, &q, &params)?;
    /// let near = pool.attend(0, 7, 3, &q, &params, &gpu_pages)?; // the rest, next to the pool
    /// # let _ = near;
    /// # Ok::<(), speckv::Error>(())
    /// ```
    pub fn select(
        &self,
        tenant: u64,
        request: u64,
        layer: u32,
        q: &[f32],
        params: &SelectParams,
    ) -> Result<Vec<PageRef>> {
        self.select_counted(tenant, request, layer, q, params).map(|(v, _)| v)
    }

    /// [`Pool::select`], and how many K pages there are in all (below
    /// `params.context_tokens`).
    pub fn select_counted(
        &self,
        tenant: u64,
        request: u64,
        layer: u32,
        q: &[f32],
        params: &SelectParams,
    ) -> Result<(Vec<PageRef>, usize)> {
        let sp = params.raw();
        // The selection has min(budget, pages) refs. Start small so that a
        // budget of "everything" (u32::MAX) allocates no more than the pages
        // there are; SPECKV_ERANGE changes nothing and says how many there are.
        let mut cap = (params.budget as usize).clamp(1, 256);
        loop {
            let mut out = vec![sys::speckv_page_ref::default(); cap];
            let (mut n, mut pages) = (0usize, 0usize);
            // SAFETY: q and out are live slices of the lengths passed, sp and
            // the counters are locals.
            let rc = unsafe {
                (self.api.speckv_select)(
                    self.p(),
                    tenant,
                    request,
                    layer,
                    q.as_ptr(),
                    q.len(),
                    &sp,
                    out.as_mut_ptr(),
                    out.len(),
                    &mut n,
                    &mut pages,
                )
            };
            if rc == sys::SPECKV_ERANGE {
                let need = pages.min(params.budget as usize);
                if need > cap {
                    cap = need;
                    continue;
                }
            }
            check(self.api, rc)?;
            out.truncate(n.min(cap));
            return Ok((out.iter().map(PageRef::from_raw).collect(), pages));
        }
    }

    /// Attention of `q` over the K/V pages of (`tenant`, `request`, `layer`)
    /// that are not in `exclude` (matched by block and offset; typically
    /// what [`Pool::select`] returned and the GPU attends itself), computed
    /// next to the pool (`speckv_attend`). The V rows are those of blocks
    /// allocated with [`HINT_VALUES`], same layout. Merge the result with the
    /// GPU's partial with [`Partial::merge`].
    pub fn attend(
        &self,
        tenant: u64,
        request: u64,
        layer: u32,
        q: &[f32],
        params: &SelectParams,
        exclude: &[PageRef],
    ) -> Result<Partial> {
        let sp = params.raw();
        let ex: Vec<sys::speckv_page_ref> = exclude.iter().map(PageRef::raw).collect();
        // The library writes only when q.len() == q_heads * head_dim, so
        // arrays sized from q itself are always large enough.
        let d = params.head_dim as usize;
        let heads = if d == 0 { 0 } else { q.len() / d };
        let mut part = Partial {
            out: vec![0.0; q.len().max(1)],
            max_score: vec![0.0; heads.max(1)],
            sum_exp: vec![0.0; heads.max(1)],
        };
        let mut raw = part.raw();
        // SAFETY: q, ex and the partial's arrays are live for the call, with
        // the lengths passed or (partial) at least what the call writes.
        check(self.api, unsafe {
            (self.api.speckv_attend)(
                self.p(),
                tenant,
                request,
                layer,
                q.as_ptr(),
                q.len(),
                &sp,
                if ex.is_empty() { ptr::null() } else { ex.as_ptr() },
                ex.len(),
                &mut raw,
            )
        })?;
        part.out.truncate(q.len());
        part.max_score.truncate(heads);
        part.sum_exp.truncate(heads);
        Ok(part)
    }

    /// Publishes a written block under `hash` for its tenant (the tenant of
    /// its alloc hint); the block becomes immutable and findable with
    /// [`Pool::lookup`] from every process attached to the pool.
    ///
    /// [`Published::New`]: `h` is now published and this process holds a
    /// reference to it. [`Published::Existing`]: the tenant already had a
    /// block under `hash` (`SPECKV_EEXIST`); `h` stays unpublished and still
    /// belongs to the caller (free it), and the returned handle is the
    /// published block, on which this process now holds a reference. Either
    /// way, release the reference with [`Pool::free`].
    pub fn publish(&self, h: Handle, hash: &BlockHash) -> Result<Published> {
        let mut canonical = 0u64;
        // SAFETY: live pool, `hash` is HASH_BYTES long, out-pointer to a local.
        let rc = unsafe { (self.api.speckv_publish)(self.p(), h.0, hash.as_ptr(), &mut canonical) };
        match rc {
            sys::SPECKV_OK => Ok(Published::New(Handle(canonical))),
            sys::SPECKV_EEXIST => Ok(Published::Existing(Handle(canonical))),
            rc => Err(Error::last(self.api, rc)),
        }
    }

    /// The block `tenant` published under `hash`, with a reference taken on
    /// it (release it with [`Pool::free`]); `None` if the tenant has none.
    /// Other tenants' blocks are never found.
    pub fn lookup(&self, tenant: u64, hash: &BlockHash) -> Result<Option<Handle>> {
        let mut out = 0u64;
        // SAFETY: live pool, `hash` is HASH_BYTES long, out-pointer to a local.
        let rc = unsafe { (self.api.speckv_lookup)(self.p(), tenant, hash.as_ptr(), &mut out) };
        match rc {
            sys::SPECKV_OK => Ok(Some(Handle(out))),
            sys::SPECKV_ENOENT => Ok(None),
            rc => Err(Error::last(self.api, rc)),
        }
    }

    /// Caps the pages `tenant`'s blocks may occupy, for every process of the
    /// pool; 0 removes the cap. An alloc over the cap fails with
    /// [`ErrorKind::Quota`].
    pub fn set_tenant_quota(&self, tenant: u64, max_pages: u64) -> Result<()> {
        // SAFETY: live pool.
        check(self.api, unsafe { (self.api.speckv_tenant_set_quota)(self.p(), tenant, max_pages) })
    }

    /// The pages `tenant`'s blocks occupy now and its cap.
    pub fn tenant_usage(&self, tenant: u64) -> Result<TenantUsage> {
        let (mut used, mut max) = (0u64, 0u64);
        // SAFETY: out-pointers to locals.
        check(self.api, unsafe { (self.api.speckv_tenant_usage)(self.p(), tenant, &mut used, &mut max) })?;
        Ok(TenantUsage { pages_used: used, max_pages: max })
    }

    pub fn stats(&self) -> Result<Stats> {
        let mut s = sys::speckv_pool_stats {
            struct_size: std::mem::size_of::<sys::speckv_pool_stats>(),
            ..Default::default()
        };
        // SAFETY: out-pointer to a local with struct_size set.
        check(self.api, unsafe { (self.api.speckv_stats)(self.p(), &mut s) })?;
        Ok(Stats {
            pool_bytes: s.pool_bytes,
            page_size: s.page_size,
            pages_total: s.pages_total,
            pages_used: s.pages_used,
            blocks_live: s.blocks_live,
            blocks_max: s.blocks_max,
            allocs: s.allocs,
            frees: s.frees,
            bytes_written: s.bytes_written,
            bytes_read: s.bytes_read,
            reads: s.reads,
            cache_hits: s.cache_hits,
            cache_misses: s.cache_misses,
            checksum_failures: s.checksum_failures,
            prefetch_hints: s.prefetch_hints,
            attached: s.attached,
            blocks_published: s.blocks_published,
            shared_bytes: s.shared_bytes,
            lookups: s.lookups,
            lookup_hits: s.lookup_hits,
            dedup_bytes: s.dedup_bytes,
            evictions: s.evictions,
            reclaimed_blocks: s.reclaimed_blocks,
            l2_hits: s.l2_hits,
            sync_reads: s.sync_reads,
            prefetch_pages: s.prefetch_pages,
            prefetch_used: s.prefetch_used,
            prefetch_wasted: s.prefetch_wasted,
            prefetch_wasted_bytes: s.prefetch_wasted_bytes,
            prefetch_ignored: s.prefetch_ignored,
            prefetch_dropped: s.prefetch_dropped,
            link_bytes: s.link_bytes,
            tlb_hits: s.tlb_hits,
            tlb_misses: s.tlb_misses,
            prefetch_beta_ppm: s.prefetch_beta_ppm,
            prefetch_depth: s.prefetch_depth,
            codec_pages_encoded: s.codec_pages_encoded,
            codec_raw_bytes: s.codec_raw_bytes,
            codec_stored_bytes: s.codec_stored_bytes,
            codec_pages_bypassed: s.codec_pages_bypassed,
            codec_pages_decoded: s.codec_pages_decoded,
            l4_blocks: s.l4_blocks,
            l4_bytes: s.l4_bytes,
            l4_demotions: s.l4_demotions,
            l4_promotions: s.l4_promotions,
            l4_demote_failures: s.l4_demote_failures,
        })
    }

    /// The stats as the library's JSON object.
    pub fn stats_json(&self) -> Result<String> {
        let mut buf = vec![0u8; 512];
        loop {
            let mut needed = 0usize;
            // SAFETY: pointer + capacity of a live buffer.
            let rc = unsafe {
                (self.api.speckv_stats_json)(self.p(), buf.as_mut_ptr() as *mut c_char, buf.len(), &mut needed)
            };
            if rc == sys::SPECKV_ERANGE && needed + 1 > buf.len() {
                buf.resize(needed + 1, 0);
                continue;
            }
            check(self.api, rc)?;
            buf.truncate(needed.min(buf.len()));
            return String::from_utf8(buf).map_err(|_| Error::new(sys::SPECKV_EINTERNAL, "stats JSON is not UTF-8"));
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: owned, closed once. The status is dropped: use close() to see it.
        unsafe {
            (self.api.speckv_pool_close)(self.raw.as_ptr());
        }
    }
}

/// A pinned block: derefs to its bytes; unpinned on drop.
pub struct Pinned<'a> {
    pool: &'a Pool,
    handle: Handle,
    ptr: *const u8,
    len: usize,
    // The pin count is per process; keep the guard on one thread to be simple.
    _not_send: PhantomData<*const u8>,
}

impl<'a> Pinned<'a> {
    pub fn handle(&self) -> Handle {
        self.handle
    }
}

impl<'a> std::ops::Deref for Pinned<'a> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.len == 0 || self.ptr.is_null() {
            return &[];
        }
        // SAFETY: the library keeps ptr..ptr+len mapped and unwritable by
        // this process until the unpin in Drop.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<'a> Drop for Pinned<'a> {
    fn drop(&mut self) {
        // SAFETY: live pool; one unpin per pin.
        unsafe {
            (self.pool.api.speckv_unpin)(self.pool.p(), self.handle.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_kind() {
        for code in -18..=-1 {
            let k = ErrorKind::from_code(code);
            assert!(!matches!(k, ErrorKind::Other(_)), "code {} unmapped", code);
            assert_ne!(k.name(), "SPECKV_E?");
        }
        assert_eq!(ErrorKind::from_code(-99), ErrorKind::Other(-99));
    }

    #[test]
    fn thread_safety_matches_the_header() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Pool>();
        send::<Config>();
    }
}
