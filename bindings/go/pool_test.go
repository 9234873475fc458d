// SPDX-License-Identifier: Apache-2.0

package speckv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The tests load $SPECKV_LIB (ctest sets it to the fresh build).
func TestMain(m *testing.M) {
	if fake := os.Getenv("SPECKV_LOAD_ONLY"); fake != "" {
		// Child of TestLibraryOfAnotherMajor: a fresh process loading only fake.
		err := LoadFrom(fake)
		fmt.Println(err)
		if errors.Is(err, ErrVersion) {
			os.Exit(3)
		}
		os.Exit(1)
	}
	if err := Load(); err != nil {
		fmt.Fprintln(os.Stderr, "speckv tests:", err, "(set SPECKV_LIB to libspeckv.so.0)")
		os.Exit(1)
	}
	if uri := os.Getenv("SPECKV_DIE_ATTACHED"); uri != "" {
		// Child of TestLogCallback: attach, then exit without Close.
		if _, err := Open(uri); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func anon(t *testing.T) *Pool {
	t.Helper()
	p, err := Open("anon:?size=8M")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)*7 + seed
	}
	return b
}

// jsonNumbers decodes the stats JSON and keeps its numbers (it also holds
// other values, e.g. the bool l4_holder).
func jsonNumbers(js string) (map[string]float64, error) {
	var all map[string]interface{}
	if err := json.Unmarshal([]byte(js), &all); err != nil {
		return nil, err
	}
	m := make(map[string]float64, len(all))
	for k, v := range all {
		if f, ok := v.(float64); ok {
			m[k] = f
		}
	}
	return m, nil
}

func TestLayout(t *testing.T) {
	h, m, s := layoutSizes()
	if h != 80 || m != 96 || s != 368 {
		t.Fatalf("struct sizes %d, %d, %d; speckv.h has 80, 96, 368", h, m, s)
	}
	l2, tlbMisses, beta, depth := statsOffsets()
	if l2 != 192 || tlbMisses != 272 || beta != 280 || depth != 284 {
		t.Fatalf("speckv_pool_stats offsets l2_hits %d, tlb_misses %d, prefetch_beta_ppm %d, prefetch_depth %d; "+
			"speckv.h has 192, 272, 280, 284", l2, tlbMisses, beta, depth)
	}
	if c := codecOffsets(); c != [5]uintptr{288, 296, 304, 312, 320} {
		t.Fatalf("speckv_pool_stats offsets of codec_pages_encoded .. codec_pages_decoded %v; "+
			"speckv.h has [288 296 304 312 320]", c)
	}
	if c := l4Offsets(); c != [5]uintptr{328, 336, 344, 352, 360} {
		t.Fatalf("speckv_pool_stats offsets of l4_blocks .. l4_demote_failures %v; "+
			"speckv.h has [328 336 344 352 360]", c)
	}
}

func TestVersion(t *testing.T) {
	n, s, err := LibraryVersion()
	if err != nil || CheckVersion(n) != nil || VersionText(n) != s {
		t.Fatalf("version %d %q %v", n, s, err)
	}
	err = CheckVersion(10000)
	if !errors.Is(err, ErrVersion) {
		t.Fatalf("major 1 accepted: %v", err)
	}
	if !strings.Contains(err.Error(), "1.0.0") || !strings.Contains(err.Error(), "0.1.0") {
		t.Fatalf("message must name both versions: %v", err)
	}
	if CheckVersion(99) == nil {
		t.Fatal("0.0.99 (older than the binding) accepted")
	}
	if CheckVersion(BindingVersionNumber+5) != nil {
		t.Fatal("a newer patch release refused")
	}
}

func TestRoundTrip(t *testing.T) {
	p := anon(t)
	hint := &Hint{Tenant: 1, Request: 2, Layer: 3, TokenCount: 16}
	b, err := p.AllocBlock(10000, FP16, hint)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(5, 10000)
	if n, err := b.WriteAt(data, 0); err != nil || n != len(data) {
		t.Fatal(n, err)
	}
	if err := p.Prefetch(*hint); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(b, 0, b.Size()))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back differs (err %v)", err)
	}
	// ReaderAt semantics at the end of the block.
	buf := make([]byte, 100)
	n, err := b.ReadAt(buf, 9950)
	if n != 50 || err != io.EOF || !bytes.Equal(buf[:50], data[9950:]) {
		t.Fatalf("short read: %d %v", n, err)
	}
	if n, err := b.ReadAt(buf, 10000); n != 0 || err != io.EOF {
		t.Fatalf("read at end: %d %v", n, err)
	}
	err = p.View(b.Handle(), func(v []byte) error {
		if !bytes.Equal(v, data) {
			t.Error("View differs")
		}
		// Pinned: this process may neither write nor free the block.
		if err := p.Write(b.Handle(), 0, []byte{1}); !errors.Is(err, ErrBusy) {
			t.Errorf("write while pinned: %v", err)
		}
		if err := p.Free(b.Handle()); !errors.Is(err, ErrBusy) {
			t.Errorf("free while pinned: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := p.Block(b.Handle())
	if err != nil || b2.Size() != 10000 {
		t.Fatalf("Block(): %v %v", b2, err)
	}
	st, err := p.Stats()
	if err != nil || st.Allocs != 1 || st.PrefetchHints != 1 || st.BlocksLive != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
	js, err := p.StatsJSON()
	if err != nil || !strings.Contains(js, `"allocs":1`) {
		t.Fatalf("stats json %q %v", js, err)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestBadInput(t *testing.T) {
	p := anon(t)
	h, err := p.Alloc(4096, FP32, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"wrong handle", p.Write(0xdeadbeef, 0, []byte{1}), ErrBadHandle},
		{"zero handle", p.Free(0), ErrBadHandle},
		{"write past end", p.Write(h, 4000, make([]byte, 200)), ErrRange},
		{"read past end", p.Access(h, 4095, make([]byte, 2)), ErrRange},
		{"huge offset", p.Access(h, ^uint64(0), make([]byte, 1)), ErrRange},
		{"zero-byte alloc", func() error { _, e := p.Alloc(0, Opaque, nil); return e }(), ErrInvalid},
		{"bad dtype", func() error { _, e := p.Alloc(1, DType(9), nil); return e }(), ErrInvalid},
		{"too big", func() error { _, e := p.Alloc(1<<40, Opaque, nil); return e }(), ErrNoSpace},
		{"bad uri", func() error { _, e := Open("bogus:x"); return e }(), ErrURI},
		{"missing pool", func() error { _, e := Open("file:/nonexistent-dir/x.pool?create=0"); return e }(), ErrNotFound},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
		}
		var se *Error
		if !errors.As(c.err, &se) || se.Msg == "" || int(se.Code) >= 0 {
			t.Errorf("%s: %v is not a *Error with code and message", c.name, c.err)
		}
	}
	// Empty (nil) buffers are fine.
	if err := p.Write(h, 0, nil); err != nil {
		t.Error("empty write:", err)
	}
	if err := p.Access(h, 4096, []byte{}); err != nil {
		t.Error("empty read:", err)
	}
	// Double free.
	if err := p.Free(h); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(h); !errors.Is(err, ErrBadHandle) {
		t.Fatalf("double free: %v", err)
	}
	if _, err := p.Block(h); !errors.Is(err, ErrBadHandle) {
		t.Fatalf("Block of freed handle: %v", err)
	}
	// Closed pool.
	p.Close()
	if err := p.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := p.Alloc(1, Opaque, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("alloc after close: %v", err)
	}
}

func TestEveryCodeIsMapped(t *testing.T) {
	for c := Code(-1); c >= -18; c-- {
		if strings.HasPrefix(c.Name(), "SPECKV_E(") {
			t.Errorf("code %d unmapped", c)
		}
		e := error(&Error{Code: c, Op: "x", Msg: "m"})
		if !errors.Is(e, c) {
			t.Errorf("errors.Is fails for %d", c)
		}
	}
	if !errors.Is(&Error{Code: ErrNotFound}, fs.ErrNotExist) {
		t.Error("ErrNotFound should match fs.ErrNotExist")
	}
}

func TestConfig(t *testing.T) {
	c, err := NewConfig()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetInt("no.such.key", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	if err := c.LoadTOML("/nonexistent/speckv.toml"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing toml: %v", err)
	}
	if _, _, _, err := ConfigBounds("no.such.key"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bounds: %v", err)
	}
	p, err := OpenConfig("anon:?size=8M", c)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	c.Close()
	if err := c.SetInt("x", 1); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

func TestFilePoolReopen(t *testing.T) {
	uri := "file:" + filepath.Join(t.TempDir(), "go.pool") + "?size=8M"
	p, err := Open(uri)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(42, 5000)
	h, err := p.Alloc(5000, BF16, nil)
	if err == nil {
		err = p.Write(h, 0, data)
	}
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	p, err = Open(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := make([]byte, 5000)
	if err := p.Access(h, 0, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reopen: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	p := anon(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(seed byte) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				h, err := p.Alloc(3000, Opaque, nil)
				if err != nil {
					t.Error(err)
					return
				}
				d := pattern(seed, 3000)
				got := make([]byte, 3000)
				if err := p.Write(h, 0, d); err != nil {
					t.Error(err)
				}
				if err := p.Access(h, 0, got); err != nil || !bytes.Equal(got, d) {
					t.Error("mismatch", err)
				}
				if err := p.Free(h); err != nil {
					t.Error(err)
				}
			}
		}(byte(g))
	}
	wg.Wait()
	if st, _ := p.Stats(); st.BlocksLive != 0 {
		t.Fatalf("blocks left: %d", st.BlocksLive)
	}
}

func TestLibraryOfAnotherMajor(t *testing.T) {
	fake := os.Getenv("SPECKV_FAKE_LIB") // ctest builds a stub libspeckv 1.0.0
	if fake == "" {
		t.Skip("SPECKV_FAKE_LIB not set: only the rule itself (TestVersion) is tested")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SPECKV_LOAD_ONLY="+fake)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("loading a 1.0.0 library: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "1.0.0") || !strings.Contains(string(out), "0.1.0") {
		t.Fatalf("message must name both versions: %s", out)
	}
}
