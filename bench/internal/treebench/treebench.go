// Package treebench holds what the ordered-structure benchmarks (warp bench
// btree, warp bench mvbtree) share: tree sizes on the command line, their
// names in tables, key sets spread over the key range, best-of timing and
// device buffers freed together.
package treebench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/cli"
)

// ParseSizes reads a comma-separated list of sizes with optional K and M
// suffixes (powers of two); each must be at least min.
func ParseSizes(s string, min int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mul := 1
		switch {
		case strings.HasSuffix(f, "M"):
			mul, f = 1<<20, strings.TrimSuffix(f, "M")
		case strings.HasSuffix(f, "K"):
			mul, f = 1<<10, strings.TrimSuffix(f, "K")
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%w: bad size %q", cli.ErrUsage, f)
		}
		if v*mul < min {
			return nil, fmt.Errorf("%w: size %d: trees need at least %d keys", cli.ErrUsage, v*mul, min)
		}
		out = append(out, v*mul)
	}
	return out, nil
}

// SizeName is a size as tables print it: 4M, 64K, 45M.
func SizeName(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	case n >= 1e6:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	}
	return strconv.Itoa(n)
}

// Keys returns n distinct keys spread over the whole key range, sorted: key
// i is i*stride plus a random offset below stride.
func Keys[K warpkit.Word](n int, seed uint64) []K {
	r := rand.New(rand.NewPCG(seed, 17))
	var top K
	top--
	stride := uint64(top) / uint64(n)
	keys := make([]K, n)
	for i := range keys {
		keys[i] = K(uint64(i)*stride + r.Uint64N(stride))
	}
	return keys
}

// Shuffled returns a shuffled copy of s.
func Shuffled[T any](s []T, seed uint64) []T {
	out := slices.Clone(s)
	rand.New(rand.NewPCG(seed, 3)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Best runs fn reps times and returns the fastest wall time.
func Best(reps int, fn func() error) (time.Duration, error) {
	d := time.Duration(math.MaxInt64)
	for range reps {
		start := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		d = min(d, time.Since(start))
	}
	return d, nil
}

// Bufs are device buffers freed together.
type Bufs struct{ bufs []interface{ Free() error } }

// Free frees every buffer.
func (d *Bufs) Free() {
	for _, b := range d.bufs {
		b.Free()
	}
	d.bufs = nil
}

// Up uploads a host slice.
func Up[T cuda.Elem](d *Bufs, dev *cuda.Device, s []T) (cuda.Slice[T], error) {
	x, err := cuda.FromHost(dev, s)
	if err == nil {
		d.bufs = append(d.bufs, x)
	}
	return x, err
}

// Alloc allocates n elements.
func Alloc[T cuda.Elem](d *Bufs, dev *cuda.Device, n int) (cuda.Slice[T], error) {
	x, err := cuda.Alloc[T](dev, n)
	if err == nil {
		d.bufs = append(d.bufs, x)
	}
	return x, err
}
