package lsmbench

import (
	"context"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// The benchmark drives both structures on either backend: the CUDA backend's
// Device methods on device slices (as the paper measures them), or on the CPU
// backend the same methods' Go-slice forms. arr and flags carry one or the
// other, and the lsmBench methods below call the matching method, so that the
// experiments read the same for both.

// arr is a run of elements handed to the structures: a device slice on the
// CUDA backend, a Go slice on the CPU backend.
type arr[T cuda.Elem] struct {
	dev    cuda.Slice[T]
	host   []T
	onHost bool
}

func (a arr[T]) Sub(lo, hi int) arr[T] {
	if a.onHost {
		return arr[T]{host: a.host[lo:hi], onHost: true}
	}
	return arr[T]{dev: a.dev.Sub(lo, hi)}
}

func (a arr[T]) Len() int {
	if a.onHost {
		return len(a.host)
	}
	return a.dev.Len()
}

func (a arr[T]) Free() error {
	if a.onHost {
		return nil
	}
	return a.dev.Free()
}

// ToHost returns the elements in a Go slice; on the CPU backend that is the
// array itself, for reading.
func (a arr[T]) ToHost() ([]T, error) {
	if a.onHost {
		return a.host, nil
	}
	return a.dev.ToHost()
}

func (a arr[T]) CopyFromHost(h []T) error {
	if a.onHost {
		copy(a.host, h)
		return nil
	}
	return a.dev.CopyFromHost(h)
}

// newArr allocates n elements on the bench's backend.
func newArr[T cuda.Elem](b *lsmBench, n int) (arr[T], error) {
	if b.dev == nil {
		return arr[T]{host: make([]T, n), onHost: true}, nil
	}
	d, err := cuda.Alloc[T](b.dev, n)
	return arr[T]{dev: d}, err
}

// arrFrom puts h on the bench's backend (the CPU backend uses h itself).
func arrFrom[T cuda.Elem](b *lsmBench, h []T) (arr[T], error) {
	if b.dev == nil {
		return arr[T]{host: h, onHost: true}, nil
	}
	d, err := cuda.FromHost(b.dev, h)
	return arr[T]{dev: d}, err
}

// flags are lookup results: 0/1 bytes on the device, bools in Go.
type flags struct {
	dev    cuda.Slice[uint8]
	host   []bool
	onHost bool
}

func newFlags(b *lsmBench, n int) (flags, error) {
	if b.dev == nil {
		return flags{host: make([]bool, n), onHost: true}, nil
	}
	d, err := cuda.Alloc[uint8](b.dev, n)
	return flags{dev: d}, err
}

func (f flags) Sub(lo, hi int) flags {
	if f.onHost {
		return flags{host: f.host[lo:hi], onHost: true}
	}
	return flags{dev: f.dev.Sub(lo, hi)}
}

func (f flags) Free() error {
	if f.onHost {
		return nil
	}
	return f.dev.Free()
}

// dict is what the benchmark drives; both structures have these methods.
type dict interface {
	InsertDevice(ctx context.Context, keys cuda.Slice[uint32], vals cuda.Slice[uint32]) error
	DeleteDevice(ctx context.Context, keys cuda.Slice[uint32]) error
	LookupDevice(ctx context.Context, keys cuda.Slice[uint32], vals cuda.Slice[uint32], found cuda.Slice[uint8]) error
	CountDevice(ctx context.Context, lo, hi cuda.Slice[uint32], counts cuda.Slice[uint32]) error
	RangeDevice(ctx context.Context, lo, hi cuda.Slice[uint32]) (*warpkit.DeviceRanges[uint32, uint32], error)
	Insert(ctx context.Context, keys, vals []uint32) error
	Delete(ctx context.Context, keys []uint32) error
	Lookup(ctx context.Context, keys, vals []uint32, found []bool) error
	Count(ctx context.Context, lo, hi []uint32, counts []uint32) error
	Range(ctx context.Context, lo, hi []uint32) (*warpkit.Ranges[uint32, uint32], error)
	Close() error
}

// backend is the structures' backend: CUDA on the bench's device, or CPU.
func (b *lsmBench) backend() warpkit.Backend {
	if b.dev == nil {
		return warpkit.CPU
	}
	return warpkit.CUDA
}

func (b *lsmBench) insert(d dict, keys, vals arr[uint32]) error {
	if keys.onHost {
		return d.Insert(b.ctx, keys.host, vals.host)
	}
	return d.InsertDevice(b.ctx, keys.dev, vals.dev)
}

func (b *lsmBench) delete(d dict, keys arr[uint32]) error {
	if keys.onHost {
		return d.Delete(b.ctx, keys.host)
	}
	return d.DeleteDevice(b.ctx, keys.dev)
}

func (b *lsmBench) lookup(d dict, keys, vals arr[uint32], found flags) error {
	if keys.onHost {
		return d.Lookup(b.ctx, keys.host, vals.host, found.host)
	}
	return d.LookupDevice(b.ctx, keys.dev, vals.dev, found.dev)
}

func (b *lsmBench) count(d dict, lo, hi, counts arr[uint32]) error {
	if lo.onHost {
		return d.Count(b.ctx, lo.host, hi.host, counts.host)
	}
	return d.CountDevice(b.ctx, lo.dev, hi.dev, counts.dev)
}

// rangeQuery runs a batch of range queries and frees the device result.
func (b *lsmBench) rangeQuery(d dict, lo, hi arr[uint32]) error {
	if lo.onHost {
		_, err := d.Range(b.ctx, lo.host, hi.host)
		return err
	}
	res, err := d.RangeDevice(b.ctx, lo.dev, hi.dev)
	if err == nil {
		err = res.Free()
	}
	return err
}
