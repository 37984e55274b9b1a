package dicttest

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// Opener returns a fresh, empty dictionary and its Close.
type Opener func() (DeviceDict[uint32, uint32], func() error, error)

// Benchmarks runs the dictionaries' standard benchmarks with uint32 keys and
// values: insert (batches of batch), lookup (all present), count and range
// (8 keys per range on average) on resident entries. On a device (dev non-nil)
// inputs and outputs are device-resident; otherwise the Go-slice API is used.
// Rates are reported as M elements/s or M queries/s.
func Benchmarks(b *testing.B, dev *cuda.Device, open Opener, batch, resident int) {
	rng := rand.New(rand.NewPCG(1, 1))
	keys, vals := make([]uint32, resident), make([]uint32, resident)
	for i := range keys {
		keys[i], vals[i] = rng.Uint32(), uint32(i)
	}
	ctx := context.Background()
	h := &benchHost{dev: dev, keys: keys, vals: vals}
	if dev != nil {
		var err1, err2 error
		h.dk, err1 = cuda.FromHost(dev, keys)
		h.dv, err2 = cuda.FromHost(dev, vals)
		if err := errors.Join(err1, err2); err != nil {
			b.Fatal(err)
		}
		defer h.dk.Free()
		defer h.dv.Free()
	}
	b.Run("insert", func(b *testing.B) {
		d, closeD, err := open()
		if err != nil {
			b.Fatal(err)
		}
		defer func() { closeD() }()
		nb, i := resident/batch, 0
		b.ResetTimer()
		for range b.N {
			if i == nb { // start over, so the structure stays at most resident large
				b.StopTimer()
				closeD()
				if d, closeD, err = open(); err != nil {
					b.Fatal(err)
				}
				i = 0
				b.StartTimer()
			}
			if err := h.insert(ctx, d, i*batch, (i+1)*batch); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds()/1e6, "Melem/s")
	})
	d, closeD, err := open()
	if err != nil {
		b.Fatal(err)
	}
	defer closeD()
	for i := 0; i < resident; i += batch {
		if err := h.insert(ctx, d, i, min(i+batch, resident)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("lookup", func(b *testing.B) {
		for range b.N {
			if err := h.lookup(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*resident)/b.Elapsed().Seconds()/1e6, "Mq/s")
	})
	nq := resident / 4
	lo, hi := make([]uint32, nq), make([]uint32, nq)
	width := uint32(8 * (uint64(1) << 32) / uint64(resident))
	for i := range lo {
		lo[i] = rng.Uint32()
		hi[i] = lo[i] + width
		if hi[i] < lo[i] {
			hi[i] = ^uint32(0)
		}
	}
	for _, kind := range []string{"count", "range"} {
		b.Run(kind+"-L8", func(b *testing.B) {
			for range b.N {
				if err := h.bounded(ctx, d, lo, hi, kind == "range"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*nq)/b.Elapsed().Seconds()/1e6, "Mq/s")
		})
	}
}

type benchHost struct {
	dev        *cuda.Device
	keys, vals []uint32
	dk, dv     cuda.Slice[uint32]
}

func (h *benchHost) insert(ctx context.Context, d DeviceDict[uint32, uint32], i, j int) error {
	if h.dev == nil {
		return d.Update(ctx, h.keys[i:j], h.vals[i:j], nil)
	}
	return d.InsertDevice(ctx, h.dk.Sub(i, j), h.dv.Sub(i, j))
}

func (h *benchHost) lookup(ctx context.Context, d DeviceDict[uint32, uint32]) error {
	n := len(h.keys)
	if h.dev == nil {
		return d.Lookup(ctx, h.keys, make([]uint32, n), make([]bool, n))
	}
	out, err1 := cuda.Alloc[uint32](h.dev, n)
	found, err2 := cuda.Alloc[uint8](h.dev, n)
	defer out.Free()
	defer found.Free()
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	return d.LookupDevice(ctx, h.dk, out, found)
}

func (h *benchHost) bounded(ctx context.Context, d DeviceDict[uint32, uint32], lo, hi []uint32, wantRange bool) error {
	if h.dev == nil {
		if wantRange {
			_, err := d.Range(ctx, lo, hi)
			return err
		}
		return d.Count(ctx, lo, hi, make([]uint32, len(lo)))
	}
	dl, err1 := cuda.FromHost(h.dev, lo)
	dh, err2 := cuda.FromHost(h.dev, hi)
	dc, err3 := cuda.Alloc[uint32](h.dev, len(lo))
	defer dl.Free()
	defer dh.Free()
	defer dc.Free()
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	if !wantRange {
		return d.CountDevice(ctx, dl, dh, dc)
	}
	res, err := d.RangeDevice(ctx, dl, dh)
	if err != nil {
		return err
	}
	return res.Free()
}

// OpenFunc opens a fresh dictionary on a backend (dev is nil for the CPU).
type OpenFunc func(be warpkit.Backend, dev *cuda.Device) (DeviceDict[uint32, uint32], func() error, error)

// BenchmarkBackends runs Benchmarks on the CPU backend (2^20 entries) and,
// when device 0 opens, on CUDA with device-resident data (2^22 entries), in
// batches of 2^16.
func BenchmarkBackends(b *testing.B, open OpenFunc) {
	opener := func(be warpkit.Backend, dev *cuda.Device) Opener {
		return func() (DeviceDict[uint32, uint32], func() error, error) { return open(be, dev) }
	}
	b.Run("cpu", func(b *testing.B) { Benchmarks(b, nil, opener(warpkit.CPU, nil), 1<<16, 1<<20) })
	dev, err := cuda.Open(0)
	if err != nil {
		b.Logf("no CUDA benchmarks: %v", err)
		return
	}
	defer dev.Close()
	b.Run("cuda", func(b *testing.B) { Benchmarks(b, dev, opener(warpkit.CUDA, dev), 1<<16, 1<<22) })
}
