// SPDX-License-Identifier: Apache-2.0

package speckv

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// Near-memory page selection: the checks of tests/unit/test_select.cc
// through the Go binding.

const (
	selKVHeads     = 2
	selHeadDim     = 32
	selQPerKV      = 2
	selC           = selKVHeads * selHeadDim // 64 channels: 128-byte FP16 rows
	selRowsPerPage = 4096 / (selC * 2)       // 32 tokens a page
	selBlockTokens = 4 * selRowsPerPage      // 128 tokens, 4 pages a block
	selTokens      = 300                     // 10 pages, the last one (12 tokens) still being appended
	selTenant      = 3
	selRequest     = 11
	selLayer       = 2
)

// lcg gives deterministic values in [-1, 1).
type lcg uint64

func (l *lcg) next() float32 {
	*l = *l*6364136223846793005 + 1442695040888963407
	return float32(uint64(*l)>>40)/float32(1<<23) - 1
}

type selFixture struct {
	p      *Pool
	k, v   []uint16 // [token][selC], everything written
	kb, vb []Handle
}

func newSelFixture(t *testing.T, summaries bool) *selFixture {
	t.Helper()
	cfg, err := NewConfig()
	if err != nil {
		t.Fatal(err)
	}
	defer cfg.Close()
	if summaries {
		if err := cfg.SetInt("pool.summary_bytes", 16+4*selC); err != nil { // 272
			t.Fatal(err)
		}
	}
	if err := cfg.SetInt("select.channels", selC); err != nil {
		t.Fatal(err)
	}
	p, err := OpenConfig("anon:?size=32M", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	f := &selFixture{p: p}
	rng := lcg(7)
	for tok := 0; tok < selTokens; tok++ {
		for ch := 0; ch < selC; ch++ {
			// Pages 2 and 7 carry keys aligned with the query direction (channel 3 of each head).
			bump := float32(0)
			if (tok/selRowsPerPage)%5 == 2 && ch%selHeadDim == 3 {
				bump = 3
			}
			f.k = append(f.k, f16Bits(rng.next()+bump))
			f.v = append(f.v, f16Bits(rng.next()))
		}
	}
	row := func(src []uint16, tok int) []byte {
		b := make([]byte, 2*selC)
		for i, h := range src[tok*selC : (tok+1)*selC] {
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return b
	}
	// Appended token by token, as a decoder does: K and V blocks of 128 tokens.
	for tok := 0; tok < selTokens; tok++ {
		if tok%selBlockTokens == 0 {
			for _, flags := range []uint32{HintKeys, HintValues} {
				h, err := p.Alloc(4096*4, FP16, &Hint{Tenant: selTenant, Request: selRequest, Layer: selLayer,
					TokenPos: uint64(tok), TokenCount: selBlockTokens, Flags: flags})
				if err != nil {
					t.Fatal(err)
				}
				if flags == HintKeys {
					f.kb = append(f.kb, h)
				} else {
					f.vb = append(f.vb, h)
				}
			}
		}
		off := uint64(tok%selBlockTokens) * selC * 2
		if err := p.Write(f.kb[len(f.kb)-1], off, row(f.k, tok)); err != nil {
			t.Fatal(err)
		}
		if err := p.Write(f.vb[len(f.vb)-1], off, row(f.v, tok)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func selParams(budget uint32) SelectParams {
	return SelectParams{KVHeads: selKVHeads, HeadDim: selHeadDim, QPerKV: selQPerKV, Budget: budget,
		Recent: SelectRecentConfig, Band: -1, ContextTokens: selTokens}
}

func selQuery() []float32 {
	rng := lcg(11)
	q := make([]float32, selKVHeads*selQPerKV*selHeadDim)
	for i := range q {
		q[i] = 0.3 * rng.next()
		if i%selHeadDim == 3 {
			q[i]++
		}
	}
	return q
}

func selJSON(t *testing.T, p *Pool) map[string]float64 {
	t.Helper()
	js, err := p.StatsJSON()
	if err != nil {
		t.Fatal(err)
	}
	m, err := jsonNumbers(js)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSelectLayout(t *testing.T) {
	// offsetof() against include/speckv.h on LP64 (a C program printed these).
	want := map[string]uintptr{
		"select_params": 48, "kv_heads": 8, "head_dim": 12, "q_per_kv": 16, "budget": 20, "recent": 24,
		"band": 28, "scale": 32, "context_tokens": 40,
		"page_ref": 32, "block": 0, "offset": 8, "token_pos": 16, "tokens": 24, "score": 28,
		"partial": 32, "out": 8, "max_score": 16, "sum_exp": 24,
	}
	if got := selectLayout(); !reflect.DeepEqual(got, want) {
		t.Fatalf("selection struct layout %v; speckv.h has %v", got, want)
	}
	if SelectRecentConfig != 0xffffffff {
		t.Fatalf("SelectRecentConfig %d", uint64(SelectRecentConfig))
	}
	// The library checks speckv_partial.struct_size.
	if err := partialStructSize(4); !errors.Is(err, ErrStruct) {
		t.Fatalf("struct_size 4: %v", err)
	}
	if err := partialStructSize(32); err != nil {
		t.Fatalf("struct_size 32: %v", err)
	}
}

func TestSelectBudgetInTokenOrder(t *testing.T) {
	f := newSelFixture(t, true)
	q := selQuery()
	sel, pages, err := f.p.SelectCounted(selTenant, selRequest, selLayer, q, selParams(3))
	if err != nil {
		t.Fatal(err)
	}
	if pages != 10 || len(sel) != 3 {
		t.Fatalf("%d pages, selection %+v", pages, sel)
	}
	for i := 1; i < len(sel); i++ {
		if sel[i-1].TokenPos >= sel[i].TokenPos {
			t.Fatalf("not in token order: %+v", sel)
		}
	}
	last := sel[2]
	if last.TokenPos != 9*selRowsPerPage || last.Tokens != selTokens-9*selRowsPerPage || last.Block != f.kb[2] ||
		last.Offset != 4096 || !math.IsInf(float64(last.Score), 1) {
		t.Fatalf("the last ref is not the page being appended (no summary: +Inf): %+v", last)
	}
	// The two others are the pages with the aligned keys (2 and 7), complete, with finite bounds.
	for i, page := range []uint64{2, 7} {
		r := sel[i]
		if r.TokenPos != page*selRowsPerPage || r.Tokens != selRowsPerPage || r.Block != f.kb[page/4] ||
			r.Offset != page%4*4096 || math.IsInf(float64(r.Score), 0) || math.IsNaN(float64(r.Score)) {
			t.Fatalf("ref %d: %+v, want page %d", i, r, page)
		}
	}
	again, err := f.p.Select(selTenant, selRequest, selLayer, q, selParams(3))
	if err != nil || !reflect.DeepEqual(again, sel) {
		t.Fatalf("Select = %+v, %v; SelectCounted gave %+v", again, err, sel)
	}
	m := selJSON(t, f.p)
	if m["summaries_written"] != 9 || m["select_calls"] != 2 {
		t.Fatalf("summaries_written %v (9 complete K pages), select_calls %v (2)", m["summaries_written"], m["select_calls"])
	}
	for _, k := range []string{"select_entered", "select_churn", "attend_calls"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("stats JSON lacks %s", k)
		}
	}
}

func TestAttendMergeEqualsFullAttention(t *testing.T) {
	f := newSelFixture(t, true)
	q := selQuery()
	sp := selParams(3)
	sel, err := f.p.Select(selTenant, selRequest, selLayer, q, sp)
	if err != nil {
		t.Fatal(err)
	}
	all, err := f.p.Select(selTenant, selRequest, selLayer, q, selParams(math.MaxUint32)) // every page
	if err != nil || len(all) != 10 {
		t.Fatalf("all pages: %d, %v", len(all), err)
	}
	var rest []PageRef
	for _, r := range all {
		in := false
		for _, s := range sel {
			in = in || s.SamePage(r)
		}
		if !in {
			rest = append(rest, r)
		}
	}
	if len(rest) != 7 {
		t.Fatalf("rest %d", len(rest))
	}
	near, err := f.p.Attend(selTenant, selRequest, selLayer, q, sp, sel) // all but the selection
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := f.p.Attend(selTenant, selRequest, selLayer, q, sp, rest) // only the selection
	if err != nil {
		t.Fatal(err)
	}
	full, err := f.p.Attend(selTenant, selRequest, selLayer, q, sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	const qh = selKVHeads * selQPerKV
	for _, p := range []Partial{near, gpu, full} {
		if len(p.Out) != qh*selHeadDim || len(p.MaxScore) != qh || len(p.SumExp) != qh || p.QHeads() != qh ||
			p.HeadDim() != selHeadDim {
			t.Fatalf("partial shape %d, %d, %d", len(p.Out), len(p.MaxScore), len(p.SumExp))
		}
	}
	merged, err := near.Merge(gpu)
	if err != nil {
		t.Fatal(err)
	}
	if m2, err := MergePartials(near, gpu); err != nil || !reflect.DeepEqual(m2, merged) {
		t.Fatalf("MergePartials differs from Merge: %v", err)
	}
	closeTo := func(what string, got, want []float32) {
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*math.Max(1, math.Abs(float64(want[i]))) {
				t.Fatalf("%s[%d]: %v vs %v", what, i, got[i], want[i])
			}
		}
	}
	closeTo("out", merged.Out, full.Out)
	closeTo("max_score", merged.MaxScore, full.MaxScore)
	closeTo("sum_exp", merged.SumExp, full.SumExp)
	// Each part alone is not the whole (the split really happened): their
	// weights, rescaled to the full maximum, are both > 0 and add up.
	for h := 0; h < qh; h++ {
		w := func(p Partial) float64 {
			return float64(p.SumExp[h]) * math.Exp(float64(p.MaxScore[h]-full.MaxScore[h]))
		}
		wn, wg, wf := w(near), w(gpu), float64(full.SumExp[h])
		if !(wn > 0 && wg > 0 && wn < wf && wg < wf) || math.Abs(wn+wg-wf) > 1e-5*wf {
			t.Fatalf("head %d: weights %v + %v vs %v", h, wn, wg, wf)
		}
	}
	// And the whole is attention over every token, computed here from the FP16 bits.
	scale := 1 / math.Sqrt(selHeadDim)
	for h := 0; h < qh; h++ {
		g := h / selQPerKV
		logits := make([]float64, selTokens)
		mx := math.Inf(-1)
		for tok := range logits {
			s := 0.0
			for c := 0; c < selHeadDim; c++ {
				s += float64(q[h*selHeadDim+c]) * f16Value(f.k[tok*selC+g*selHeadDim+c])
			}
			logits[tok] = s * scale
			mx = math.Max(mx, logits[tok])
		}
		sum := 0.0
		for _, l := range logits {
			sum += math.Exp(l - mx)
		}
		for c := 0; c < selHeadDim; c++ {
			o := 0.0
			for tok, l := range logits {
				o += math.Exp(l-mx) / sum * f16Value(f.v[tok*selC+g*selHeadDim+c])
			}
			if got := float64(full.Out[h*selHeadDim+c]); math.Abs(got-o) > 1e-4*(1+math.Abs(o)) {
				t.Fatalf("out[%d][%d]: %v, reference %v", h, c, got, o)
			}
		}
	}
	// Everything excluded: the identity of the merge.
	none, err := f.p.Attend(selTenant, selRequest, selLayer, q, sp, all)
	if err != nil || !reflect.DeepEqual(none, EmptyPartial(qh, selHeadDim)) {
		t.Fatalf("attend over no page: %+v, %v", none, err)
	}
	if m := selJSON(t, f.p); m["attend_calls"] != 4 {
		t.Fatalf("attend_calls %v", m["attend_calls"])
	}
}

func TestSelectBadInput(t *testing.T) {
	f := newSelFixture(t, true)
	q := selQuery()
	sp := selParams(3)
	_, err := f.p.Select(selTenant, selRequest, selLayer, q[1:], sp)
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrInvalid || int(e.Code) != -1 || !strings.Contains(e.Msg, "query heads") {
		t.Fatalf("short q: %v", err)
	}
	if _, err := f.p.Attend(selTenant, selRequest, selLayer, q[1:], sp, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("attend, short q: %v", err)
	}
	if _, err := f.p.Select(selTenant, selRequest, selLayer, nil, sp); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no q: %v", err)
	}
	_, err = f.p.Select(selTenant, selRequest, selLayer, q, selParams(0))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("budget 0: %v", err)
	}
	bad := sp
	bad.HeadDim = 0
	if _, err := f.p.Attend(selTenant, selRequest, selLayer, q, bad, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("head_dim 0: %v", err)
	}
	qnan := append([]float32(nil), q...)
	qnan[0] = float32(math.NaN())
	if _, err := f.p.Select(selTenant, selRequest, selLayer, qnan, sp); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NaN in q: %v", err)
	}
	if _, err := f.p.Select(selTenant, selRequest+1, selLayer, q, sp); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no K page: %v", err)
	}
	// Partials of different shapes, or inconsistent ones, do not merge.
	a := EmptyPartial(4, 32)
	for _, b := range []Partial{EmptyPartial(4, 16), EmptyPartial(0, 32), {Out: a.Out, MaxScore: a.MaxScore, SumExp: a.SumExp[:3]}} {
		if _, err := a.Merge(b); !errors.Is(err, ErrInvalid) {
			t.Fatalf("merge with %d/%d/%d floats: %v", len(b.Out), len(b.MaxScore), len(b.SumExp), err)
		}
	}
	if m, err := a.Merge(a); err != nil || !reflect.DeepEqual(m, a) {
		t.Fatalf("empty with empty: %+v, %v", m, err)
	}
	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Select(selTenant, selRequest, selLayer, q, sp); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed pool: %v", err)
	}
	if _, err := f.p.Attend(selTenant, selRequest, selLayer, q, sp, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed pool: %v", err)
	}
}

func TestSelectWithoutSummaryArea(t *testing.T) {
	f := newSelFixture(t, false)
	_, err := f.p.Select(selTenant, selRequest, selLayer, selQuery(), selParams(3))
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "pool.summary_bytes") {
		t.Fatalf("pool without summaries: %v", err)
	}
	cfg, err := NewConfig()
	if err != nil {
		t.Fatal(err)
	}
	defer cfg.Close()
	if err := cfg.SetInt("pool.summary_bytes", 100); err != nil {
		t.Fatal(err)
	}
	if p, err := OpenConfig("anon:?size=8M", cfg); !errors.Is(err, ErrInvalid) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("summary_bytes 100 (not a multiple of 16): %v", err)
	}
}
