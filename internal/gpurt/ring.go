package gpurt

import (
	"fmt"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/hostpar"
)

// Ring is a fixed amount of pinned host memory, in slots of equal size,
// through which arrays of any length travel to and from the device a slot at
// a time: the host fills (or empties) one slot while the device copies
// another. Unlike Staging it never grows, so the pinned memory a worker keeps
// is bounded however large its arrays are; the price is the host's copy of
// every byte into or out of a slot, and a wait per slot reused.
//
// The pinned memory is allocated at the first copy and kept until Free. A
// slot holds its bytes until the copy queued from it has run: each slot
// records an event after its copy, and a slot is refilled only after its
// event. Upload returns once its last slot's copy is queued (the stream runs
// it in order before later work); Download returns once every byte is in
// dst. One goroutine uses a Ring at a time, with one stream.
type Ring struct {
	dev   *cuda.Device
	mem   *cuda.Pinned[uint8]
	slot  int // bytes a slot
	n     int // slots
	ev    []*cuda.Event
	busy  []bool // ev[i] was recorded after a copy from or into slot i
	next  int    // the slot the next chunk takes
	slots int    // what Init asked for, before the memory exists
}

// Init sets the ring's shape: slots of slotBytes (at least one of each; the
// memory is allocated at the first copy). A ring already allocated in
// another shape is freed first.
func (r *Ring) Init(dev *cuda.Device, slots, slotBytes int) {
	slots, slotBytes = max(1, slots), max(4096, slotBytes)
	if r.mem != nil && (r.dev != dev || r.n != slots || r.slot != slotBytes) {
		r.Free()
	}
	r.dev, r.slots, r.slot = dev, slots, slotBytes
}

// Bytes is the pinned memory the ring holds (0 before its first copy).
func (r *Ring) Bytes() int {
	if r.mem == nil {
		return 0
	}
	return r.mem.Len()
}

func (r *Ring) alloc() error {
	if r.mem != nil {
		return nil
	}
	if r.dev == nil || r.slots == 0 {
		return fmt.Errorf("%w: gpurt.Ring used before Init", warpkit.ErrInvalidArgument)
	}
	mem, err := cuda.AllocPinned[uint8](r.dev, r.slots*r.slot)
	if err != nil {
		return err
	}
	ev := make([]*cuda.Event, r.slots)
	for i := range ev {
		if ev[i], err = r.dev.NewEvent(); err != nil {
			for _, e := range ev[:i] {
				e.Close()
			}
			mem.Free()
			return err
		}
	}
	r.mem, r.ev, r.busy, r.n, r.next = mem, ev, make([]bool, r.slots), r.slots, 0
	return nil
}

// take returns the next slot, once the copy last queued from or into it has
// run.
func (r *Ring) take() (int, error) {
	i := r.next
	r.next = (r.next + 1) % r.n
	if r.busy[i] {
		if err := r.ev[i].Synchronize(); err != nil {
			return 0, err
		}
		r.busy[i] = false
	}
	return i, nil
}

// queued records slot i's event after the copy just queued on stream.
func (r *Ring) queued(i int, stream *cuda.Stream) error {
	if err := r.ev[i].Record(stream); err != nil {
		return err
	}
	r.busy[i] = true
	return nil
}

// Wait waits for every copy queued through the ring.
func (r *Ring) Wait() error {
	for i := range r.busy {
		if r.busy[i] {
			if err := r.ev[i].Synchronize(); err != nil {
				return err
			}
			r.busy[i] = false
		}
	}
	return nil
}

// Free waits for the ring's copies and releases its memory and events.
func (r *Ring) Free() {
	if r.mem == nil {
		return
	}
	r.Wait()
	for _, e := range r.ev {
		e.Close()
	}
	r.mem.Free()
	r.mem, r.ev, r.busy, r.n = nil, nil, nil, 0
}

func (*Ring) scratch() {}

// RingUpload queues the copy of src into dst (len(src) elements) on stream
// through r, a slot at a time.
func RingUpload[T cuda.Elem](r *Ring, stream *cuda.Stream, dst cuda.Slice[T], src []T) error {
	if len(src) == 0 {
		return nil
	}
	if dst.Len() != len(src) {
		return fmt.Errorf("%w: ring upload of %d elements into %d", warpkit.ErrInvalidArgument, len(src), dst.Len())
	}
	if err := r.alloc(); err != nil {
		return err
	}
	db, err := byteView(dst)
	if err != nil {
		return err
	}
	sb := unsafe.Slice((*uint8)(unsafe.Pointer(&src[0])), int(dst.Bytes()))
	for lo := 0; lo < len(sb); lo += r.slot {
		hi := min(len(sb), lo+r.slot)
		i, err := r.take()
		if err != nil {
			return err
		}
		off := i * r.slot
		hostpar.Copy(r.mem.Data()[off:off+hi-lo], sb[lo:hi])
		if err := cuda.CopyToDeviceAsync(db.Sub(lo, hi), r.mem, off, stream); err != nil {
			return err
		}
		if err := r.queued(i, stream); err != nil {
			return err
		}
	}
	return nil
}

// RingDownload copies src into dst (len(dst) elements) through r, a slot at
// a time, after the work queued on stream before it; it returns when dst
// holds every byte.
func RingDownload[T cuda.Elem](r *Ring, stream *cuda.Stream, dst []T, src cuda.Slice[T]) error {
	if len(dst) == 0 {
		return nil
	}
	if src.Len() != len(dst) {
		return fmt.Errorf("%w: ring download of %d elements into %d", warpkit.ErrInvalidArgument, src.Len(), len(dst))
	}
	if err := r.alloc(); err != nil {
		return err
	}
	sb, err := byteView(src)
	if err != nil {
		return err
	}
	db := unsafe.Slice((*uint8)(unsafe.Pointer(&dst[0])), int(src.Bytes()))
	// Queue a slot's copy, then empty the one queued before it while the
	// device fills this one.
	type inFlight struct{ slot, lo, hi int }
	var prev *inFlight
	drain := func(f *inFlight) error {
		if err := r.ev[f.slot].Synchronize(); err != nil {
			return err
		}
		r.busy[f.slot] = false
		off := f.slot * r.slot
		hostpar.Copy(db[f.lo:f.hi], r.mem.Data()[off:off+f.hi-f.lo])
		return nil
	}
	for lo := 0; lo < len(db); lo += r.slot {
		hi := min(len(db), lo+r.slot)
		if prev != nil && prev.slot == r.next { // (a ring of one slot)
			if err := drain(prev); err != nil {
				return err
			}
			prev = nil
		}
		i, err := r.take()
		if err != nil {
			return err
		}
		if err := cuda.CopyToHostAsync(r.mem, i*r.slot, sb.Sub(lo, hi), stream); err != nil {
			return err
		}
		if err := r.queued(i, stream); err != nil {
			return err
		}
		if prev != nil {
			if err := drain(prev); err != nil {
				return err
			}
		}
		prev = &inFlight{i, lo, hi}
	}
	return drain(prev)
}
