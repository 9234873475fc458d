// SPDX-License-Identifier: Apache-2.0

package speckv

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"
)

// The version of speckv.h this binding was written against.
const (
	BindingVersionMajor  = 0
	BindingVersionMinor  = 1
	BindingVersionPatch  = 0
	BindingVersionNumber = BindingVersionMajor*10000 + BindingVersionMinor*100 + BindingVersionPatch
)

// DefaultLibrary is loaded when SPECKV_LIB is not set.
const DefaultLibrary = "libspeckv.so.0"

var (
	loadMu sync.Mutex
	loaded bool
)

// msgBuf receives the detail message of a failed call.
type msgBuf [C.SKV_MSG]C.char

func (m *msgBuf) ptr() *C.char { return &m[0] }

func (m *msgBuf) String() string { return C.GoString(&m[0]) }

// VersionText formats a version number: 10203 -> "1.2.3".
func VersionText(n uint32) string {
	return fmt.Sprintf("%d.%d.%d", n/10000, n/100%100, n%100)
}

// CheckVersion applies the compatibility rule to a library version number:
// the major version must equal the binding's, and the library must be at
// least the version the binding was written against (minor releases only
// add functions). The error matches ErrVersion and names both versions.
func CheckVersion(library uint32) error {
	if library/10000 != BindingVersionMajor || library < BindingVersionNumber {
		return &Error{Code: ErrVersion, Op: "load", Msg: fmt.Sprintf(
			"incompatible libspeckv: the library is version %s but this binding needs %d.x, at least %s",
			VersionText(library), BindingVersionMajor, VersionText(BindingVersionNumber))}
	}
	return nil
}

// Load loads the library named by $SPECKV_LIB, or DefaultLibrary, once per
// process. Open calls it; call it yourself to fail early. A failure is not
// remembered: a later call tries again.
func Load() error {
	path := os.Getenv("SPECKV_LIB")
	if path == "" {
		path = DefaultLibrary
	}
	return LoadFrom(path)
}

// LoadFrom is Load with an explicit path or soname. Once a library is
// loaded, later calls do nothing.
func LoadFrom(path string) error {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded {
		return nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg msgBuf
	if C.skv_load(cpath, msg.ptr()) != 0 {
		return &Error{Code: ErrNotFound, Op: "load", Msg: "cannot load libspeckv: " + msg.String()}
	}
	if err := CheckVersion(uint32(C.skv_version_number())); err != nil {
		return err
	}
	if C.skv_resolve(msg.ptr()) != 0 {
		return &Error{Code: ErrNotSupported, Op: "load", Msg: "libspeckv " + path + ": " + msg.String()}
	}
	loaded = true
	return nil
}

func ensure() error {
	loadMu.Lock()
	ok := loaded
	loadMu.Unlock()
	if ok {
		return nil
	}
	return Load()
}

// LibraryVersion returns the loaded library's version number and text.
func LibraryVersion() (uint32, string, error) {
	if err := ensure(); err != nil {
		return 0, "", err
	}
	return uint32(C.skv_version_number()), C.GoString(C.skv_version_string()), nil
}

func check(op string, rc C.int, msg *msgBuf) error {
	if rc == 0 {
		return nil
	}
	return &Error{Code: Code(rc), Op: op, Msg: msg.String()}
}

// layoutSizes reports the sizes of the hand-declared structs (for tests:
// on LP64 speckv_hint is 80 bytes, speckv_block_meta 96, speckv_pool_stats 368).
func layoutSizes() (hint, meta, stats uintptr) {
	return unsafe.Sizeof(C.skv_hint{}), unsafe.Sizeof(C.skv_block_meta{}), unsafe.Sizeof(C.skv_pool_stats{})
}

// statsOffsets reports where the fields added last sit in the hand-declared
// speckv_pool_stats (for tests: on LP64 192, 272, 280, 284).
func statsOffsets() (l2Hits, tlbMisses, betaPPM, depth uintptr) {
	var s C.skv_pool_stats
	return unsafe.Offsetof(s.l2_hits), unsafe.Offsetof(s.tlb_misses), unsafe.Offsetof(s.prefetch_beta_ppm),
		unsafe.Offsetof(s.prefetch_depth)
}

// codecOffsets reports where the codec counters sit in the
// hand-declared speckv_pool_stats (for tests: on LP64 288, 296, 304, 312, 320).
func codecOffsets() [5]uintptr {
	var s C.skv_pool_stats
	return [5]uintptr{unsafe.Offsetof(s.codec_pages_encoded), unsafe.Offsetof(s.codec_raw_bytes),
		unsafe.Offsetof(s.codec_stored_bytes), unsafe.Offsetof(s.codec_pages_bypassed),
		unsafe.Offsetof(s.codec_pages_decoded)}
}

// l4Offsets reports where the L4 counters (the last fields) sit in the
// hand-declared speckv_pool_stats (for tests: on LP64 328, 336, 344, 352, 360).
func l4Offsets() [5]uintptr {
	var s C.skv_pool_stats
	return [5]uintptr{unsafe.Offsetof(s.l4_blocks), unsafe.Offsetof(s.l4_bytes),
		unsafe.Offsetof(s.l4_demotions), unsafe.Offsetof(s.l4_promotions),
		unsafe.Offsetof(s.l4_demote_failures)}
}

// statsSized calls speckv_stats with struct_size n (for tests: the library
// still accepts the layouts ending at codec_pages_decoded, 328 bytes, and at
// prefetch_depth, 288). The fields past n are preset to 7 and returned, with
// pool_bytes, to show what the library wrote.
func (p *Pool) statsSized(n uintptr) (poolBytes, codecPagesDecoded, l4Blocks uint64, err error) {
	cp, err := p.live()
	if err != nil {
		return 0, 0, 0, err
	}
	defer p.mu.RUnlock()
	var s C.skv_pool_stats
	s.codec_pages_decoded, s.l4_blocks = 7, 7
	var msg msgBuf
	err = check("stats", C.skv_stats_size(cp, &s, C.size_t(n), msg.ptr()), &msg)
	return uint64(s.pool_bytes), uint64(s.codec_pages_decoded), uint64(s.l4_blocks), err
}
