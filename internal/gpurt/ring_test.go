package gpurt

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gputest"
)

// TestRing sends arrays of many lengths (shorter than a slot, a slot, many
// slots and a part) up through rings of one, two and three slots and back
// into other arrays, uploads queued back to back without a wait between
// them: every element arrives, the ring's pinned memory stays its slots,
// and Free leaves it empty.
func TestRing(t *testing.T) { ringRoundTrips(t, emu.Device(t, emu.Options{})) }

// TestGPURing is TestRing on a GPU, where copies run while the host fills
// the next slot.
func TestGPURing(t *testing.T) { ringRoundTrips(t, gputest.Device(t)) }

func ringRoundTrips(t *testing.T, dev *cuda.Device) {
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	const slot = 4096 // bytes: 1024 uint32s
	for _, slots := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			var r Ring
			defer r.Free()
			r.Init(dev, slots, slot)
			if r.Bytes() != 0 {
				t.Fatal("Init allocated")
			}
			lens := []int{1, 1023, 1024, 1025, 3*1024 + 17, 10 * 1024}
			srcs := make([][]uint32, len(lens))
			devs := make([]cuda.Slice[uint32], len(lens))
			for i, n := range lens {
				srcs[i] = make([]uint32, n)
				for j := range srcs[i] {
					srcs[i][j] = rng.Uint32()
				}
				if devs[i], err = cuda.Alloc[uint32](dev, n); err != nil {
					t.Fatal(err)
				}
				defer devs[i].Free()
				if err := RingUpload(&r, s, devs[i], srcs[i]); err != nil {
					t.Fatal(err)
				}
			}
			if r.Bytes() != slots*slot {
				t.Fatalf("ring holds %d bytes, want %d", r.Bytes(), slots*slot)
			}
			for i := range lens {
				got := make([]uint32, lens[i])
				if err := RingDownload(&r, s, got, devs[i]); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, srcs[i]) {
					t.Fatalf("%d elements: the round trip through the ring changed them", lens[i])
				}
			}
			if err := RingUpload(&r, s, devs[0], srcs[1]); err == nil {
				t.Fatal("an upload into a slice of another length succeeded")
			}
			r.Free()
			if r.Bytes() != 0 {
				t.Fatal("Free kept the memory")
			}
		})
	}
}
