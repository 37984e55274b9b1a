package gpurt

import (
	"errors"
	"fmt"
	"testing"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gputest"
)

// TestRegion grows a region in steps, small and large, writing each new
// part: what was written stays, the new room is filled, the address stays
// (mapped in place) or not (copied), a growth past Max fails and leaves the
// region as it was, and Free releases every byte.
func TestRegion(t *testing.T) { regionGrowth(t, emu.Device(t, emu.Options{})) }

// TestGPURegion is TestRegion on a GPU (2 MiB granules).
func TestGPURegion(t *testing.T) { regionGrowth(t, gputest.Device(t)) }

func regionGrowth(t *testing.T, dev *cuda.Device) {
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := dev.Granularity()
	if err != nil {
		t.Fatal(err)
	}
	for _, vmm := range []bool{true, false} {
		t.Run(fmt.Sprintf("vmm=%v", vmm), func(t *testing.T) {
			defer func(v bool) { regionVMM = v }(regionVMM)
			regionVMM = vmm
			free0, _, _ := dev.MemInfo()
			r := Region{Max: int64(20 * g)}
			if r.Cap() != 0 || r.Bytes().Len() != 0 {
				t.Fatal("the zero Region is not empty")
			}
			var want []byte
			var base cuda.DevicePtr
			for step, n := range []int64{100, 101, 3000, int64(g) + 5, int64(g) + 6, int64(5*g) + 1, int64(11 * g)} {
				used := int64(len(want))
				if err := r.Grow(dev, s, used, n, 0xee); err != nil {
					t.Fatalf("step %d: Grow(%d): %v", step, n, err)
				}
				if r.Cap() < n || r.Bytes().Len() != int(r.Cap()) {
					t.Fatalf("step %d: %d bytes for %d", step, r.Cap(), n)
				}
				if step == 0 {
					base = r.Bytes().Ptr()
				} else if vmm && r.Bytes().Ptr() != base {
					t.Fatalf("step %d: the region moved from %#x to %#x", step, base, r.Bytes().Ptr())
				}
				got := make([]byte, r.Cap())
				if err := r.Bytes().CopyToHost(got); err != nil {
					t.Fatal(err)
				}
				for i, b := range got {
					w := byte(0xee)
					if i < len(want) {
						w = want[i]
					}
					if b != w {
						t.Fatalf("step %d: byte %d of %d = %#x, want %#x", step, i, len(got), b, w)
					}
				}
				// Write the new bytes up to n (across the parts' seams).
				more := make([]byte, n-used)
				for i := range more {
					more[i] = byte(step*31 + i)
				}
				if err := r.Bytes().Sub(int(used), int(n)).CopyFromHost(more); err != nil {
					t.Fatal(err)
				}
				want = append(want, more...)
			}
			if vmm != (r.vr != nil) || vmm && len(r.parts) < 3 {
				t.Fatalf("vmm=%v: a range %v, %d parts", vmm, r.vr != nil, len(r.parts))
			}
			c := r.Cap()
			if err := r.Grow(dev, s, int64(len(want)), int64(21*g), 0); !errors.Is(err, cuda.ErrOutOfMemory) || r.Cap() != c {
				t.Fatalf("growing past Max: %v, %d bytes (was %d)", err, r.Cap(), c)
			}
			if err := r.Free(); err != nil {
				t.Fatal(err)
			}
			if r.Cap() != 0 {
				t.Fatal("a freed region holds memory")
			}
			if free1, _, _ := dev.MemInfo(); free1+g < free0 {
				t.Fatalf("free memory %d before, %d after Free", free0, free1)
			}
		})
	}
}
