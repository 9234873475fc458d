// Command speckv-scenario is Go's turn in the cross-language scenario
// (tests/bindings/cross_lang.sh):
//
//	speckv-scenario POOL_PATH HANDLES_FILE SEED
//
// It verifies every block earlier languages listed in HANDLES_FILE, then
// opens the pool, allocs 3 blocks with a hint, writes known bytes, prefetches,
// reads them back, checks the stats, frees one, closes, reopens to verify,
// and appends its blocks to HANDLES_FILE.
package main

import (
	"bufio"
	"bytes"
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

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: speckv-scenario POOL_PATH HANDLES_FILE SEED")
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
	fmt.Printf("%s scenario: ok (verified %d blocks of earlier languages)\n", lang, checked)
}
