package gpurt

import (
	"fmt"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/hostpar"
)

// Staging is pinned host memory through which Go slices travel to and from
// the device on a stream. Reserve sizes it for one call's transfers (no copy
// may be pending then); Upload and Download take consecutive regions of it.
type Staging struct {
	dev  *cuda.Device
	mem  *cuda.Pinned[uint8]
	used int
}

const stagingAlign = 16

func alignUp(n int) int { return (n + stagingAlign - 1) &^ (stagingAlign - 1) }

// Bytes returns the staging bytes n elements of T take.
func Bytes[T cuda.Elem](n int) int { var z T; return alignUp(n * int(unsafe.Sizeof(z))) }

// Reserve makes room for total bytes (sum of Bytes of every transfer of the
// call) and starts handing out regions from the beginning.
func (s *Staging) Reserve(dev *cuda.Device, total int) error {
	s.dev, s.used = dev, 0
	if s.mem != nil && s.mem.Len() >= total {
		return nil
	}
	s.Free()
	p, err := cuda.AllocPinned[uint8](dev, max(total, 1<<16))
	if err != nil {
		return err
	}
	s.mem = p
	return nil
}

// Bytes is the pinned memory the staging holds.
func (s *Staging) Bytes() int {
	if s.mem == nil {
		return 0
	}
	return s.mem.Len()
}

// Free releases the pinned memory.
func (s *Staging) Free() {
	if s.mem != nil {
		s.mem.Free()
		s.mem = nil
	}
}

func (*Staging) scratch() {}

func (s *Staging) take(nbytes int) (int, error) {
	if s.mem == nil || s.used+alignUp(nbytes) > s.mem.Len() {
		return 0, fmt.Errorf("%w: staging region of %d bytes not reserved", warpkit.ErrInvalidArgument, nbytes)
	}
	off := s.used
	s.used += alignUp(nbytes)
	return off, nil
}

func byteView[T cuda.Elem](d cuda.Slice[T]) (cuda.Slice[uint8], error) {
	return cuda.View[uint8](d.Buffer(), int(d.Ptr()-d.Buffer().Ptr()), int(d.Bytes()))
}

// Upload copies src into pinned memory and enqueues its copy into dst (which
// has len(src) elements) on stream.
func Upload[T cuda.Elem](s *Staging, stream *cuda.Stream, dst cuda.Slice[T], src []T) error {
	if len(src) == 0 {
		return nil
	}
	if dst.Len() != len(src) {
		return fmt.Errorf("%w: upload of %d elements into %d", warpkit.ErrInvalidArgument, len(src), dst.Len())
	}
	nb := int(dst.Bytes())
	off, err := s.take(nb)
	if err != nil {
		return err
	}
	hostpar.Copy(s.mem.Data()[off:off+nb], unsafe.Slice((*uint8)(unsafe.Pointer(&src[0])), nb))
	db, err := byteView(dst)
	if err != nil {
		return err
	}
	return cuda.CopyToDeviceAsync(db, s.mem, off, stream)
}

// Pending is a device-to-host copy in flight; Finish after the stream is
// synchronized.
type Pending struct {
	s        *Staging
	off, nb  int
	finishTo unsafe.Pointer
}

// Download enqueues the copy of src into pinned memory on stream; after the
// stream is synchronized, Finish copies it into dst (len(dst) == src.Len()).
func Download[T cuda.Elem](s *Staging, stream *cuda.Stream, dst []T, src cuda.Slice[T]) (Pending, error) {
	if len(dst) == 0 {
		return Pending{}, nil
	}
	if src.Len() != len(dst) {
		return Pending{}, fmt.Errorf("%w: download of %d elements into %d", warpkit.ErrInvalidArgument, src.Len(), len(dst))
	}
	nb := int(src.Bytes())
	off, err := s.take(nb)
	if err != nil {
		return Pending{}, err
	}
	sb, err := byteView(src)
	if err != nil {
		return Pending{}, err
	}
	if err := cuda.CopyToHostAsync(s.mem, off, sb, stream); err != nil {
		return Pending{}, err
	}
	return Pending{s: s, off: off, nb: nb, finishTo: unsafe.Pointer(&dst[0])}, nil
}

// Finish copies the downloaded bytes into the destination slice.
func (p Pending) Finish() {
	if p.nb == 0 {
		return
	}
	hostpar.Copy(unsafe.Slice((*uint8)(p.finishTo), p.nb), p.s.mem.Data()[p.off:p.off+p.nb])
}

// Pendings collects the downloads of one wait: Add takes Download's results
// (pend.Add(gpurt.Download(...))), Finish finishes them all.
type Pendings []Pending

// Add appends p unless err is set, and returns err.
func (ps *Pendings) Add(p Pending, err error) error {
	if err == nil {
		*ps = append(*ps, p)
	}
	return err
}

// Finish finishes every download, after the stream is synchronized.
func (ps Pendings) Finish() {
	for _, p := range ps {
		p.Finish()
	}
}
