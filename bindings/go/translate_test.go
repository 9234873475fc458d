// SPDX-License-Identifier: Apache-2.0

package speckv

import (
	"errors"
	"io/fs"
	"testing"
	"time"
)

func TestTranslate(t *testing.T) {
	p := anon(t)
	h, err := p.Alloc(16*256, FP16, &Hint{Tenant: 4, Request: 11, Layer: 2, TokenPos: 16, TokenCount: 16})
	if err != nil {
		t.Fatal(err)
	}
	found := []struct {
		pos, off uint64
	}{{20, 4}, {20, 4}, {16, 0}, {31, 15}} // 20 twice: the second answer comes from the TLB
	for _, c := range found {
		got, off, err := p.Translate(4, 11, 2, c.pos)
		if err != nil || got != h || off != c.off {
			t.Fatalf("Translate(token %d) = %v, %d, %v; want %v, %d", c.pos, got, off, err, h, c.off)
		}
	}
	// Outside the token range, or another tenant, request or layer: not found.
	missing := []struct {
		tenant, request uint64
		layer           uint32
		pos             uint64
	}{{4, 11, 2, 40}, {4, 11, 2, 32}, {4, 11, 2, 15}, {5, 11, 2, 20}, {4, 12, 2, 20}, {4, 11, 3, 20}}
	for _, c := range missing {
		got, off, err := p.Translate(c.tenant, c.request, c.layer, c.pos)
		if !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) || got != 0 || off != 0 {
			t.Fatalf("Translate%v = %v, %d, %v; want ErrNotFound", c, got, off, err)
		}
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.TLBHits < 1 || st.TLBMisses < 1 || st.TLBHitRate() <= 0 || st.TLBHitRate() >= 1 {
		t.Fatalf("TLB counters after a repeated translation: %+v", st)
	}
	if st.PrefetchBetaPPM > 1000000 {
		t.Fatalf("beta %d ppm", st.PrefetchBetaPPM)
	}
	// A freed block is never returned, not even from the TLB.
	if err := p.Free(h); err != nil {
		t.Fatal(err)
	}
	for _, pos := range []uint64{20, 16} {
		if got, _, err := p.Translate(4, 11, 2, pos); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Translate after free = %v, %v; want ErrNotFound", got, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Translate(4, 11, 2, 20); !errors.Is(err, ErrClosed) {
		t.Fatalf("Translate on a closed pool: %v", err)
	}
}

func TestTierStatsMatchJSON(t *testing.T) {
	p := anon(t)
	hint := Hint{Request: 1, TokenCount: 16}
	h, err := p.Alloc(3*4096, FP16, &hint)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(3, 3*4096)
	if err := p.Write(h, 0, data); err != nil {
		t.Fatal(err)
	}
	if err := p.Prefetch(hint); err != nil {
		t.Fatal(err)
	}
	// A hint for a request nothing was allocated for is ignored (and counted).
	if err := p.Prefetch(Hint{Request: 999, Layer: 5}); err != nil {
		t.Fatal(err)
	}
	if err := p.Access(h, 0, make([]byte, len(data))); err != nil {
		t.Fatal(err)
	}
	if got, off, err := p.Translate(0, 1, 0, 3); err != nil || got != h || off != 3 {
		t.Fatalf("Translate = %v, %d, %v", got, off, err)
	}
	// The prefetcher runs on its own thread: wait until it saw both hints.
	var st Stats
	for i := 0; i < 200; i++ {
		if st, err = p.Stats(); err != nil {
			t.Fatal(err)
		}
		if st.PrefetchIgnored >= 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.PrefetchIgnored < 1 || st.PrefetchHints != 2 {
		t.Fatalf("hints: %+v", st)
	}
	js, err := p.StatsJSON()
	if err != nil {
		t.Fatal(err)
	}
	if st, err = p.Stats(); err != nil { // after the JSON: counters only grow
		t.Fatal(err)
	}
	m, err := jsonNumbers(js)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]uint64{
		"l2_hits": st.L2Hits, "sync_reads": st.SyncReads, "prefetch_pages": st.PrefetchPages,
		"prefetch_used": st.PrefetchUsed, "prefetch_wasted": st.PrefetchWasted,
		"prefetch_wasted_bytes": st.PrefetchWastedBytes, "prefetch_ignored": st.PrefetchIgnored,
		"prefetch_dropped": st.PrefetchDropped, "link_bytes": st.LinkBytes, "tlb_hits": st.TLBHits,
		"tlb_misses": st.TLBMisses,
	} {
		j, ok := m[k]
		if !ok || j > float64(v) {
			t.Errorf("%s: JSON %v (present %v) > struct %d", k, j, ok, v)
		}
	}
	if st.CacheHits+st.L2Hits+st.SyncReads < 3 || st.TLBMisses < 1 || st.PrefetchBetaPPM > 1000000 {
		t.Fatalf("stats %+v", st)
	}
	if r := st.HitRate(); r < 0 || r > 1 {
		t.Fatalf("hit rate %v", r)
	}
	if r := st.PrefetchPrecision(); r < 0 || r > 1 {
		t.Fatalf("precision %v", r)
	}
}
