// SPDX-License-Identifier: Apache-2.0

// Package speckv is the Go binding of speckv, a KV-cache pool for LLM
// serving engines. The library is loaded at run time with dlopen (see Load):
// nothing links against libspeckv at build time.
//
// Objects hold C memory and are released by an explicit Close; there are no
// finalizers. A Pool is safe for concurrent use by many goroutines; a Config
// is not.
package speckv

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// Handle names a block. It is a plain uint64 that stays valid in every
// process attached to the same pool until the block is freed; 0 is never valid.
type Handle uint64

func (h Handle) String() string { return fmt.Sprintf("%#x", uint64(h)) }

// DType is the element type of a block.
type DType int

const (
	Opaque DType = 0
	FP16   DType = 1
	BF16   DType = 2
	FP32   DType = 3
)

// The SPECKV_HINT_* flags of a Hint.
const (
	// HintHasHash (SPECKV_HINT_HAS_HASH) is set from Hint.HasHash.
	HintHasHash uint32 = 0x1
	// HintKeys (SPECKV_HINT_KEYS): the block holds keys; its pages use config
	// codec.key_mode instead of codec.mode (docs/codec.md §17).
	HintKeys uint32 = 0x2
	// HintValues (SPECKV_HINT_VALUES): the block holds values; its pages use
	// config codec.value_mode instead of codec.mode.
	HintValues uint32 = 0x4
	// HintSpan (SPECKV_HINT_SPAN, prefetch hints): the hinted unit's reader
	// reads from the pool only the blocks that start before TokenCount
	// (docs/tiers.md "Read spans").
	HintSpan uint32 = 0x8
)

// Hint says what a block holds (placement, prefetch, prefix sharing, codec).
type Hint struct {
	Tenant     uint64
	Request    uint64
	Layer      uint32
	TokenPos   uint64
	TokenCount uint64
	// ContentHash is the prefix-block hash (see BlockHash); HasHash says it is set.
	HasHash     bool
	ContentHash Hash
	// Flags are further SPECKV_HINT_* flags: HintKeys, HintValues. HintHasHash
	// is ignored here: it follows HasHash.
	Flags uint32
}

// raw builds the C struct in Go memory; it holds no Go pointers, so it may be
// passed to C for the duration of a call.
func (h *Hint) raw() C.skv_hint {
	var r C.skv_hint
	r.struct_size = C.size_t(unsafe.Sizeof(r))
	r.tenant = C.uint64_t(h.Tenant)
	r.request = C.uint64_t(h.Request)
	r.layer = C.uint32_t(h.Layer)
	r.token_pos = C.uint64_t(h.TokenPos)
	r.token_count = C.uint64_t(h.TokenCount)
	r.flags = C.uint32_t(h.Flags &^ HintHasHash)
	if h.HasHash {
		r.flags |= C.uint32_t(HintHasHash)
		for i, b := range h.ContentHash {
			r.content_hash[i] = C.uint8_t(b)
		}
	}
	return r
}

// Stats are the counters of Pool.Stats. Pool-wide fields (pages, blocks)
// come from the shared pool; the others count this process only.
type Stats struct {
	PoolBytes, PageSize, PagesTotal, PagesUsed, BlocksLive, BlocksMax     uint64
	Allocs, Frees, BytesWritten, BytesRead, Reads, CacheHits, CacheMisses uint64
	ChecksumFailures, PrefetchHints, Attached                             uint64

	// Sharing, pool-wide (all processes): published blocks now and their
	// bytes; lookups ever and those that found a block; bytes not stored
	// again (lookup hits and publish collisions); unreferenced published
	// blocks evicted for room; blocks of dead processes reclaimed.
	BlocksPublished, SharedBytes, Lookups, LookupHits, DedupBytes uint64
	Evictions, ReclaimedBlocks                                    uint64

	// Tiers and prefetch, this process. L2Hits: pages served from the
	// prefetch buffer (CacheHits are the L1 hits); SyncReads: pages read
	// synchronously from the pool (in neither L1 nor L2); PrefetchPages:
	// pages the prefetcher brought into L2, PrefetchUsed of them read before
	// they left L2, PrefetchWasted not (PrefetchWastedBytes bytes);
	// PrefetchIgnored: hints naming no known block (unknown request, freed
	// block); PrefetchDropped: hints dropped on a full queue; LinkBytes:
	// bytes moved L3 -> L2 by the prefetcher; TLBHits, TLBMisses: Translate
	// answered from the per-process TLB or from the pool's index.
	L2Hits, SyncReads, PrefetchPages, PrefetchUsed, PrefetchWasted, PrefetchWastedBytes uint64
	PrefetchIgnored, PrefetchDropped, LinkBytes, TLBHits, TLBMisses                     uint64
	// PrefetchBetaPPM is the prefetcher's aggressiveness beta in parts per
	// million (1000000 = full); PrefetchDepth the depth k (units ahead) of
	// its last plan.
	PrefetchBetaPPM, PrefetchDepth uint32

	// Codec, this process (docs/codec.md §17; config codec.mode):
	// CodecPagesEncoded pages stored as codec records (encoded by the write
	// that completed them), CodecRawBytes their bytes in clear,
	// CodecStoredBytes their record bytes (what L3 holds and the link
	// carries); CodecPagesBypassed pages the codec left in clear (NaN/Inf, no
	// gain, record larger than the page); CodecPagesDecoded coded pages
	// decoded on a read, prefetch or pin.
	CodecPagesEncoded, CodecRawBytes, CodecStoredBytes, CodecPagesBypassed, CodecPagesDecoded uint64

	// L4 cold tier, the whole pool (docs/tiers.md §9; config cold.path):
	// L4Blocks blocks in L4 now (their pages free in the pool, their bytes in
	// the L4 file), L4Bytes their bytes; L4Demotions blocks moved L3 -> L4 and
	// L4Promotions moved back, ever, by any process; L4DemoteFailures
	// demotions that failed (the block stayed in the pool, whole).
	L4Blocks, L4Bytes, L4Demotions, L4Promotions, L4DemoteFailures uint64
}

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// HitRate is L2Hits / (L2Hits + SyncReads); 0 before any read.
func (s Stats) HitRate() float64 { return ratio(s.L2Hits, s.L2Hits+s.SyncReads) }

// PrefetchPrecision is PrefetchUsed / (PrefetchUsed + PrefetchWasted); 0
// before any prefetch.
func (s Stats) PrefetchPrecision() float64 {
	return ratio(s.PrefetchUsed, s.PrefetchUsed+s.PrefetchWasted)
}

// TLBHitRate is TLBHits / (TLBHits + TLBMisses); 0 before any translation.
func (s Stats) TLBHitRate() float64 { return ratio(s.TLBHits, s.TLBHits+s.TLBMisses) }

// CodecRatio is CodecRawBytes / CodecStoredBytes (the JSON's codec_ratio); 0
// before any page is encoded.
func (s Stats) CodecRatio() float64 { return ratio(s.CodecRawBytes, s.CodecStoredBytes) }

// Config holds settings used when opening a pool (keys as in the TOML file).
// Not safe for concurrent use. Close it when done; a pool opened with it
// keeps its own copy.
type Config struct {
	c   *C.skv_config
	log *logSink // SetLog's sink, if any
}

// NewConfig returns a config holding the defaults.
func NewConfig() (*Config, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	var msg msgBuf
	var c *C.skv_config
	if err := check("config_new", C.skv_config_new(&c, msg.ptr()), &msg); err != nil {
		return nil, err
	}
	return &Config{c: c}, nil
}

// Close frees the config; calling it again does nothing.
func (c *Config) Close() error {
	if c != nil && c.c != nil {
		C.skv_config_free(c.c)
		c.c = nil
		if c.log != nil {
			c.log.release()
			c.log = nil
		}
	}
	return nil
}

// SetInt sets an integer key (sizes in bytes, booleans 0/1).
func (c *Config) SetInt(key string, v int64) error {
	if c.c == nil {
		return ErrClosed
	}
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	var msg msgBuf
	return check("config_set_int", C.skv_config_set_int(c.c, k, C.int64_t(v), msg.ptr()), &msg)
}

// SetString sets a string key; integer keys accept size suffixes ("8G").
func (c *Config) SetString(key, v string) error {
	if c.c == nil {
		return ErrClosed
	}
	k, cv := C.CString(key), C.CString(v)
	defer C.free(unsafe.Pointer(k))
	defer C.free(unsafe.Pointer(cv))
	var msg msgBuf
	return check("config_set_str", C.skv_config_set_str(c.c, k, cv, msg.ptr()), &msg)
}

// Int reads an integer key.
func (c *Config) Int(key string) (int64, error) {
	if c.c == nil {
		return 0, ErrClosed
	}
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	var msg msgBuf
	var v C.int64_t
	if err := check("config_get_int", C.skv_config_get_int(c.c, k, &v, msg.ptr()), &msg); err != nil {
		return 0, err
	}
	return int64(v), nil
}

// LoadTOML applies every key of a TOML file (all or nothing).
func (c *Config) LoadTOML(path string) error {
	if c.c == nil {
		return ErrClosed
	}
	p := C.CString(path)
	defer C.free(unsafe.Pointer(p))
	var msg msgBuf
	return check("config_load_toml", C.skv_config_load_toml(c.c, p, msg.ptr()), &msg)
}

// LoadTOMLString applies every key of TOML text.
func (c *Config) LoadTOMLString(text string) error {
	if c.c == nil {
		return ErrClosed
	}
	t := C.CString(text)
	defer C.free(unsafe.Pointer(t))
	var msg msgBuf
	return check("config_load_toml_string", C.skv_config_load_toml_string(c.c, t, C.size_t(len(text)), msg.ptr()), &msg)
}

// ConfigBounds returns the inclusive bounds and default of an integer key.
func ConfigBounds(key string) (min, max, dflt int64, err error) {
	if err = ensure(); err != nil {
		return
	}
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	var msg msgBuf
	var lo, hi, d C.int64_t
	if err = check("config_bounds", C.skv_config_bounds(k, &lo, &hi, &d, msg.ptr()), &msg); err != nil {
		return
	}
	return int64(lo), int64(hi), int64(d), nil
}

// Pool is an open pool. Safe for concurrent use; Close waits for calls in
// flight (speckv.h forbids closing concurrently with other calls) and makes
// later calls return ErrClosed.
type Pool struct {
	mu  sync.RWMutex
	p   *C.skv_pool
	log *logSink // the config's log sink, held until Close
}

// Open opens (attaching or creating) a pool with the default settings, e.g.
// "file:/abs/path?size=64M" or "anon:?size=8M".
func Open(uri string) (*Pool, error) { return OpenConfig(uri, nil) }

// OpenConfig opens a pool with cfg (nil: defaults).
func OpenConfig(uri string, cfg *Config) (*Pool, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	var cc *C.skv_config
	if cfg != nil {
		if cfg.c == nil {
			return nil, ErrClosed
		}
		cc = cfg.c
	}
	u := C.CString(uri)
	defer C.free(unsafe.Pointer(u))
	var msg msgBuf
	var p *C.skv_pool
	if err := check("pool_open", C.skv_pool_open(u, cc, &p, msg.ptr()), &msg); err != nil {
		return nil, err
	}
	pool := &Pool{p: p}
	if cfg != nil && cfg.log != nil {
		cfg.log.retain()
		pool.log = cfg.log
	}
	return pool, nil
}

// Close detaches from the pool. Calling it again returns nil.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.p == nil {
		return nil
	}
	var msg msgBuf
	err := check("pool_close", C.skv_pool_close(p.p, msg.ptr()), &msg)
	p.p = nil
	if p.log != nil { // the library calls it no more
		p.log.release()
		p.log = nil
	}
	return err
}

// live takes the read lock; callers must call p.mu.RUnlock.
func (p *Pool) live() (*C.skv_pool, error) {
	p.mu.RLock()
	if p.p == nil {
		p.mu.RUnlock()
		return nil, ErrClosed
	}
	return p.p, nil
}

// Alloc allocates a block of n bytes (> 0); it reads as zero until written.
// hint may be nil.
func (p *Pool) Alloc(n uint64, dtype DType, hint *Hint) (Handle, error) {
	cp, err := p.live()
	if err != nil {
		return 0, err
	}
	defer p.mu.RUnlock()
	var msg msgBuf
	var out C.uint64_t
	var rc C.int
	if hint != nil {
		h := hint.raw()
		rc = C.skv_alloc(cp, C.uint64_t(n), C.int(dtype), &h, &out, msg.ptr())
	} else {
		rc = C.skv_alloc(cp, C.uint64_t(n), C.int(dtype), nil, &out, msg.ptr())
	}
	if err := check("alloc", rc, &msg); err != nil {
		return 0, err
	}
	return Handle(out), nil
}

// Free frees a block. A double free returns ErrBadHandle and does nothing.
// For a published block it releases one reference this process holds (from
// Publish or Lookup); the block stays published.
func (p *Pool) Free(h Handle) error {
	cp, err := p.live()
	if err != nil {
		return err
	}
	defer p.mu.RUnlock()
	var msg msgBuf
	return check("free", C.skv_free(cp, C.uint64_t(h), msg.ptr()), &msg)
}

// Write copies src into the block at off.
func (p *Pool) Write(h Handle, off uint64, src []byte) error {
	cp, err := p.live()
	if err != nil {
		return err
	}
	defer p.mu.RUnlock()
	var ptr unsafe.Pointer
	if len(src) > 0 {
		ptr = unsafe.Pointer(&src[0])
	}
	var msg msgBuf
	return check("write", C.skv_write(cp, C.uint64_t(h), C.uint64_t(off), ptr, C.size_t(len(src)), msg.ptr()), &msg)
}

// Access reads len(dst) verified bytes of the block at off into dst. It
// returns ErrRange if they do not all lie inside the block, ErrCorrupt if a
// page fails its checksum (nothing of it is copied).
func (p *Pool) Access(h Handle, off uint64, dst []byte) error {
	cp, err := p.live()
	if err != nil {
		return err
	}
	defer p.mu.RUnlock()
	var ptr unsafe.Pointer
	if len(dst) > 0 {
		ptr = unsafe.Pointer(&dst[0])
	}
	var msg msgBuf
	return check("access", C.skv_access(cp, C.uint64_t(h), C.uint64_t(off), ptr, C.size_t(len(dst)), msg.ptr()), &msg)
}

// BlockSize returns a block's size in bytes (speckv_block_info: the block's
// data is neither read nor verified).
func (p *Pool) BlockSize(h Handle) (int64, error) {
	cp, err := p.live()
	if err != nil {
		return 0, err
	}
	defer p.mu.RUnlock()
	var msg msgBuf
	var meta C.skv_block_meta
	meta.struct_size = C.size_t(unsafe.Sizeof(meta))
	if err := check("block_info", C.skv_block_info(cp, C.uint64_t(h), &meta, msg.ptr()), &msg); err != nil {
		return 0, err
	}
	return int64(meta.bytes), nil
}

// View pins the block, calls fn with its verified bytes, and unpins it. The
// slice is the pool's own memory (no copy): fn must not modify it or keep it
// after returning. While pinned, this process cannot write or free the block;
// other processes are not prevented from writing it in speckv 0.1.
func (p *Pool) View(h Handle, fn func(data []byte) error) error {
	cp, err := p.live()
	if err != nil {
		return err
	}
	defer p.mu.RUnlock()
	var msg msgBuf
	var ptr unsafe.Pointer
	var n C.size_t
	if err := check("pin", C.skv_pin(cp, C.uint64_t(h), &ptr, &n, msg.ptr()), &msg); err != nil {
		return err
	}
	var data []byte
	if n > 0 {
		data = unsafe.Slice((*byte)(ptr), int(n)) // C memory: allowed by the cgo rules
	}
	ferr := fn(data)
	if err := check("unpin", C.skv_unpin(cp, C.uint64_t(h), msg.ptr()), &msg); err != nil && ferr == nil {
		ferr = err
	}
	return ferr
}

// Demote moves a block to the L4 cold tier now (docs/tiers.md §9): its bytes
// go to the L4 file and its pages in the pool are freed. The handle stays
// valid: the next Access, View, Write or Prefetch brings the block back. It
// returns nil also when the block is in L4 already. Only the pool handle
// holding the L4 tier (opened with config "cold.path") can do this; any other
// gets ErrNotSupported. A pinned block, or one referenced by another process,
// is ErrBusy; a full L4 file ErrNoSpace; a failed L4 write ErrIO (the block
// stays in the pool, whole).
func (p *Pool) Demote(h Handle) error {
	cp, err := p.live()
	if err != nil {
		return err
	}
	defer p.mu.RUnlock()
	var msg msgBuf
	return check("demote", C.skv_demote(cp, C.uint64_t(h), msg.ptr()), &msg)
}

// Prefetch says that hint.Request is about to run hint.Layer at hint.TokenPos.
func (p *Pool) Prefetch(hint Hint) error {
	cp, err := p.live()
	if err != nil {
		return err
	}
	defer p.mu.RUnlock()
	h := hint.raw()
	var msg msgBuf
	return check("prefetch", C.skv_prefetch(cp, &h, msg.ptr()), &msg)
}

// Translate returns the live block allocated with a hint of (tenant,
// request, layer) whose token range [TokenPos, TokenPos+TokenCount) covers
// tokenPos, and the token's index inside that block. When no block covers it
// (never allocated with such a hint, or freed; a pool opened with "tenant.id"
// sees only its own tenant's blocks) the error is ErrNotFound (also
// fs.ErrNotExist). No reference is taken. A per-process TLB answers repeated
// questions (Stats.TLBHits, TLBMisses).
func (p *Pool) Translate(tenant, request uint64, layer uint32, tokenPos uint64) (Handle, uint64, error) {
	cp, err := p.live()
	if err != nil {
		return 0, 0, err
	}
	defer p.mu.RUnlock()
	var msg msgBuf
	var out, off C.uint64_t
	rc := C.skv_translate(cp, C.uint64_t(tenant), C.uint64_t(request), C.uint32_t(layer), C.uint64_t(tokenPos),
		&out, &off, msg.ptr())
	if err := check("translate", rc, &msg); err != nil {
		return 0, 0, err
	}
	return Handle(out), uint64(off), nil
}

// Stats returns the pool's counters.
func (p *Pool) Stats() (Stats, error) {
	cp, err := p.live()
	if err != nil {
		return Stats{}, err
	}
	defer p.mu.RUnlock()
	var s C.skv_pool_stats
	s.struct_size = C.size_t(unsafe.Sizeof(s))
	var msg msgBuf
	if err := check("stats", C.skv_stats(cp, &s, msg.ptr()), &msg); err != nil {
		return Stats{}, err
	}
	return Stats{
		PoolBytes: uint64(s.pool_bytes), PageSize: uint64(s.page_size),
		PagesTotal: uint64(s.pages_total), PagesUsed: uint64(s.pages_used),
		BlocksLive: uint64(s.blocks_live), BlocksMax: uint64(s.blocks_max),
		Allocs: uint64(s.allocs), Frees: uint64(s.frees),
		BytesWritten: uint64(s.bytes_written), BytesRead: uint64(s.bytes_read),
		Reads: uint64(s.reads), CacheHits: uint64(s.cache_hits), CacheMisses: uint64(s.cache_misses),
		ChecksumFailures: uint64(s.checksum_failures), PrefetchHints: uint64(s.prefetch_hints),
		Attached:        uint64(s.attached),
		BlocksPublished: uint64(s.blocks_published), SharedBytes: uint64(s.shared_bytes),
		Lookups: uint64(s.lookups), LookupHits: uint64(s.lookup_hits), DedupBytes: uint64(s.dedup_bytes),
		Evictions: uint64(s.evictions), ReclaimedBlocks: uint64(s.reclaimed_blocks),
		L2Hits: uint64(s.l2_hits), SyncReads: uint64(s.sync_reads),
		PrefetchPages: uint64(s.prefetch_pages), PrefetchUsed: uint64(s.prefetch_used),
		PrefetchWasted: uint64(s.prefetch_wasted), PrefetchWastedBytes: uint64(s.prefetch_wasted_bytes),
		PrefetchIgnored: uint64(s.prefetch_ignored), PrefetchDropped: uint64(s.prefetch_dropped),
		LinkBytes: uint64(s.link_bytes), TLBHits: uint64(s.tlb_hits), TLBMisses: uint64(s.tlb_misses),
		PrefetchBetaPPM: uint32(s.prefetch_beta_ppm), PrefetchDepth: uint32(s.prefetch_depth),
		CodecPagesEncoded: uint64(s.codec_pages_encoded), CodecRawBytes: uint64(s.codec_raw_bytes),
		CodecStoredBytes: uint64(s.codec_stored_bytes), CodecPagesBypassed: uint64(s.codec_pages_bypassed),
		CodecPagesDecoded: uint64(s.codec_pages_decoded), L4Blocks: uint64(s.l4_blocks), L4Bytes: uint64(s.l4_bytes),
		L4Demotions: uint64(s.l4_demotions), L4Promotions: uint64(s.l4_promotions),
		L4DemoteFailures: uint64(s.l4_demote_failures),
	}, nil
}

// StatsJSON returns the stats as the library's JSON object.
func (p *Pool) StatsJSON() (string, error) {
	cp, err := p.live()
	if err != nil {
		return "", err
	}
	defer p.mu.RUnlock()
	buf := make([]byte, 512)
	for {
		var msg msgBuf
		var need C.size_t
		rc := C.skv_stats_json(cp, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &need, msg.ptr())
		if Code(rc) == ErrRange && int(need)+1 > len(buf) {
			buf = make([]byte, int(need)+1)
			continue
		}
		if err := check("stats_json", rc, &msg); err != nil {
			return "", err
		}
		return string(buf[:need]), nil
	}
}
