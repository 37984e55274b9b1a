package treebench

import (
	"errors"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "treebench.ptx") }

// TestDeviceKeys (on the CPU emulation of the GPU): keys generated on the
// device are distinct, spread over the key range (as many with the top bit
// set as without, give or take), Mix32 of index + seed for 32-bit keys,
// with values key ^ salt; another seed gives other keys; widths that
// differ, and no keys, are refused.
func TestDeviceKeys(t *testing.T) {
	dev := emu.Device(t, emu.Options{}, "keys.cu")
	const n = 100_000
	t.Run("u32", func(t *testing.T) {
		keys, vals := deviceKeys[uint32, uint32](t, dev, n, 7, 0x5bd1e995)
		for i, k := range keys {
			if want := benchfmt.Mix32(uint32(i) + 7); k != want || vals[i] != k^0x5bd1e995 {
				t.Fatalf("key %d: %#x (value %#x), want %#x", i, k, vals[i], want)
			}
		}
		checkKeys(t, keys, 31)
		other, _ := deviceKeys[uint32, uint32](t, dev, n, 8, 0)
		if slices.Equal(keys, other) {
			t.Fatal("seeds 7 and 8 gave the same keys")
		}
	})
	t.Run("u64", func(t *testing.T) {
		keys, vals := deviceKeys[uint64, uint64](t, dev, n, 1<<40+3, 0x9e3779b97f4a7c15)
		for i, k := range keys {
			if vals[i] != k^0x9e3779b97f4a7c15 {
				t.Fatalf("value %d: %#x for key %#x", i, vals[i], k)
			}
		}
		checkKeys(t, keys, 63)
	})
	var b Bufs
	defer b.Free()
	if _, _, err := DeviceKeys[uint32, uint64](&b, dev, 10, 0, 0); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("32-bit keys with 64-bit values: %v", err)
	}
	if _, _, err := DeviceKeys[uint32, uint32](&b, dev, 0, 0, 0); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("no keys: %v", err)
	}
}

func deviceKeys[K, V warpkit.Word](t *testing.T, dev *cuda.Device, n int, seed, salt uint64) ([]K, []V) {
	t.Helper()
	var b Bufs
	defer b.Free()
	dk, dv, err := DeviceKeys[K, V](&b, dev, n, seed, salt)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := dk.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	vals, err := dv.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != n || len(vals) != n {
		t.Fatalf("%d keys and %d values of %d", len(keys), len(vals), n)
	}
	return keys, vals
}

// checkKeys fails when keys repeat or their top bit is set in fewer than
// 45% or more than 55% of them.
func checkKeys[K warpkit.Word](t *testing.T, keys []K, top int) {
	t.Helper()
	s := slices.Clone(keys)
	slices.Sort(s)
	high := 0
	for i, k := range s {
		if i > 0 && k == s[i-1] {
			t.Fatalf("key %#x repeats", k)
		}
		if uint64(k)>>top == 1 {
			high++
		}
	}
	if high < len(s)*45/100 || high > len(s)*55/100 {
		t.Fatalf("%d of %d keys have the top bit set", high, len(s))
	}
}
