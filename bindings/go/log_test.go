// SPDX-License-Identifier: Apache-2.0

package speckv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A process attaches and exits without closing: the next opener's log
// callback gets the recovery warning.
func TestLogCallback(t *testing.T) {
	uri := "file:" + filepath.Join(t.TempDir(), "log.pool") + "?size=4M"
	p, err := Open(uri)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "SPECKV_DIE_ATTACHED="+uri)
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("child: %v %s", err, out)
	}
	cfg, err := NewConfig()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	if err := cfg.SetLog(func(level LogLevel, msg string) {
		mu.Lock()
		defer mu.Unlock()
		if level == LogWarn {
			got = append(got, msg)
		}
	}); err != nil {
		t.Fatal(err)
	}
	p, err = OpenConfig(uri, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Close() // the pool keeps the sink
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), "recovering pool") {
		t.Fatalf("no recovery warning in %q", got)
	}
}

func TestSetLogNilAndClosed(t *testing.T) {
	cfg, err := NewConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.SetLog(func(LogLevel, string) {}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.SetLog(nil); err != nil {
		t.Fatal(err)
	}
	cfg.Close()
	if err := cfg.SetLog(nil); err != ErrClosed {
		t.Fatalf("SetLog on a closed config: %v", err)
	}
}
