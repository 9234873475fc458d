// SPDX-License-Identifier: Apache-2.0

package speckv

import (
	"errors"
	"fmt"
	"io/fs"
)

// Code is a speckv status code (SPECKV_E*). Each value is also a sentinel
// error: errors.Is(err, speckv.ErrBadHandle) is true for any *Error with
// that code. Codes are only ever added, never renumbered.
type Code int

// The status codes of speckv.h 0.1.
const (
	ErrInvalid      Code = -1  // SPECKV_EINVAL: an argument is invalid
	ErrNoMem        Code = -2  // SPECKV_ENOMEM: host memory exhausted
	ErrNoSpace      Code = -3  // SPECKV_ENOSPC: the pool has no room
	ErrNotFound     Code = -4  // SPECKV_ENOENT: no such pool, file, key or entry
	ErrExist        Code = -5  // SPECKV_EEXIST: it already exists
	ErrBadHandle    Code = -6  // SPECKV_EBADHANDLE: freed or never issued
	ErrCorrupt      Code = -7  // SPECKV_ECORRUPT: a checksum failed, data not returned
	ErrVersion      Code = -8  // SPECKV_EVERSION: pool format (or library) version mismatch
	ErrIO           Code = -9  // SPECKV_EIO: an OS I/O call failed
	ErrPerm         Code = -10 // SPECKV_EPERM: permission denied
	ErrBusy         Code = -11 // SPECKV_EBUSY: pinned block or page being written
	ErrRange        Code = -12 // SPECKV_ERANGE: offset/length outside the block
	ErrNotPool      Code = -13 // SPECKV_ENOTPOOL: not a speckv pool
	ErrURI          Code = -14 // SPECKV_EURI: malformed URI
	ErrNotSupported Code = -15 // SPECKV_ENOTSUP: not supported by this build/backend
	ErrStruct       Code = -16 // SPECKV_ESTRUCT: struct_size mismatch
	ErrInternal     Code = -17 // SPECKV_EINTERNAL: a bug in speckv
	ErrQuota        Code = -18 // SPECKV_EQUOTA: the tenant's page quota would be exceeded
)

// ErrClosed is returned by calls on a Pool or Config after Close.
var ErrClosed = errors.New("speckv: use of closed object")

var codeNames = map[Code][2]string{
	ErrInvalid:      {"SPECKV_EINVAL", "invalid argument"},
	ErrNoMem:        {"SPECKV_ENOMEM", "out of memory"},
	ErrNoSpace:      {"SPECKV_ENOSPC", "no space left in the pool"},
	ErrNotFound:     {"SPECKV_ENOENT", "not found"},
	ErrExist:        {"SPECKV_EEXIST", "already exists"},
	ErrBadHandle:    {"SPECKV_EBADHANDLE", "bad block handle"},
	ErrCorrupt:      {"SPECKV_ECORRUPT", "data corrupt"},
	ErrVersion:      {"SPECKV_EVERSION", "version mismatch"},
	ErrIO:           {"SPECKV_EIO", "I/O error"},
	ErrPerm:         {"SPECKV_EPERM", "permission denied"},
	ErrBusy:         {"SPECKV_EBUSY", "busy"},
	ErrRange:        {"SPECKV_ERANGE", "out of range"},
	ErrNotPool:      {"SPECKV_ENOTPOOL", "not a speckv pool"},
	ErrURI:          {"SPECKV_EURI", "bad URI"},
	ErrNotSupported: {"SPECKV_ENOTSUP", "not supported"},
	ErrStruct:       {"SPECKV_ESTRUCT", "unknown struct size"},
	ErrInternal:     {"SPECKV_EINTERNAL", "internal error"},
	ErrQuota:        {"SPECKV_EQUOTA", "tenant quota exceeded"},
}

// Name is the C name of the code, e.g. "SPECKV_EBADHANDLE".
func (c Code) Name() string {
	if n, ok := codeNames[c]; ok {
		return n[0]
	}
	return fmt.Sprintf("SPECKV_E(%d)", int(c))
}

func (c Code) Error() string {
	if n, ok := codeNames[c]; ok {
		return "speckv: " + n[1]
	}
	return fmt.Sprintf("speckv: unknown error %d", int(c))
}

// Is lets errors.Is match the io/fs sentinels too.
func (c Code) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return c == ErrNotFound
	case fs.ErrExist:
		return c == ErrExist
	case fs.ErrPermission:
		return c == ErrPerm
	case fs.ErrInvalid:
		return c == ErrInvalid
	}
	return false
}

// Error is a failed call: the operation, the status code and the library's
// detail message (speckv_errmsg, or speckv_strerror when there was none).
type Error struct {
	Code Code
	Op   string
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("speckv %s: %s (%d): %s", e.Op, e.Code.Name(), int(e.Code), e.Msg)
}

// Unwrap returns the Code, so errors.Is(err, speckv.ErrRange) works.
func (e *Error) Unwrap() error { return e.Code }
