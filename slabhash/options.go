package slabhash

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// Layout selects the slab geometry of the CUDA backend (the CPU backend
// ignores it).
type Layout int

const (
	// LayoutAuto is the default: the fastest correct layout measured
	// (LayoutTile8; see docs/benchmarks.md).
	LayoutAuto Layout = iota
	// LayoutPaper is the paper's: a whole warp per 128-byte slab, one 32-bit
	// word per lane, 15 pairs, lane 31 the next pointer. Maps and multimaps
	// with 32-bit keys and values only; for 32-bit sets it is the 128-byte
	// slab of 31 keys read by a warp.
	LayoutPaper
	// LayoutTile8: 8-lane tiles, one slot per lane (64-byte slabs of 7 pairs
	// for 32/32, 128-byte slabs for wider pairs, 32 bytes for 32-bit sets).
	LayoutTile8
	// LayoutTile16: 16-lane tiles, slabs twice the Tile8 size (128 bytes of 15
	// pairs for 32/32).
	LayoutTile16
)

// String names the layout.
func (l Layout) String() string {
	switch l {
	case LayoutAuto:
		return "auto"
	case LayoutPaper:
		return "paper"
	case LayoutTile8:
		return "tile8"
	case LayoutTile16:
		return "tile16"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// Options configure a table. Zero values take the defaults.
type Options struct {
	Backend warpkit.Backend
	// Device is used by the CUDA backend; nil opens device 0 (closed by Close).
	Device *cuda.Device
	// ExpectedSize is the number of entries the buckets are sized for
	// (default 1<<16). The table grows past it through the allocator.
	ExpectedSize int
	// Utilization is the memory utilization aimed at when ExpectedSize
	// entries are stored: the bytes of the entries over the bytes of the slabs
	// in use (default 0.6). It sets the bucket count B = n/(M·β) of the paper.
	Utilization float64
	// Buckets, if positive, overrides the computed bucket count. The pool
	// holds at most 2^20 slabs per bucket (see MaxPoolBytes).
	Buckets int
	// Layout selects the slab geometry (CUDA backend).
	Layout Layout
	// MaxPoolBytes bounds the memory of overflow slabs (default: 64 super
	// blocks, each about half the overflow expected at ExpectedSize, at least
	// 8192 slabs). Exhausting it fails inserts with ErrPoolExhausted. Either
	// way the pool holds at most 2^20 slabs per bucket, which keeps every
	// list far below the kernels' bound on list length (see the package
	// documentation); only tables with very few buckets meet that limit.
	MaxPoolBytes int64
	// Seed seeds the bucket hash (0 uses a fixed default).
	Seed uint32
	// Streams is the number of CUDA streams concurrent batch calls share
	// (default 4).
	Streams int
}

const defaultSeed = 0x2545f491

func (o *Options) setDefaults() error {
	if o.ExpectedSize == 0 {
		o.ExpectedSize = 1 << 16
	}
	if o.Utilization == 0 {
		o.Utilization = 0.6
	}
	if o.Seed == 0 {
		o.Seed = defaultSeed
	}
	if o.Streams == 0 {
		o.Streams = 4
	}
	switch {
	case o.Backend != warpkit.Auto && o.Backend != warpkit.CPU && o.Backend != warpkit.CUDA:
		return fmt.Errorf("%w: slabhash: unknown backend %d", warpkit.ErrInvalidArgument, int(o.Backend))
	case o.ExpectedSize < 0 || o.ExpectedSize > 1<<34:
		return fmt.Errorf("%w: slabhash: expected size %d", warpkit.ErrInvalidArgument, o.ExpectedSize)
	case !(o.Utilization > 0 && o.Utilization < 1):
		return fmt.Errorf("%w: slabhash: utilization %v (want 0 < u < 1)", warpkit.ErrInvalidArgument, o.Utilization)
	case o.Buckets < 0 || o.Buckets > math.MaxUint32:
		return fmt.Errorf("%w: slabhash: %d buckets", warpkit.ErrInvalidArgument, o.Buckets)
	case o.Layout < LayoutAuto || o.Layout > LayoutTile16:
		return fmt.Errorf("%w: slabhash: unknown layout %d", warpkit.ErrInvalidArgument, int(o.Layout))
	case o.Streams < 1 || o.Streams > 64:
		return fmt.Errorf("%w: slabhash: %d streams (want 1 to 64)", warpkit.ErrInvalidArgument, o.Streams)
	case o.MaxPoolBytes < 0:
		return fmt.Errorf("%w: slabhash: negative pool bound", warpkit.ErrInvalidArgument)
	}
	return nil
}

// kind is what a table stores.
type kind int

const (
	kindMap kind = iota
	kindSet
	kindMulti
)

func (k kind) String() string { return [...]string{"map", "set", "multi"}[k] }

// geometry is a resolved layout for one key/value width and kind.
type geometry struct {
	layout     Layout
	name       string // kernel suffix, e.g. "map_32_32_t8"
	module     string // which PTX holds the kernels
	tile       int    // lanes per tile
	slabBytes  int
	slots      int // entries per slab
	entryBytes int // bytes of data per entry (key + value)
}

func sizeOf[T warpkit.Word]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// resolveGeometry picks the slab layout for a kind and widths.
func resolveGeometry[K, V warpkit.Word](kd kind, l Layout) (geometry, error) {
	kb, vb := sizeOf[K](), sizeOf[V]()
	if kd == kindSet {
		vb = 0
	}
	if l == LayoutAuto {
		l = LayoutTile8
	}
	g := geometry{layout: l, entryBytes: kb + vb}
	switch l {
	case LayoutPaper:
		switch {
		case kd == kindSet && kb == 4:
			g.tile = 32
		case kd != kindSet && kb == 4 && vb == 4:
			g.tile = 32
			g.slabBytes, g.slots = 128, 15
		default:
			return g, fmt.Errorf("%w: slabhash: the paper's layout is for 32-bit keys (and 32-bit values)", warpkit.ErrInvalidArgument)
		}
	case LayoutTile8:
		g.tile = 8
	case LayoutTile16:
		g.tile = 16
	}
	slot := 16
	switch {
	case kd == kindSet:
		slot = kb
	case kb == 4 && vb == 4:
		slot = 8
	}
	if g.slabBytes == 0 {
		g.slabBytes, g.slots = g.tile*slot, g.tile-1
	}
	suffix := fmt.Sprintf("t%d", g.tile)
	if l == LayoutPaper && kd != kindSet {
		suffix = "paper"
	}
	if kd == kindSet {
		g.name = fmt.Sprintf("set_%d_%s", kb*8, suffix)
		g.module = "set"
	} else {
		g.name = fmt.Sprintf("%s_%d_%d_%s", kd, kb*8, vb*8, suffix)
		g.module = fmt.Sprintf("kv%dx%d", kb*8, vb*8)
	}
	return g, nil
}

// maxUtilization is the utilization of completely full slabs.
func (g geometry) maxUtilization() float64 {
	return float64(g.slots*g.entryBytes) / float64(g.slabBytes)
}

// expectedSlabs returns E[max(1, ceil(X/m))] for X ~ Poisson(lambda): the
// mean number of slabs in a bucket list holding a Poisson load.
func expectedSlabs(lambda float64, m int) float64 {
	if lambda <= 0 {
		return 1
	}
	hi := int(lambda + 12*math.Sqrt(lambda) + 30)
	p := math.Exp(-lambda) // P(X = 0)
	logp := -lambda
	sum := 0.0
	for x := 0; x <= hi; x++ {
		if x > 0 {
			logp += math.Log(lambda) - math.Log(float64(x))
			p = math.Exp(logp)
		}
		slabs := (x + m - 1) / m
		if slabs < 1 {
			slabs = 1
		}
		sum += p * float64(slabs)
	}
	return sum
}

// utilizationAt predicts the memory utilization of n entries in b buckets.
func (g geometry) utilizationAt(n, b float64) float64 {
	return n * float64(g.entryBytes) / (b * expectedSlabs(n/b, g.slots) * float64(g.slabBytes))
}

// bucketsFor returns the bucket count that gives utilization u at n entries
// (the paper's B = n/(M·β), with β from a Poisson model of the list
// lengths instead of a table of measurements).
func (g geometry) bucketsFor(n int, u float64) (int, error) {
	if n < 1 {
		n = 1
	}
	if u >= g.maxUtilization()*0.98 {
		return 0, fmt.Errorf("%w: slabhash: utilization %.2f is above what %s slabs reach (%.2f)",
			warpkit.ErrInvalidArgument, u, g.layout, g.maxUtilization())
	}
	// Utilization falls as buckets are added; bisect on the bucket count.
	lo, hi := 1.0, float64(n)*float64(g.entryBytes)/(u*float64(g.slabBytes))+1
	for i := 0; i < 100 && hi-lo > 0.5; i++ {
		mid := (lo + hi) / 2
		if g.utilizationAt(float64(n), mid) > u {
			lo = mid
		} else {
			hi = mid
		}
	}
	b := int(math.Round(hi))
	if b < 1 {
		b = 1
	}
	if b > math.MaxUint32 {
		return 0, fmt.Errorf("%w: slabhash: %d buckets needed", warpkit.ErrInvalidArgument, b)
	}
	return b, nil
}

// overflowSlabs predicts the slabs beyond the bucket heads at n entries.
func (g geometry) overflowSlabs(n, b int) float64 {
	return float64(b) * (expectedSlabs(float64(n)/float64(b), g.slots) - 1)
}
