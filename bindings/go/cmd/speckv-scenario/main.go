// SPDX-License-Identifier: Apache-2.0

// Command speckv-scenario is Go's turn in the cross-language scenario
// (tests/bindings/cross_lang.sh):
//
//	speckv-scenario POOL_PATH HANDLES_FILE SEED SHARED_FILE
//
// It verifies every block earlier languages listed in HANDLES_FILE, then
// opens the pool, allocs 3 blocks with a hint, writes known bytes, prefetches,
// reads them back, checks the stats, frees one, closes, reopens to verify,
// and appends its blocks to HANDLES_FILE. Then the sharing part (as in
// tests/bindings/scenario.c): prints the chained block hashes ("hash ALGO
// EXTRA BLOCK HEX"), looks up every block earlier languages published
// (SHARED_FILE), publishes its own, and appends it to SHARED_FILE.
package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	speckv "github.com/speckv/speckv/bindings/go"
)

const lang = "go"

var sizes = []uint64{1000, 5000, 9000}

func pattern(seed, index, n uint64) []byte {
	b := make([]byte, n)
	for j := uint64(0); j < n; j++ {
		b[j] = byte((seed*31 + index*17 + j*7 + (j >> 8)) & 0xff)
	}
	return b
}

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, lang+" scenario: FAIL: "+format+"\n", a...)
	os.Exit(1)
}

func verify(p *speckv.Pool, who string, index uint64, h speckv.Handle, n, seed uint64, live bool) {
	b, err := p.Block(h) // learns the size, so a freed handle fails here
	if !live {
		if !errors.Is(err, speckv.ErrBadHandle) {
			fail("freed %s block %d (%v): got %v, want ErrBadHandle", who, index, h, err)
		}
		return
	}
	if err != nil {
		fail("%s block %d (%v): %v", who, index, h, err)
	}
	if b.Size() != int64(n) {
		fail("%s block %d is %d bytes, want %d", who, index, b.Size(), n)
	}
	got, err := io.ReadAll(io.NewSectionReader(b, 0, b.Size()))
	if err != nil || !bytes.Equal(got, pattern(seed, index, n)) {
		fail("%s block %d (%v) holds the wrong bytes (%v)", who, index, h, err)
	}
}

// The sharing part's inputs, the same in every language: 64 tokens, the last
// 8 chosen to hit every CBOR integer width; 4 blocks of 16; two extras.
const (
	tenant      = 7
	sharedBytes = 3000
)

var (
	wide        = []uint32{0, 23, 24, 255, 256, 65535, 65536, 4294967295}
	extraNative = []byte("speckv-test-model")
	extraCBOR   = []byte{0x82, 0x66, 'l', 'o', 'r', 'a', '-', '7', 0x03} // ["lora-7", 3]
)

func tokens() []uint32 {
	t := make([]uint32, 64)
	for i := uint64(0); i < 64; i++ {
		if i < 56 {
			t[i] = uint32(i * 2654435761 % 128256)
		} else {
			t[i] = wide[i-56]
		}
	}
	return t
}

// chains returns [algo][withExtra][block] hashes and prints them.
func chains() (c [2][2][4]speckv.Hash) {
	t := tokens()
	for a, algo := range []speckv.HashAlgo{speckv.HashNative, speckv.HashVLLMCBOR} {
		for x := 0; x < 2; x++ {
			var extra []byte
			if x == 1 && algo == speckv.HashNative {
				extra = extraNative
			} else if x == 1 {
				extra = extraCBOR
			}
			var parent *speckv.Hash
			for b := 0; b < 4; b++ {
				h, err := speckv.BlockHash(algo, tenant, parent, t[16*b:16*b+16], extra)
				if err != nil {
					fail("block_hash: %v", err)
				}
				c[a][x][b] = h
				parent = &c[a][x][b]
				fmt.Printf("hash %d %d %d %v\n", a, x, b, h)
			}
		}
	}
	return c
}

// publishNew allocs, fills and publishes a block.
func publishNew(p *speckv.Pool, hash speckv.Hash, seed, index uint64) (h, canonical speckv.Handle, existed bool) {
	h, err := p.Alloc(sharedBytes, speckv.FP16, &speckv.Hint{Tenant: tenant, TokenCount: 16, HasHash: true, ContentHash: hash})
	if err != nil {
		fail("alloc: %v", err)
	}
	if err := p.Write(h, 0, pattern(seed, index, sharedBytes)); err != nil {
		fail("write: %v", err)
	}
	canonical, existed, err = p.Publish(h, hash)
	if err != nil {
		fail("publish: %v", err)
	}
	return h, canonical, existed
}

// sharing returns the lines to append to the shared file.
func sharing(p *speckv.Pool, seed uint64, shared string) []string {
	c := chains()
	published := uint64(0)
	var first speckv.Handle
	var firstSeed uint64
	if f, err := os.Open(shared); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			w := strings.Fields(sc.Text())
			if len(w) == 0 {
				continue
			}
			if len(w) != 6 {
				fail("bad line %q", sc.Text())
			}
			idx, e1 := strconv.ParseUint(w[1], 10, 64)
			hb, e2 := hex.DecodeString(w[2])
			hd, e3 := strconv.ParseUint(w[3], 0, 64)
			n, e4 := strconv.ParseUint(w[4], 10, 64)
			s, e5 := strconv.ParseUint(w[5], 10, 64)
			if e1 != nil || e2 != nil || e3 != nil || e4 != nil || e5 != nil || len(hb) != speckv.HashBytes {
				fail("bad line %q", sc.Text())
			}
			var hash speckv.Hash
			copy(hash[:], hb)
			want := speckv.Handle(hd)
			if got, err := p.Lookup(tenant, hash); err != nil || got != want {
				fail("lookup of %s's block %d: %v %v, want %v", w[0], idx, got, err, want)
			}
			verify(p, w[0], idx, want, n, s, true)
			if got, err := p.Lookup(tenant+1, hash); !errors.Is(err, speckv.ErrNotFound) {
				fail("tenant %d found %s's block: %v %v", tenant+1, w[0], got, err)
			}
			if err := p.Free(want); err != nil {
				fail("free (release) %v: %v", want, err)
			}
			if idx == 4 {
				first, firstSeed = want, s
			}
			published++
		}
		f.Close()
	}
	var out []string
	// Our own block, under a hash no other language uses.
	mine := c[0][1][(seed+3)%4]
	h, canonical, existed := publishNew(p, mine, seed, 3)
	if existed || canonical != h {
		fail("publish under a fresh hash: %v existed=%v", canonical, existed)
	}
	if got, err := p.Lookup(tenant, mine); err != nil || got != h {
		fail("lookup of our own block: %v %v", got, err)
	}
	if err := p.Free(h); err != nil {
		fail("free (release): %v", err)
	}
	out = append(out, fmt.Sprintf("%s 3 %v 0x%016x %d %d", lang, mine, uint64(h), sharedBytes, seed))
	published++
	// The block every language computes: the first publisher wins.
	all := c[1][0][3]
	h, canonical, existed = publishNew(p, all, seed, 4)
	if first == 0 {
		if existed || canonical != h {
			fail("publish of the common block: %v existed=%v", canonical, existed)
		}
		out = append(out, fmt.Sprintf("%s 4 %v 0x%016x %d %d", lang, all, uint64(h), sharedBytes, seed))
		published++
	} else {
		if !existed || canonical != first {
			fail("the common block is %v (existed=%v), not the first publisher's %v", canonical, existed, first)
		}
		if err := p.Free(h); err != nil {
			fail("free of the duplicate: %v", err)
		}
		verify(p, "first publisher's", 4, first, sharedBytes, firstSeed, true)
		if err := p.Free(first); err != nil {
			fail("free (release): %v", err)
		}
	}
	st, err := p.Stats()
	if err != nil || st.BlocksPublished != published || st.SharedBytes != published*sharedBytes || st.LookupHits < 1 {
		fail("unexpected sharing stats %+v (%v), %d published", st, err, published)
	}
	return out
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: speckv-scenario POOL_PATH HANDLES_FILE SEED SHARED_FILE")
		os.Exit(2)
	}
	path, listing := os.Args[1], os.Args[2]
	seed, err := strconv.ParseUint(os.Args[3], 10, 64)
	if err != nil {
		fail("SEED: %v", err)
	}
	uri := "file:" + path + "?size=16M"
	p, err := speckv.Open(uri)
	if err != nil {
		fail("open: %v", err)
	}

	checked := 0
	if f, err := os.Open(listing); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			w := strings.Fields(sc.Text())
			if len(w) == 0 {
				continue
			}
			if len(w) != 6 {
				fail("bad line %q", sc.Text())
			}
			idx, e1 := strconv.ParseUint(w[1], 10, 64)
			h, e2 := strconv.ParseUint(w[2], 0, 64)
			n, e3 := strconv.ParseUint(w[3], 10, 64)
			s, e4 := strconv.ParseUint(w[4], 10, 64)
			if e1 != nil || e2 != nil || e3 != nil || e4 != nil {
				fail("bad line %q", sc.Text())
			}
			verify(p, w[0], idx, speckv.Handle(h), n, s, w[5] == "live")
			checked++
		}
		f.Close()
	}

	var hs []speckv.Handle
	for i, n := range sizes {
		hint := &speckv.Hint{Tenant: 7, Request: seed, Layer: uint32(i), TokenPos: uint64(i) * 16, TokenCount: 16}
		b, err := p.AllocBlock(n, speckv.FP16, hint)
		if err != nil {
			fail("alloc: %v", err)
		}
		if _, err := b.WriteAt(pattern(seed, uint64(i), n), 0); err != nil {
			fail("write: %v", err)
		}
		hs = append(hs, b.Handle())
	}
	if err := p.Prefetch(speckv.Hint{Tenant: 7, Request: seed, TokenCount: 16}); err != nil {
		fail("prefetch: %v", err)
	}
	for i, h := range hs {
		verify(p, lang, uint64(i), h, sizes[i], seed, true)
	}
	st, err := p.Stats()
	if err != nil || st.Allocs != 3 || st.Frees != 0 || st.PrefetchHints != 1 || st.BlocksLive < 3 || st.BytesWritten != 15000 {
		fail("unexpected stats %+v (%v)", st, err)
	}
	if err := p.Free(hs[1]); err != nil {
		fail("free: %v", err)
	}
	if err := p.Free(hs[1]); !errors.Is(err, speckv.ErrBadHandle) {
		fail("double free: %v", err)
	}
	if st, _ := p.Stats(); st.Frees != 1 {
		fail("stats.Frees = %d", st.Frees)
	}
	if err := p.Close(); err != nil {
		fail("close: %v", err)
	}

	p, err = speckv.Open(uri)
	if err != nil {
		fail("reopen: %v", err)
	}
	for i, h := range hs {
		verify(p, lang, uint64(i), h, sizes[i], seed, i != 1)
	}
	sharedLines := sharing(p, seed, os.Args[4])
	if err := p.Close(); err != nil {
		fail("close: %v", err)
	}

	f, err := os.OpenFile(listing, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fail("%v", err)
	}
	for i, h := range hs {
		state := "live"
		if i == 1 {
			state = "freed"
		}
		fmt.Fprintf(f, "%s %d 0x%016x %d %d %s\n", lang, i, uint64(h), sizes[i], seed, state)
	}
	if err := f.Close(); err != nil {
		fail("%v", err)
	}
	f, err = os.OpenFile(os.Args[4], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fail("%v", err)
	}
	for _, l := range sharedLines {
		fmt.Fprintln(f, l)
	}
	if err := f.Close(); err != nil {
		fail("%v", err)
	}
	fmt.Printf("%s scenario: ok (verified %d blocks of earlier languages)\n", lang, checked)
}
