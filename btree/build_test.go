package btree

import (
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

// TestGPUBuildMatchesCPU checks Build from Go slices on the CUDA backend, which
// sorts on the device with prim (as BuildDevice does), against the CPU
// backend's Build of the same pairs: every width pair, repeated keys whose
// pairs carry different values (the last must win), builds over a non-empty
// tree and an empty build. The caller's slices must come back unchanged.
func TestGPUBuildMatchesCPU(t *testing.T) {
	dev := gputest.Device(t)
	t.Run("u32u32", func(t *testing.T) { testBuildMatchesCPU[uint32, uint32](t, dev) })
	t.Run("u64u64", func(t *testing.T) { testBuildMatchesCPU[uint64, uint64](t, dev) })
	t.Run("u32u64", func(t *testing.T) { testBuildMatchesCPU[uint32, uint64](t, dev) })
	t.Run("u64u32", func(t *testing.T) { testBuildMatchesCPU[uint64, uint32](t, dev) })
}

func testBuildMatchesCPU[K, V warpkit.Word](t *testing.T, dev *cuda.Device) {
	tr := newGPUTree[K, V](t, dev, Options{InitialNodes: 8})
	d := newDiffer(t, tr, 51)
	ctx := d.ctx
	// Hand-picked: key 5 last has value 4, key 3 value 5, the top key value 7.
	var top K
	top--
	ks, vs := []K{5, 3, 5, top, 5, 3, top}, []V{1, 2, 3, 6, 4, 5, 7}
	d.must(tr.Build(ctx, ks, vs), "build")
	if tr.gpu.prim == nil {
		t.Fatal("Build did not use the device sort")
	}
	got, gv, err := tr.gpu.pairs(ctx)
	d.must(err, "pairs")
	if !slices.Equal(got, []K{3, 5, top}) || !slices.Equal(gv, []V{5, 4, 7}) {
		t.Fatalf("build of repeated keys: %v %v, want [3 5 %d] [5 4 7]", got, gv, top)
	}
	for _, n := range []int{1, 2, 1000, 250000, 0, 30000} {
		d.round = n     // failures name the round: the batch size
		ks := d.keys(n) // dense ranges near both ends: many repeats
		vs := make([]V, n)
		for i := range vs {
			vs[i] = V(i) // repeated keys carry different values
		}
		ks0, vs0 := slices.Clone(ks), slices.Clone(vs)
		d.must(tr.Build(ctx, ks, vs), "build")
		if !slices.Equal(ks, ks0) || !slices.Equal(vs, vs0) {
			t.Fatalf("n=%d: Build reordered the caller's slices", n)
		}
		d.must(d.oracle.Build(ctx, ks, vs), "oracle build")
		d.compareAll()
		d.must(tr.Check(ctx), "check")
		// The built tree takes updates like any other.
		ins := d.keys(1 + n/10)
		iv := make([]V, len(ins))
		for i, k := range ins {
			iv[i] = d.value(k)
		}
		d.must(tr.Insert(ctx, ins, iv), "insert")
		d.must(d.oracle.Insert(ctx, ins, iv), "oracle insert")
		d.compareAll()
	}
}
