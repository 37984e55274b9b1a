// Package gpurt is the host-side runtime every GPU structure shares: grow-only
// device scratch buffers and the registry that frees them (this file), typed
// arrays carved from one such buffer (layout.go), device memory that grows in
// place (region.go), and pinned staging of Go slices (staging.go).
package gpurt

import (
	"reflect"

	"github.com/warpkit/warpkit/cuda"
)

// Buf is grow-only device scratch. Get returns a view of n elements; when the
// buffer is too small it waits for stream (work queued earlier may still use
// the old memory), frees it and allocates a larger one. The contents are not
// kept across growth.
type Buf[T cuda.Elem] struct{ s cuda.Slice[T] }

// Get returns n elements of scratch (the zero Slice for n == 0).
func (b *Buf[T]) Get(dev *cuda.Device, stream *cuda.Stream, n int) (cuda.Slice[T], error) {
	if n == 0 {
		return cuda.Slice[T]{}, nil
	}
	if b.s.Len() >= n {
		return b.s.Sub(0, n), nil
	}
	old := b.s.Len()
	if old > 0 {
		if err := stream.Synchronize(); err != nil {
			return cuda.Slice[T]{}, err
		}
		b.Free()
	}
	s, err := cuda.Alloc[T](dev, max(n, old+old/2))
	if err != nil && old+old/2 > n {
		s, err = cuda.Alloc[T](dev, n)
	}
	if err != nil {
		return cuda.Slice[T]{}, err
	}
	b.s = s
	return s.Sub(0, n), nil
}

// Cap returns how many elements the buffer holds without growing.
func (b *Buf[T]) Cap() int { return b.s.Len() }

// View returns the first n <= Cap() elements (the zero Slice for n == 0),
// kept from earlier work: for buffers that hold state between calls.
func (b *Buf[T]) View(n int) cuda.Slice[T] {
	if n == 0 {
		return cuda.Slice[T]{}
	}
	return b.s.Sub(0, n)
}

// Free releases the memory.
func (b *Buf[T]) Free() {
	if b.s.Len() > 0 {
		b.s.Free()
	}
	b.s = cuda.Slice[T]{}
}

func (*Buf[T]) scratch() {}

// deviceBytes is the device memory the buffer holds.
func (b *Buf[T]) deviceBytes() int64 { return b.s.Bytes() }

// scratchBuf is what the registry frees: Buf and Staging.
type scratchBuf interface {
	Free()
	scratch()
}

// FreeAll frees every scratch buffer held in the struct *owner points to:
// each field of type Buf or Staging, each element of an array of them, and
// (recursively) those of embedded or nested structs, so that a buffer added
// to a worker's fields is freed without a hand-kept list to forget it in.
// Pointers and slices are not followed (what they point to has its own owner).
func FreeAll(owner any) {
	walk(owner, "FreeAll", func(b scratchBuf) { b.Free() })
}

// DeviceBytes is the device memory held by the scratch buffers among owner's
// fields (the Bufs FreeAll would free): what a structure reports as kept
// between calls.
func DeviceBytes(owner any) int64 {
	var n int64
	walk(owner, "DeviceBytes", func(b scratchBuf) {
		if d, ok := b.(interface{ deviceBytes() int64 }); ok {
			n += d.deviceBytes()
		}
	})
	return n
}

func walk(owner any, op string, fn func(scratchBuf)) {
	v := reflect.ValueOf(owner)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic("gpurt." + op + ": owner must point to a struct")
	}
	walkIn(v.Elem(), fn)
}

// Release closes stream, which waits for the work queued on it, and then
// frees every scratch buffer among owner's fields (FreeAll) that the work
// may have used: the order a worker's teardown needs.
func Release(stream *cuda.Stream, owner any) error {
	err := stream.Close()
	FreeAll(owner)
	return err
}

func walkIn(v reflect.Value, fn func(scratchBuf)) {
	if v.CanAddr() {
		if b, ok := v.Addr().Interface().(scratchBuf); ok {
			fn(b)
			return
		}
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() || v.Field(i).CanAddr() {
				walkIn(reflectField(v, i), fn)
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			walkIn(v.Index(i), fn)
		}
	}
}

// reflectField returns field i of v, addressable even when unexported (the
// registry only calls Free and deviceBytes through it).
func reflectField(v reflect.Value, i int) reflect.Value {
	f := v.Field(i)
	if f.CanInterface() {
		return f
	}
	return reflect.NewAt(f.Type(), f.Addr().UnsafePointer()).Elem()
}
