// SPDX-License-Identifier: Apache-2.0

package speckv

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Known answers from an encoder written from docs/sharing.md with Python's
// hashlib (tests/sharing/check_block_hash.py): the binding passes tokens,
// parent and extra exactly as the header defines them.
const (
	native123        = "47afdf9567455994c77156d8c56c7a1b3281af4f1263f73e7397381867b64f3c"
	native456Chained = "dc2a339e6ddaa8eeb190a8c5cf5b816330a1967e1c27fa9fc4028bbb0014d38d"
	vllm123          = "9ca3c050dcab71b7d20d7e21acb28a035ce8f2f5470d3f9724580ec57b7c7da0"
	vllm456Chained   = "cc132b6b8db3b5db424d12733484912b37aade6cd8c2e2e83f5eb9a9fbbbf4e3"
)

var cborLora7 = []byte{0x82, 0x66, 'l', 'o', 'r', 'a', '-', '7', 0x03} // ["lora-7", 3]

func mustHash(t *testing.T, algo HashAlgo, tenant uint64, parent *Hash, tokens []uint32, extra []byte) Hash {
	t.Helper()
	h, err := BlockHash(algo, tenant, parent, tokens, extra)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestBlockHash(t *testing.T) {
	n0 := mustHash(t, HashNative, 7, nil, []uint32{1, 2, 3}, nil)
	if n0.String() != native123 {
		t.Fatalf("native [1 2 3]: %v, want %s", n0, native123)
	}
	if again := mustHash(t, HashNative, 7, nil, []uint32{1, 2, 3}, nil); again != n0 {
		t.Fatal("not deterministic")
	}
	n1 := mustHash(t, HashNative, 7, &n0, []uint32{4, 5, 6}, []byte("model"))
	if n1.String() != native456Chained {
		t.Fatalf("native chained: %v, want %s", n1, native456Chained)
	}
	// The parent, the tenant (native only) and the extra all count.
	for name, h := range map[string]Hash{
		"no parent":    mustHash(t, HashNative, 7, nil, []uint32{4, 5, 6}, []byte("model")),
		"other tenant": mustHash(t, HashNative, 8, &n0, []uint32{4, 5, 6}, []byte("model")),
		"no extra":     mustHash(t, HashNative, 7, &n0, []uint32{4, 5, 6}, nil),
	} {
		if h == n1 {
			t.Errorf("%s: same hash", name)
		}
	}
	v0 := mustHash(t, HashVLLMCBOR, 7, nil, []uint32{1, 2, 3}, nil)
	if v0.String() != vllm123 {
		t.Fatalf("vllm [1 2 3]: %v, want %s", v0, vllm123)
	}
	if mustHash(t, HashVLLMCBOR, 99, nil, []uint32{1, 2, 3}, nil) != v0 {
		t.Error("the vLLM hash must ignore the tenant")
	}
	v1 := mustHash(t, HashVLLMCBOR, 7, &v0, []uint32{4, 5, 6}, cborLora7)
	want, _ := hex.DecodeString(vllm456Chained)
	if !bytes.Equal(v1[:], want) {
		t.Fatalf("vllm chained: %v, want %s", v1, vllm456Chained)
	}
	mustHash(t, HashVLLMCBOR, 0, nil, nil, nil) // an empty block is valid
	if _, err := BlockHash(HashVLLMCBOR, 0, nil, []uint32{1}, []byte{0x82, 0x01}); !errors.Is(err, ErrInvalid) {
		t.Errorf("malformed CBOR extra: %v", err)
	}
	if _, err := BlockHash(HashAlgo(9), 0, nil, []uint32{1}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown algorithm: %v", err)
	}
}

func filled(t *testing.T, p *Pool, tenant uint64, seed byte) Handle {
	t.Helper()
	h, err := p.Alloc(6000, FP16, &Hint{Tenant: tenant, TokenCount: 16})
	if err == nil {
		err = p.Write(h, 0, pattern(seed, 6000))
	}
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestPublishLookup(t *testing.T) {
	p := anon(t)
	hash := mustHash(t, HashNative, 3, nil, []uint32{10, 11, 12, 13}, nil)
	if _, err := p.Lookup(3, hash); !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lookup before publish: %v", err)
	}
	a := filled(t, p, 3, 1)
	if c, existed, err := p.Publish(a, hash); err != nil || existed || c != a {
		t.Fatalf("publish: %v %v %v", c, existed, err)
	}
	// Published blocks are immutable, and publish only once.
	if err := p.Write(a, 0, []byte{0}); !errors.Is(err, ErrPerm) {
		t.Errorf("write to a published block: %v", err)
	}
	if _, _, err := p.Publish(a, hash); !errors.Is(err, ErrPerm) {
		t.Errorf("second publish: %v", err)
	}
	// Same tenant: found, with the first block's bytes. Other tenant: never.
	if h, err := p.Lookup(3, hash); err != nil || h != a {
		t.Fatalf("lookup: %v %v", h, err)
	}
	if _, err := p.Lookup(4, hash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
	// A second writer of the same content gets the first block back.
	b := filled(t, p, 3, 1)
	c, existed, err := p.Publish(b, hash)
	if err != nil || !existed || c != a {
		t.Fatalf("publish of a duplicate: %v %v %v, want %v", c, existed, err, a)
	}
	if err := p.Free(b); err != nil { // still unpublished, still ours
		t.Fatal(err)
	}
	if _, err := p.Block(b); !errors.Is(err, ErrBadHandle) {
		t.Fatalf("freed duplicate: %v", err)
	}
	got := make([]byte, 6000)
	if err := p.Access(c, 0, got); err != nil || !bytes.Equal(got, pattern(1, 6000)) {
		t.Fatalf("canonical block: %v", err)
	}
	st, err := p.Stats()
	if err != nil || st.BlocksPublished != 1 || st.SharedBytes != 6000 || st.Lookups != 3 || st.LookupHits != 1 ||
		st.DedupBytes != 2*6000 {
		t.Fatalf("stats %+v %v", st, err)
	}
	if js, _ := p.StatsJSON(); !strings.Contains(js, `"blocks_published":1`) {
		t.Errorf("stats json %s", js)
	}
	// Three references (publish, lookup, collision): three frees; the block
	// stays published and findable.
	for i := 0; i < 3; i++ {
		if err := p.Free(a); err != nil {
			t.Fatal(i, err)
		}
	}
	if err := p.Free(a); !errors.Is(err, ErrBadHandle) {
		t.Fatalf("fourth release: %v", err)
	}
	if h, err := p.Lookup(3, hash); err != nil || h != a {
		t.Fatalf("lookup after release: %v %v", h, err)
	}
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
}

func TestPublishedBlockSurvivesReopen(t *testing.T) {
	uri := "file:" + filepath.Join(t.TempDir(), "share.pool") + "?size=8M"
	hash := mustHash(t, HashVLLMCBOR, 0, nil, []uint32{1, 2, 3}, cborLora7)
	p, err := Open(uri)
	if err != nil {
		t.Fatal(err)
	}
	a := filled(t, p, 9, 4)
	if _, _, err := p.Publish(a, hash); err != nil {
		t.Fatal(err)
	}
	p.Close() // drops the reference; the block stays published
	if p, err = Open(uri); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if h, err := p.Lookup(9, hash); err != nil || h != a {
		t.Fatalf("lookup from a new pool handle: %v %v", h, err)
	}
	if _, err := p.Lookup(1, hash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
	got := make([]byte, 6000)
	if err := p.Access(a, 0, got); err != nil || !bytes.Equal(got, pattern(4, 6000)) {
		t.Fatalf("contents: %v", err)
	}
}

func TestTenantQuota(t *testing.T) {
	p := anon(t)
	st, _ := p.Stats()
	page := st.PageSize
	if used, max, err := p.TenantUsage(5); err != nil || used != 0 || max != 0 {
		t.Fatalf("usage before: %d %d %v", used, max, err)
	}
	if err := p.SetTenantQuota(5, 2); err != nil {
		t.Fatal(err)
	}
	a, err := p.Alloc(2*page, Opaque, &Hint{Tenant: 5})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Alloc(1, Opaque, &Hint{Tenant: 5})
	var se *Error
	if !errors.Is(err, ErrQuota) || !errors.As(err, &se) || se.Code != -18 || !strings.Contains(err.Error(), "SPECKV_EQUOTA") {
		t.Fatalf("alloc over the quota: %v", err)
	}
	other, err := p.Alloc(page, Opaque, &Hint{Tenant: 6}) // other tenants are not capped
	if err != nil {
		t.Fatal(err)
	}
	if used, max, err := p.TenantUsage(5); err != nil || used != 2 || max != 2 {
		t.Fatalf("usage: %d %d %v", used, max, err)
	}
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := p.SetTenantQuota(5, 0); err != nil { // no cap
		t.Fatal(err)
	}
	big, err := p.Alloc(3*page, Opaque, &Hint{Tenant: 5})
	if err != nil {
		t.Fatal(err)
	}
	if used, max, err := p.TenantUsage(5); err != nil || used != 3 || max != 0 {
		t.Fatalf("usage without cap: %d %d %v", used, max, err)
	}
	p.Free(big)
	p.Free(other)
}
