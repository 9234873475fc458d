// SPDX-License-Identifier: Apache-2.0

package speckv

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/hex"
	"unsafe"
)

// HashBytes is the size of a block content hash (SPECKV_HASH_BYTES).
const HashBytes = 32

// Hash is a block content hash, as BlockHash computes it. String gives hex.
type Hash [HashBytes]byte

func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// HashAlgo selects the algorithm of BlockHash (docs/sharing.md gives the bytes).
type HashAlgo int

const (
	// HashNative is SHA-256 of speckv's binary encoding, salted with the tenant.
	HashNative HashAlgo = 0
	// HashVLLMCBOR is SHA-256 of canonical CBOR [parent, [tokens...], extra],
	// as vLLM's sha256_cbor prefix-cache hash (the tenant is not used).
	HashVLLMCBOR HashAlgo = 1
)

// BlockHash is the chained hash of one prefix block: H(parent, tokens, extra).
// The same inputs give the same 32 bytes in every process, binding and
// machine. parent is the previous block's hash, nil for the first block.
// extra is what else decides the KV (model, LoRA, ...): raw bytes for
// HashNative; exactly one CBOR data item for HashVLLMCBOR, where nil means
// CBOR null (an empty non-nil slice is passed as present, and is not a CBOR
// item). tenant salts HashNative only.
func BlockHash(algo HashAlgo, tenant uint64, parent *Hash, tokens []uint32, extra []byte) (Hash, error) {
	var out Hash
	if err := ensure(); err != nil {
		return out, err
	}
	var pp *C.uint8_t
	if parent != nil {
		pp = (*C.uint8_t)(unsafe.Pointer(&parent[0]))
	}
	var tp *C.uint32_t
	if len(tokens) > 0 {
		tp = (*C.uint32_t)(unsafe.Pointer(&tokens[0]))
	}
	var ep unsafe.Pointer
	if len(extra) > 0 {
		ep = unsafe.Pointer(&extra[0])
	}
	hasExtra := C.int(0)
	if extra != nil {
		hasExtra = 1
	}
	var msg msgBuf
	rc := C.skv_block_hash(C.int(algo), C.uint64_t(tenant), pp, tp, C.size_t(len(tokens)), ep, C.size_t(len(extra)),
		hasExtra, (*C.uint8_t)(unsafe.Pointer(&out[0])), msg.ptr())
	if err := check("block_hash", rc, &msg); err != nil {
		return Hash{}, err
	}
	return out, nil
}

// Publish publishes a written block under hash for its tenant (the tenant of
// its alloc hint): it becomes immutable and any process attached to the pool
// can find it with Lookup. It returns the published block's handle, on which
// this process now holds a reference (release it with Free):
//
//   - h itself, existed == false: h is published;
//   - another block, existed == true: the tenant already had a block under
//     hash (SPECKV_EEXIST). That block is the one to use; h stays
//     unpublished and still belongs to the caller, who should free it.
func (p *Pool) Publish(h Handle, hash Hash) (canonical Handle, existed bool, err error) {
	cp, err := p.live()
	if err != nil {
		return 0, false, err
	}
	defer p.mu.RUnlock()
	var msg msgBuf
	var out C.uint64_t
	rc := C.skv_publish(cp, C.uint64_t(h), (*C.uint8_t)(unsafe.Pointer(&hash[0])), &out, msg.ptr())
	switch Code(rc) {
	case 0:
		return Handle(out), false, nil
	case ErrExist:
		return Handle(out), true, nil
	}
	return 0, false, check("publish", rc, &msg)
}

// Lookup finds the block tenant published under hash and takes a reference
// to it (release it with Free). A miss is ErrNotFound (also fs.ErrNotExist);
// other tenants' blocks are never found.
func (p *Pool) Lookup(tenant uint64, hash Hash) (Handle, error) {
	cp, err := p.live()
	if err != nil {
		return 0, err
	}
	defer p.mu.RUnlock()
	var msg msgBuf
	var out C.uint64_t
	rc := C.skv_lookup(cp, C.uint64_t(tenant), (*C.uint8_t)(unsafe.Pointer(&hash[0])), &out, msg.ptr())
	if err := check("lookup", rc, &msg); err != nil {
		return 0, err
	}
	return Handle(out), nil
}

// SetTenantQuota caps the pages tenant's blocks may occupy, for every process
// of the pool; 0 removes the cap. An alloc over the cap fails with ErrQuota.
func (p *Pool) SetTenantQuota(tenant, maxPages uint64) error {
	cp, err := p.live()
	if err != nil {
		return err
	}
	defer p.mu.RUnlock()
	var msg msgBuf
	return check("tenant_set_quota", C.skv_tenant_set_quota(cp, C.uint64_t(tenant), C.uint64_t(maxPages), msg.ptr()), &msg)
}

// TenantUsage returns the pages tenant's blocks occupy now and its cap (0: none).
func (p *Pool) TenantUsage(tenant uint64) (pagesUsed, maxPages uint64, err error) {
	cp, err := p.live()
	if err != nil {
		return 0, 0, err
	}
	defer p.mu.RUnlock()
	var msg msgBuf
	var used, max C.uint64_t
	if err := check("tenant_usage", C.skv_tenant_usage(cp, C.uint64_t(tenant), &used, &max, msg.ptr()), &msg); err != nil {
		return 0, 0, err
	}
	return uint64(used), uint64(max), nil
}
