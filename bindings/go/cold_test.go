// SPDX-License-Identifier: Apache-2.0

package speckv

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func statsJSONMap(t *testing.T, p *Pool) map[string]interface{} {
	t.Helper()
	js, err := p.StatsJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]interface{}
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	return m
}

func TestDemoteMovesABlockToL4AndAReadBringsItBack(t *testing.T) {
	dir := t.TempDir()
	cfg, err := NewConfig()
	if err != nil {
		t.Fatal(err)
	}
	defer cfg.Close()
	if err := cfg.SetString("cold.path", filepath.Join(dir, "go.l4")); err != nil {
		t.Fatal(err)
	}
	// A text key: refused as an integer.
	if err := cfg.SetInt("cold.path", 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SetInt(cold.path): %v", err)
	}
	if err := cfg.SetInt("cold.batch", 4); err != nil {
		t.Fatal(err)
	}
	p, err := OpenConfig("file:"+filepath.Join(dir, "go.pool")+"?size=4M", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	data := pattern(77, 10000)
	h, err := p.Alloc(10000, Opaque, nil)
	if err == nil {
		err = p.Write(h, 0, data)
	}
	if err != nil {
		t.Fatal(err)
	}
	before, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if before.L4Blocks != 0 || before.L4Demotions != 0 || before.L4Promotions != 0 {
		t.Fatalf("fresh pool: %+v", before)
	}

	if err := p.Demote(h); err != nil {
		t.Fatal(err)
	}
	if err := p.Demote(h); err != nil { // in L4 already: still nil
		t.Fatal(err)
	}
	s, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.L4Blocks != 1 || s.L4Bytes != 10000 || s.L4Demotions != 1 || s.L4Promotions != 0 || s.L4DemoteFailures != 0 {
		t.Fatalf("after demote: %+v", s)
	}
	if s.PagesUsed >= before.PagesUsed {
		t.Fatalf("the block's pages are not freed: %d -> %d", before.PagesUsed, s.PagesUsed)
	}
	js := statsJSONMap(t, p)
	if js["l4_blocks"] != 1.0 || js["l4_demotions"] != 1.0 || js["l4_holder"] != true {
		t.Fatalf("JSON after demote: %v", js)
	}
	if n, err := p.BlockSize(h); err != nil || n != 10000 {
		t.Fatalf("metadata stays in the pool: %d %v", n, err)
	}

	got := make([]byte, len(data))
	if err := p.Access(h, 0, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back from L4: %v", err)
	}
	if s, err = p.Stats(); err != nil {
		t.Fatal(err)
	}
	if s.L4Promotions != 1 || s.L4Blocks != 0 || s.L4Bytes != 0 || s.L4Demotions != 1 {
		t.Fatalf("after the read: %+v", s)
	}
	// Pinned: it cannot move.
	err = p.View(h, func([]byte) error { return p.Demote(h) })
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("demote while pinned: %v", err)
	}
	if err := p.Free(h); err != nil {
		t.Fatal(err)
	}
	if err := p.Demote(h); !errors.Is(err, ErrBadHandle) {
		t.Fatalf("demote after free: %v", err)
	}
}

func TestDemoteWithoutColdPathIsNotSupported(t *testing.T) {
	p, err := Open("file:" + filepath.Join(t.TempDir(), "go.pool") + "?size=4M")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	data := pattern(1, 5000)
	h, err := p.Alloc(5000, Opaque, nil)
	if err == nil {
		err = p.Write(h, 0, data)
	}
	if err != nil {
		t.Fatal(err)
	}
	err = p.Demote(h)
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "cold.path") {
		t.Fatalf("demote without cold.path: %v", err)
	}
	s, err := p.Stats()
	if err != nil || s.L4Blocks != 0 || s.L4Demotions != 0 {
		t.Fatalf("%+v %v", s, err)
	}
	if js := statsJSONMap(t, p); js["l4_holder"] != false {
		t.Fatalf("l4_holder: %v", js["l4_holder"])
	}
	got := make([]byte, len(data))
	if err := p.Access(h, 0, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	p.Close()
	if err := p.Demote(h); !errors.Is(err, ErrClosed) {
		t.Fatalf("demote on a closed pool: %v", err)
	}
}

func TestStatsOfTheOlderLayoutsAreStillAccepted(t *testing.T) {
	p := anon(t)
	for _, c := range []struct {
		size            uintptr
		ok              bool
		decoded, blocks uint64 // what the preset 7s read after the call
	}{
		{368, true, 0, 0}, {328, true, 0, 7}, {288, true, 7, 7}, {320, false, 7, 7}, {376, false, 7, 7},
	} {
		poolBytes, decoded, blocks, err := p.statsSized(c.size)
		if !c.ok {
			if !errors.Is(err, ErrStruct) {
				t.Errorf("struct_size %d: %v, want ErrStruct", c.size, err)
			}
			continue
		}
		if err != nil || poolBytes == 0 || decoded != c.decoded || blocks != c.blocks {
			t.Errorf("struct_size %d: pool_bytes %d, codec_pages_decoded %d, l4_blocks %d, %v", c.size, poolBytes,
				decoded, blocks, err)
		}
	}
}
