// SPDX-License-Identifier: Apache-2.0

package speckv

/*
#include <stdint.h>
#include "shim.h"
*/
import "C"

import (
	"runtime/cgo"
	"sync"
)

// LogLevel is a level of the library's log (SPECKV_LOG_*).
type LogLevel int

const (
	LogError LogLevel = 0
	LogWarn  LogLevel = 1
	LogInfo  LogLevel = 2
	LogDebug LogLevel = 3
)

// logSink is what the library's callback reaches through a cgo.Handle. It is
// deleted once neither the config nor any pool opened with it uses it.
type logSink struct {
	fn   func(LogLevel, string)
	mu   sync.Mutex
	refs int // the config, plus each pool open with it
	h    cgo.Handle
}

func (s *logSink) retain() {
	s.mu.Lock()
	s.refs++
	s.mu.Unlock()
}

func (s *logSink) release() {
	s.mu.Lock()
	s.refs--
	done := s.refs == 0
	s.mu.Unlock()
	if done {
		s.h.Delete()
	}
}

//export skvGoLog
func skvGoLog(h C.uintptr_t, level C.int, msg *C.char) {
	s, ok := cgo.Handle(h).Value().(*logSink)
	if !ok {
		return
	}
	defer func() { _ = recover() }() // a panicking sink must not unwind into the library
	s.fn(LogLevel(level), C.GoString(msg))
}

// SetLog routes the log of pools opened with this config to fn, called from
// any library thread; nil removes it (the library is then silent, or logs to
// stderr under SPECKV_LOG=stderr). Only messages up to key "log.level"
// (default 1: errors and warnings) are passed. Pools keep the sink until
// they close.
func (c *Config) SetLog(fn func(level LogLevel, msg string)) error {
	if c == nil || c.c == nil {
		return ErrClosed
	}
	var s *logSink
	var h C.uintptr_t
	if fn != nil {
		s = &logSink{fn: fn, refs: 1}
		s.h = cgo.NewHandle(s)
		h = C.uintptr_t(s.h)
	}
	var msg msgBuf
	if err := check("config_set_log", C.skv_config_set_log(c.c, h, msg.ptr()), &msg); err != nil {
		if s != nil {
			s.release()
		}
		return err
	}
	if c.log != nil {
		c.log.release()
	}
	c.log = s
	return nil
}
