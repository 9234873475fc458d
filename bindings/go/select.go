// SPDX-License-Identifier: Apache-2.0

package speckv

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// Near-memory page selection (speckv_select, speckv_attend,
// speckv_merge_partials; docs/selection.md). For contexts far larger than
// the GPU holds: the pool scores the K pages of (tenant, request, layer)
// against the query next to the memory and returns only the few that matter
// (Select); the rest can be attended next to the pool too (Attend) and
// merged exactly with the GPU's part (MergePartials).
//
// The K pages are those of live blocks allocated with HintKeys and that
// (tenant, request, layer), ordered by TokenPos; a row holds
// KVHeads*HeadDim FP16 or FP32 keys. A K page gets its summary when a write
// completes it, in a pool created with config pool.summary_bytes >=
// 16 + 4*KVHeads*HeadDim by a writer with select.channels = KVHeads*HeadDim.
// The V rows of the same tokens are in blocks allocated with HintValues.

// SelectRecentConfig as SelectParams.Recent takes config select.recent.
const SelectRecentConfig = math.MaxUint32

// SelectParams mirrors speckv_select_params: the geometry and the policy of
// Select and Attend. The query has KVHeads*QPerKV heads of HeadDim floats,
// head-major.
type SelectParams struct {
	KVHeads uint32
	HeadDim uint32
	QPerKV  uint32 // query heads per KV head (GQA group size), >= 1
	Budget  uint32 // pages to select, >= 1 (forced pages included)
	// Recent is how many of the most recent pages are always selected;
	// SelectRecentConfig = config select.recent.
	Recent uint32
	// Band: a page selected by the previous call for the same (tenant,
	// request, layer) stays while its score is >= the cut - Band (logit
	// units); < 0 = config select.band_milli.
	Band float32
	// Scale is the logit scale; 0 = 1/sqrt(HeadDim).
	Scale float32
	// ContextTokens: tokens [0, ContextTokens) exist; later rows are ignored.
	ContextTokens uint64
}

// QHeads is KVHeads*QPerKV.
func (sp *SelectParams) QHeads() int { return int(sp.KVHeads) * int(sp.QPerKV) }

// QLen is the number of floats of a query: QHeads()*HeadDim.
func (sp *SelectParams) QLen() int { return sp.QHeads() * int(sp.HeadDim) }

func (sp *SelectParams) raw() C.skv_select_params {
	var r C.skv_select_params
	r.struct_size = C.size_t(unsafe.Sizeof(r))
	r.kv_heads = C.uint32_t(sp.KVHeads)
	r.head_dim = C.uint32_t(sp.HeadDim)
	r.q_per_kv = C.uint32_t(sp.QPerKV)
	r.budget = C.uint32_t(sp.Budget)
	r.recent = C.uint32_t(sp.Recent)
	r.band = C.float(sp.Band)
	r.scale = C.float(sp.Scale)
	r.context_tokens = C.uint64_t(sp.ContextTokens)
	return r
}

// PageRef mirrors speckv_page_ref: one K page of a selection.
type PageRef struct {
	Block    Handle // the K block holding the page
	Offset   uint64 // byte offset of the page in the block
	TokenPos uint64 // first token of the page
	Tokens   uint32 // tokens of the page below ContextTokens
	// Score is an upper bound of the largest logit any query head gets on
	// the page's keys; +Inf for a page without a summary yet (e.g. the one
	// being appended).
	Score float32
}

// SamePage reports whether r and o name the same page (block and offset:
// what Attend matches on).
func (r PageRef) SamePage(o PageRef) bool { return r.Block == o.Block && r.Offset == o.Offset }

func (r PageRef) raw() C.skv_page_ref {
	return C.skv_page_ref{block: C.uint64_t(r.Block), offset: C.uint64_t(r.Offset),
		token_pos: C.uint64_t(r.TokenPos), tokens: C.uint32_t(r.Tokens), score: C.float(r.Score)}
}

// Partial mirrors speckv_partial: a partial attention result per query
// head, mergeable exactly. Out[h*headDim ...] is the softmax-weighted mean
// of V over the pages it covers, MaxScore[h] the largest logit, SumExp[h]
// the sum of exp(logit - MaxScore[h]).
type Partial struct {
	Out      []float32 // QHeads*HeadDim
	MaxScore []float32 // QHeads
	SumExp   []float32 // QHeads
}

// EmptyPartial is the result over no page, the identity of the merge: Out 0,
// MaxScore -Inf, SumExp 0.
func EmptyPartial(qHeads, headDim int) Partial {
	p := Partial{Out: make([]float32, qHeads*headDim), MaxScore: make([]float32, qHeads),
		SumExp: make([]float32, qHeads)}
	for i := range p.MaxScore {
		p.MaxScore[i] = float32(math.Inf(-1))
	}
	return p
}

// QHeads is len(MaxScore).
func (p Partial) QHeads() int { return len(p.MaxScore) }

// HeadDim is len(Out)/QHeads() (0 without heads).
func (p Partial) HeadDim() int {
	if len(p.MaxScore) == 0 {
		return 0
	}
	return len(p.Out) / len(p.MaxScore)
}

func (p Partial) shape(what string) (uint32, uint32, error) {
	h := len(p.MaxScore)
	bad := func(format string, a ...interface{}) error {
		return &Error{Code: ErrInvalid, Op: "merge_partials", Msg: "partial " + what + ": " + fmt.Sprintf(format, a...)}
	}
	if len(p.SumExp) != h {
		return 0, 0, bad("%d MaxScore but %d SumExp", h, len(p.SumExp))
	}
	if h == 0 || len(p.Out) == 0 || len(p.Out)%h != 0 {
		return 0, 0, bad("Out has %d floats for %d query heads (need QHeads*HeadDim, both > 0)", len(p.Out), h)
	}
	d := len(p.Out) / h
	if uint64(h) > math.MaxUint32 || uint64(d) > math.MaxUint32 {
		return 0, 0, bad("%d heads x %d is too large", h, d)
	}
	return uint32(h), uint32(d), nil
}

// Merge is MergePartials(p, o).
func (p Partial) Merge(o Partial) (Partial, error) { return MergePartials(p, o) }

// MergePartials returns the exact merge of partials a and b over disjoint
// page sets (speckv_merge_partials, the flash-decoding merge) as a new
// Partial: M = max(m_a, m_b), w_i = sum_i exp(m_i - M), o = (w_a o_a + w_b
// o_b) / (w_a + w_b). Both must have the same shape, else ErrInvalid.
func MergePartials(a, b Partial) (Partial, error) {
	h, d, err := a.shape("a")
	if err != nil {
		return Partial{}, err
	}
	hb, db, err := b.shape("b")
	if err != nil {
		return Partial{}, err
	}
	if h != hb || d != db {
		return Partial{}, &Error{Code: ErrInvalid, Op: "merge_partials",
			Msg: fmt.Sprintf("partials differ in shape: %d x %d and %d x %d", h, d, hb, db)}
	}
	if err := ensure(); err != nil {
		return Partial{}, err
	}
	out := EmptyPartial(int(h), int(d))
	var msg msgBuf
	rc := C.skv_merge_partials(C.uint32_t(h), C.uint32_t(d),
		(*C.float)(&a.Out[0]), (*C.float)(&a.MaxScore[0]), (*C.float)(&a.SumExp[0]),
		(*C.float)(&b.Out[0]), (*C.float)(&b.MaxScore[0]), (*C.float)(&b.SumExp[0]),
		(*C.float)(&out.Out[0]), (*C.float)(&out.MaxScore[0]), (*C.float)(&out.SumExp[0]), msg.ptr())
	if err := check("merge_partials", rc, &msg); err != nil {
		return Partial{}, err
	}
	return out, nil
}

func floatPtr(q []float32) *C.float {
	if len(q) == 0 {
		return nil
	}
	return (*C.float)(&q[0])
}

// Select returns the sp.Budget K pages of (tenant, request, layer) that
// matter most for query q (sp.QLen() floats, head-major), in token order:
// the Recent last pages, the pages the steady rule keeps from this pool
// handle's previous call for the same (tenant, request, layer), then the
// best upper bounds (ties: the earlier page). All the pages when there are
// fewer than the budget. Errors: ErrInvalid (q length, geometry, budget 0,
// q not finite), ErrNotFound (no K page), ErrNotSupported (no summary area,
// dtype not FP16/FP32), ErrCorrupt (a summary fails its checksum).
func (p *Pool) Select(tenant, request uint64, layer uint32, q []float32, sp SelectParams) ([]PageRef, error) {
	refs, _, err := p.SelectCounted(tenant, request, layer, q, sp)
	return refs, err
}

// SelectCounted is Select that also returns how many K pages there are in
// all (below sp.ContextTokens).
func (p *Pool) SelectCounted(tenant, request uint64, layer uint32, q []float32, sp SelectParams) ([]PageRef, int, error) {
	cp, err := p.live()
	if err != nil {
		return nil, 0, err
	}
	defer p.mu.RUnlock()
	r := sp.raw()
	// The selection has min(Budget, pages) refs. Start small so that a
	// budget of "everything" (math.MaxUint32) allocates no more than the
	// pages there are: ErrRange changes nothing and says how many there are.
	capacity := int(sp.Budget)
	if capacity > 256 {
		capacity = 256
	}
	if capacity < 1 {
		capacity = 1
	}
	for {
		out := make([]C.skv_page_ref, capacity)
		var msg msgBuf
		var n, pages C.size_t
		rc := C.skv_select(cp, C.uint64_t(tenant), C.uint64_t(request), C.uint32_t(layer), floatPtr(q),
			C.size_t(len(q)), &r, &out[0], C.size_t(len(out)), &n, &pages, msg.ptr())
		if Code(rc) == ErrRange {
			need := uint64(pages)
			if need > uint64(sp.Budget) {
				need = uint64(sp.Budget)
			}
			if need > uint64(capacity) {
				capacity = int(need)
				continue
			}
		}
		if err := check("select", rc, &msg); err != nil {
			return nil, 0, err
		}
		refs := make([]PageRef, 0, int(n))
		for _, o := range out[:int(n)] {
			refs = append(refs, PageRef{Block: Handle(o.block), Offset: uint64(o.offset),
				TokenPos: uint64(o.token_pos), Tokens: uint32(o.tokens), Score: float32(o.score)})
		}
		return refs, int(pages), nil
	}
}

// Attend returns the attention of q over the K/V pages of (tenant, request,
// layer) that are not in exclude (matched by block and offset; typically
// what Select returned and the GPU attends itself), computed next to the
// pool (speckv_attend). Merge it with the GPU's Partial with Merge.
// Errors as Select; ErrNotFound also when a K page has no V rows.
func (p *Pool) Attend(tenant, request uint64, layer uint32, q []float32, sp SelectParams, exclude []PageRef) (Partial, error) {
	cp, err := p.live()
	if err != nil {
		return Partial{}, err
	}
	defer p.mu.RUnlock()
	r := sp.raw()
	ex := make([]C.skv_page_ref, len(exclude))
	for i, e := range exclude {
		ex[i] = e.raw()
	}
	var exPtr *C.skv_page_ref
	if len(ex) > 0 {
		exPtr = &ex[0]
	}
	// The library writes only when len(q) == QHeads*HeadDim, so arrays
	// sized from q itself are always large enough.
	heads := 0
	if sp.HeadDim > 0 {
		heads = len(q) / int(sp.HeadDim)
	}
	part := Partial{Out: make([]float32, max1(len(q))), MaxScore: make([]float32, max1(heads)),
		SumExp: make([]float32, max1(heads))}
	var msg msgBuf
	rc := C.skv_attend(cp, C.uint64_t(tenant), C.uint64_t(request), C.uint32_t(layer), floatPtr(q), C.size_t(len(q)),
		&r, exPtr, C.size_t(len(ex)), (*C.float)(&part.Out[0]), (*C.float)(&part.MaxScore[0]),
		(*C.float)(&part.SumExp[0]), msg.ptr())
	if err := check("attend", rc, &msg); err != nil {
		return Partial{}, err
	}
	part.Out, part.MaxScore, part.SumExp = part.Out[:len(q)], part.MaxScore[:heads], part.SumExp[:heads]
	return part, nil
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// selectLayout reports sizes and offsets of the hand-declared selection
// structs (for tests; on LP64 speckv.h gives select_params 48 bytes with
// kv_heads 8, head_dim 12, q_per_kv 16, budget 20, recent 24, band 28,
// scale 32, context_tokens 40; page_ref 32 with block 0, offset 8,
// token_pos 16, tokens 24, score 28; partial 32 with out 8, max_score 16,
// sum_exp 24).
func selectLayout() map[string]uintptr {
	var sp C.skv_select_params
	var pr C.skv_page_ref
	var pa C.skv_partial
	return map[string]uintptr{
		"select_params":  unsafe.Sizeof(sp),
		"kv_heads":       unsafe.Offsetof(sp.kv_heads),
		"head_dim":       unsafe.Offsetof(sp.head_dim),
		"q_per_kv":       unsafe.Offsetof(sp.q_per_kv),
		"budget":         unsafe.Offsetof(sp.budget),
		"recent":         unsafe.Offsetof(sp.recent),
		"band":           unsafe.Offsetof(sp.band),
		"scale":          unsafe.Offsetof(sp.scale),
		"context_tokens": unsafe.Offsetof(sp.context_tokens),
		"page_ref":       unsafe.Sizeof(pr),
		"block":          unsafe.Offsetof(pr.block),
		"offset":         unsafe.Offsetof(pr.offset),
		"token_pos":      unsafe.Offsetof(pr.token_pos),
		"tokens":         unsafe.Offsetof(pr.tokens),
		"score":          unsafe.Offsetof(pr.score),
		"partial":        unsafe.Sizeof(pa),
		"out":            unsafe.Offsetof(pa.out),
		"max_score":      unsafe.Offsetof(pa.max_score),
		"sum_exp":        unsafe.Offsetof(pa.sum_exp),
	}
}

// partialStructSize calls speckv_merge_partials with a speckv_partial of
// struct_size n (for tests: the library checks it).
func partialStructSize(n uintptr) error {
	if err := ensure(); err != nil {
		return err
	}
	var msg msgBuf
	return check("merge_partials", C.skv_partial_struct_size(C.size_t(n), &msg[0]), &msg)
}
