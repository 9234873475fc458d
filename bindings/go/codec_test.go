// SPDX-License-Identifier: Apache-2.0

package speckv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// f16Bits is the IEEE half-precision encoding of x (round to nearest even;
// values below the normal range become zero, which is close enough here).
func f16Bits(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	man := b & 0x7fffff
	if exp >= 31 {
		return sign | 0x7c00
	}
	if exp <= 0 {
		return sign
	}
	h := uint32(exp)<<10 | man>>13
	if rest := man & 0x1fff; rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

func f16Value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	if e == 0 {
		return sign * math.Ldexp(m, -24)
	}
	return sign * math.Ldexp(1024+m, e-25)
}

// sineFP16 is 2048 FP16 values of a sine wave (amplitude 1, not all equal): 4096 bytes.
func sineFP16() []byte {
	b := make([]byte, 4096)
	for i := 0; i < 2048; i++ {
		binary.LittleEndian.PutUint16(b[2*i:], f16Bits(float32(math.Sin(float64(i)*0.05))))
	}
	return b
}

type codecRun struct {
	written, read []byte
	stats         Stats
	json          map[string]float64
}

// codecRoundtrip opens an anon pool with settings (key, value pairs), writes
// the sine wave into a fresh 4096-byte FP16 block allocated with flags, and
// returns what was written, what reads back and the stats after the read.
func codecRoundtrip(t *testing.T, flags uint32, settings ...string) codecRun {
	t.Helper()
	cfg, err := NewConfig()
	if err != nil {
		t.Fatal(err)
	}
	defer cfg.Close()
	for i := 0; i+1 < len(settings); i += 2 {
		if err := cfg.SetString(settings[i], settings[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	p, err := OpenConfig("anon:?size=16M", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h, err := p.Alloc(4096, FP16, &Hint{Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	r := codecRun{written: sineFP16(), read: make([]byte, 4096)}
	if err := p.Write(h, 0, r.written); err != nil {
		t.Fatal(err)
	}
	if err := p.Access(h, 0, r.read); err != nil {
		t.Fatal(err)
	}
	if r.stats, err = p.Stats(); err != nil {
		t.Fatal(err)
	}
	js, err := p.StatsJSON()
	if err != nil {
		t.Fatal(err)
	}
	if r.json, err = jsonNumbers(js); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	if err := p.Free(h); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCodecInt8StoresPagesCompressedAndReadsBackLossy(t *testing.T) {
	r := codecRoundtrip(t, 0, "codec.mode", "int8")
	s := r.stats
	if s.CodecPagesEncoded != 1 || s.CodecRawBytes != 4096 || s.CodecStoredBytes == 0 ||
		s.CodecStoredBytes >= s.CodecRawBytes || s.CodecPagesBypassed != 0 {
		t.Fatalf("codec stats %+v: want 1 page encoded, 0 < stored < raw = 4096, none bypassed", s)
	}
	if s.CodecRatio() <= 1 {
		t.Fatalf("CodecRatio %v", s.CodecRatio())
	}
	if r.json["codec_pages_encoded"] != 1 || r.json["codec_raw_bytes"] != 4096 ||
		r.json["codec_stored_bytes"] != float64(s.CodecStoredBytes) {
		t.Fatalf("JSON codec counters %v disagree with %+v", r.json, s)
	}
	if ratio, ok := r.json["codec_ratio"]; !ok || math.Abs(ratio-s.CodecRatio()) > 1e-5 {
		t.Fatalf("JSON codec_ratio %v (present %v), struct %v", ratio, ok, s.CodecRatio())
	}
	differ := 0
	for i := 0; i < 2048; i++ {
		a := binary.LittleEndian.Uint16(r.written[2*i:])
		b := binary.LittleEndian.Uint16(r.read[2*i:])
		x, y := f16Value(a), f16Value(b)
		if math.IsNaN(y) || math.IsInf(y, 0) || math.Abs(x-y) > 0.02 {
			t.Fatalf("value %d: wrote %v, read %v", i, x, y)
		}
		if a != b {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("int8 read back every value bitwise identical: the page was not coded")
	}
}

func TestCodecRawReadsBackExactly(t *testing.T) {
	for _, settings := range [][]string{{"codec.mode", "raw"}, nil} { // explicit, and the default
		r := codecRoundtrip(t, 0, settings...)
		if !bytes.Equal(r.read, r.written) {
			t.Fatalf("%v: read back differs from what was written", settings)
		}
		if r.stats.CodecPagesEncoded != 0 || r.stats.CodecRawBytes != 0 || r.stats.CodecStoredBytes != 0 {
			t.Fatalf("%v: codec stats %+v", settings, r.stats)
		}
	}
}

func TestCodecKeyAndValueModesFollowTheHintFlags(t *testing.T) {
	if HintHasHash != 1 || HintKeys != 2 || HintValues != 4 {
		t.Fatalf("hint flags %#x %#x %#x; speckv.h has 0x1 0x2 0x4", HintHasHash, HintKeys, HintValues)
	}
	keys := []string{"codec.mode", "raw", "codec.key_mode", "int8"}
	if r := codecRoundtrip(t, HintKeys, keys...); r.stats.CodecPagesEncoded != 1 || bytes.Equal(r.read, r.written) {
		t.Fatalf("a keys block with codec.key_mode = int8 was not coded: %+v", r.stats)
	}
	if r := codecRoundtrip(t, HintValues, keys...); r.stats.CodecPagesEncoded != 0 || !bytes.Equal(r.read, r.written) {
		t.Fatalf("a values block was coded with codec.key_mode: %+v", r.stats)
	}
	if r := codecRoundtrip(t, HintValues, "codec.value_mode", "int8"); r.stats.CodecPagesEncoded != 1 {
		t.Fatalf("a values block with codec.value_mode = int8 was not coded: %+v", r.stats)
	}
}

func TestCodecConfigKeys(t *testing.T) {
	cfg, err := NewConfig()
	if err != nil {
		t.Fatal(err)
	}
	defer cfg.Close()
	for _, m := range []string{"raw", "paper", "int8", "k6", "vp6"} {
		for _, k := range []string{"codec.mode", "codec.key_mode", "codec.value_mode"} {
			if err := cfg.SetString(k, m); err != nil {
				t.Fatalf("%s = %s: %v", k, m, err)
			}
		}
	}
	if err := cfg.SetString("codec.mode", "zstd-99"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown preset: %v", err)
	}
	if err := cfg.SetInt("codec.channels", 128); err != nil {
		t.Fatal(err)
	}
	if v, err := cfg.Int("codec.channels"); err != nil || v != 128 {
		t.Fatalf("codec.channels %d %v", v, err)
	}
	if lo, hi, d, err := ConfigBounds("codec.channels"); err != nil || lo != 1 || hi != 65535 || d != 1 {
		t.Fatalf("codec.channels bounds %d %d %d %v", lo, hi, d, err)
	}
	for _, bad := range []int64{0, 65536} {
		if err := cfg.SetInt("codec.channels", bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("codec.channels = %d: %v", bad, err)
		}
	}
}
