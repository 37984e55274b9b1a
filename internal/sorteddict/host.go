package sorteddict

import (
	"context"
	"errors"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
)

// DeviceEngine is the device-resident half of a GPU Engine.
type DeviceEngine[K, V warpkit.Word] interface {
	UpdateDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], dels cuda.Slice[uint8], kind UpdateKind) error
	LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error
	CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error
	RangeDevice(ctx context.Context, lo, hi cuda.Slice[K]) (*warpkit.DeviceRanges[K, V], error)
	NeighborDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8], succ bool) error
}

// Host gives a GPU backend the Go-slice forms of its operations: it stages the
// arguments on the device through pinned memory (on a stream of its own,
// synchronized before the device form runs), calls the device form, and
// copies the results back.
type Host[K, V warpkit.Word] struct {
	dev  *cuda.Device
	eng  DeviceEngine[K, V]
	pool *Pool[stager[K, V]]
}

type stager[K, V warpkit.Word] struct {
	stream     *cuda.Stream
	stage      gpurt.Staging
	k1, k2, rk gpurt.Buf[K]
	v1, rv     gpurt.Buf[V]
	f1, rf     gpurt.Buf[uint8]
	counts     gpurt.Buf[uint32]
}

// NewHost returns the adapter; Close releases its streams and buffers.
func NewHost[K, V warpkit.Word](dev *cuda.Device, eng DeviceEngine[K, V], workers int) *Host[K, V] {
	return &Host[K, V]{dev: dev, eng: eng, pool: NewPool(workers, func() (*stager[K, V], error) {
		s, err := dev.NewStream()
		return &stager[K, V]{stream: s}, err
	}, (*stager[K, V]).free)}
}

// free closes the stream, which waits for its copies, then frees the buffers
// and staging they use.
func (s *stager[K, V]) free() error {
	return gpurt.Release(s.stream, s)
}

// Close releases the staging streams and memory.
func (h *Host[K, V]) Close() error { return h.pool.Close() }

// BoolBytes views a []bool as bytes (Go stores bools as 0 or 1).
func BoolBytes(b []bool) []uint8 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint8)(unsafe.Pointer(&b[0])), len(b))
}

// upload is one Go slice to stage into a device buffer.
type upload struct {
	bytes int
	run   func(s *gpurt.Staging, st *cuda.Stream) error
}

func up[T cuda.Elem](h *cuda.Device, st *cuda.Stream, buf *gpurt.Buf[T], src []T, dst *cuda.Slice[T]) (upload, error) {
	d, err := buf.Get(h, st, len(src))
	*dst = d
	return upload{gpurt.Bytes[T](len(src)), func(s *gpurt.Staging, st *cuda.Stream) error { return gpurt.Upload(s, st, d, src) }}, err
}

// with runs f on a stager after staging the uploads and synchronizing. On
// failure it waits for the copies already enqueued on the stager's stream
// before handing the stager back (the next call may replace the staging they
// read from or write to).
func (h *Host[K, V]) with(ctx context.Context, f func(w *stager[K, V]) ([]upload, error), then func(w *stager[K, V]) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	w, err := h.pool.Get(ctx)
	if err != nil {
		return err
	}
	defer h.pool.Put(w)
	defer SyncOnError(w.stream, &err)
	ups, err := f(w)
	if err != nil {
		return err
	}
	total := 0
	for _, u := range ups {
		total += u.bytes
	}
	if err := w.stage.Reserve(h.dev, total); err != nil {
		return err
	}
	for _, u := range ups {
		if err := u.run(&w.stage, w.stream); err != nil {
			return err
		}
	}
	if err := w.stream.Synchronize(); err != nil {
		return err
	}
	return then(w)
}

// fetch copies device results to the host through w's staging.
func (h *Host[K, V]) fetch(w *stager[K, V], bytes int, copies ...Copier) error {
	if err := w.stage.Reserve(h.dev, bytes); err != nil {
		return err
	}
	return Fetch(&w.stage, w.stream, copies...)
}

// Update stages a batch and applies it with UpdateDevice.
func (h *Host[K, V]) Update(ctx context.Context, keys []K, vals []V, dels []bool, kind UpdateKind) error {
	if len(keys) == 0 {
		return ctx.Err()
	}
	var dk cuda.Slice[K]
	var dv cuda.Slice[V]
	var df cuda.Slice[uint8]
	return h.with(ctx, func(w *stager[K, V]) ([]upload, error) {
		u1, err1 := up(h.dev, w.stream, &w.k1, keys, &dk)
		ups := []upload{u1}
		var err2, err3 error
		if kind != DeletesOnly {
			var u upload
			u, err2 = up(h.dev, w.stream, &w.v1, vals, &dv)
			ups = append(ups, u)
		}
		if kind == Mixed {
			var u upload
			u, err3 = up(h.dev, w.stream, &w.f1, BoolBytes(dels), &df)
			ups = append(ups, u)
		}
		return ups, errors.Join(err1, err2, err3)
	}, func(*stager[K, V]) error { return h.eng.UpdateDevice(ctx, dk, dv, df, kind) })
}

// Lookup stages the keys, runs LookupDevice and copies the answers back.
func (h *Host[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	n := len(keys)
	if n == 0 {
		return ctx.Err()
	}
	var dk cuda.Slice[K]
	return h.with(ctx, func(w *stager[K, V]) ([]upload, error) {
		u, err := up(h.dev, w.stream, &w.k1, keys, &dk)
		return []upload{u}, err
	}, func(w *stager[K, V]) error {
		rv, err1 := w.rv.Get(h.dev, w.stream, n)
		rf, err2 := w.rf.Get(h.dev, w.stream, n)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if err := h.eng.LookupDevice(ctx, dk, rv, rf); err != nil {
			return err
		}
		return h.fetch(w, gpurt.Bytes[V](n)+gpurt.Bytes[uint8](n), Pair(vals, rv), Pair(BoolBytes(found), rf))
	})
}

// Neighbor stages the keys, runs NeighborDevice and copies the answers back.
func (h *Host[K, V]) Neighbor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool, succ bool) error {
	n := len(keys)
	if n == 0 {
		return ctx.Err()
	}
	var dk cuda.Slice[K]
	return h.with(ctx, func(w *stager[K, V]) ([]upload, error) {
		u, err := up(h.dev, w.stream, &w.k1, keys, &dk)
		return []upload{u}, err
	}, func(w *stager[K, V]) error {
		rk, err1 := w.rk.Get(h.dev, w.stream, n)
		rv, err2 := w.rv.Get(h.dev, w.stream, n)
		rf, err3 := w.rf.Get(h.dev, w.stream, n)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		if err := h.eng.NeighborDevice(ctx, dk, rk, rv, rf, succ); err != nil {
			return err
		}
		return h.fetch(w, gpurt.Bytes[K](n)+gpurt.Bytes[V](n)+gpurt.Bytes[uint8](n), Pair(outKeys, rk), Pair(outVals, rv), Pair(BoolBytes(found), rf))
	})
}

func (h *Host[K, V]) bounds(w *stager[K, V], lo, hi []K, dl, dh *cuda.Slice[K]) ([]upload, error) {
	u1, err1 := up(h.dev, w.stream, &w.k1, lo, dl)
	u2, err2 := up(h.dev, w.stream, &w.k2, hi, dh)
	return []upload{u1, u2}, errors.Join(err1, err2)
}

// Count stages the bounds, runs CountDevice and copies the counts back.
func (h *Host[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	n := len(lo)
	if n == 0 {
		return ctx.Err()
	}
	var dl, dh cuda.Slice[K]
	return h.with(ctx, func(w *stager[K, V]) ([]upload, error) { return h.bounds(w, lo, hi, &dl, &dh) }, func(w *stager[K, V]) error {
		dc, err := w.counts.Get(h.dev, w.stream, n)
		if err != nil {
			return err
		}
		if err := h.eng.CountDevice(ctx, dl, dh, dc); err != nil {
			return err
		}
		return h.fetch(w, gpurt.Bytes[uint32](n), Pair(counts, dc))
	})
}

// Range stages the bounds, runs RangeDevice and copies the result back.
func (h *Host[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	var res *warpkit.Ranges[K, V]
	if len(lo) == 0 {
		return &warpkit.Ranges[K, V]{Offsets: []int{0}}, ctx.Err()
	}
	var dl, dh cuda.Slice[K]
	err := h.with(ctx, func(w *stager[K, V]) ([]upload, error) { return h.bounds(w, lo, hi, &dl, &dh) }, func(w *stager[K, V]) error {
		dr, err := h.eng.RangeDevice(ctx, dl, dh)
		if err != nil {
			return err
		}
		defer dr.Free()
		res, err = RangeToHost(h.dev, &w.stage, w.stream, dr)
		return err
	})
	return res, err
}
