package conformance_test

import (
	"context"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/btree"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/conformance"
	"github.com/warpkit/warpkit/lsm"
	"github.com/warpkit/warpkit/mvbtree"
	"github.com/warpkit/warpkit/slaballoc"
	"github.com/warpkit/warpkit/slabhash"
	"github.com/warpkit/warpkit/sortedarray"
)

// backends returns the backends to test: the CPU always, CUDA where a
// device is present.
func backends() []warpkit.Backend {
	if _, err := cuda.Devices(); err == nil {
		return []warpkit.Backend{warpkit.CPU, warpkit.CUDA}
	}
	return []warpkit.Backend{warpkit.CPU}
}

func run(t *testing.T, sub conformance.Subject) {
	for _, b := range backends() {
		t.Run(b.String(), func(t *testing.T) { conformance.Run(t, sub, b) })
	}
}

// sorted is the adapter of the ordered dictionaries (lsm, sortedarray,
// btree), which share these methods.
type sorted interface {
	conformance.Structure
	Insert(ctx context.Context, keys, vals []uint32) error
	Lookup(ctx context.Context, keys, vals []uint32, found []bool) error
	Delete(ctx context.Context, keys []uint32) error
	Count(ctx context.Context, lo, hi []uint32, counts []uint32) error
	Range(ctx context.Context, lo, hi []uint32) (*warpkit.Ranges[uint32, uint32], error)
}

func sortedSubject(name string, open func(b warpkit.Backend) (sorted, error)) conformance.Subject {
	as := func(s conformance.Structure) sorted { return s.(sorted) }
	return conformance.Subject{
		Name: name,
		New: func(t *testing.T, b warpkit.Backend) conformance.Structure {
			s, err := open(b)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Insert: func(ctx context.Context, s conformance.Structure, keys, vals []uint32) error {
			return as(s).Insert(ctx, keys, vals)
		},
		Lookup: func(ctx context.Context, s conformance.Structure, keys []uint32) ([]uint32, []bool, error) {
			vals, found := make([]uint32, len(keys)), make([]bool, len(keys))
			return vals, found, as(s).Lookup(ctx, keys, vals, found)
		},
		Delete: func(ctx context.Context, s conformance.Structure, keys []uint32) error {
			return as(s).Delete(ctx, keys)
		},
		Mismatch: func(ctx context.Context, s conformance.Structure) error {
			return as(s).Lookup(ctx, []uint32{1, 2}, make([]uint32, 2), make([]bool, 1))
		},
		Count: func(ctx context.Context, s conformance.Structure, lo, hi []uint32) ([]uint32, error) {
			c := make([]uint32, len(lo))
			return c, as(s).Count(ctx, lo, hi, c)
		},
		Range: func(ctx context.Context, s conformance.Structure, lo, hi []uint32) (*warpkit.Ranges[uint32, uint32], error) {
			return as(s).Range(ctx, lo, hi)
		},
	}
}

func TestLSM(t *testing.T) {
	run(t, sortedSubject("lsm", func(b warpkit.Backend) (sorted, error) {
		return lsm.New[uint32, uint32](lsm.Options{Backend: b, BatchSize: 64})
	}))
}

func TestSortedArray(t *testing.T) {
	run(t, sortedSubject("sortedarray", func(b warpkit.Backend) (sorted, error) {
		return sortedarray.New[uint32, uint32](sortedarray.Options{Backend: b})
	}))
}

func TestBTree(t *testing.T) {
	run(t, sortedSubject("btree", func(b warpkit.Backend) (sorted, error) {
		return btree.New[uint32, uint32](btree.Options{Backend: b})
	}))
}

// TestMVBTree runs on the CPU backend: mvbtree's CUDA backend is not built
// yet (New refuses Backend CUDA).
func TestMVBTree(t *testing.T) {
	sub := sortedSubject("mvbtree", func(b warpkit.Backend) (sorted, error) {
		return mvbtree.New[uint32, uint32](mvbtree.Options{Backend: b})
	})
	t.Run("cpu", func(t *testing.T) { conformance.Run(t, sub, warpkit.CPU) })
}

// TestMVBTreeSnapshot: a snapshot handle follows the contract too (every
// method ErrClosed once closed, Device methods ErrNeedsCUDA on the CPU).
func TestMVBTreeSnapshot(t *testing.T) {
	tr, err := mvbtree.New[uint32, uint32](mvbtree.Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	s, err := tr.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	conformance.CheckDeviceOnCPU(t, s)
	conformance.CheckClosed(t, s)
}

func TestSlabHashMap(t *testing.T) {
	as := func(s conformance.Structure) *slabhash.Map[uint32, uint32] { return s.(*slabhash.Map[uint32, uint32]) }
	run(t, conformance.Subject{
		Name: "slabhash.Map",
		New: func(t *testing.T, b warpkit.Backend) conformance.Structure {
			m, err := slabhash.NewMap[uint32, uint32](slabhash.Options{Backend: b})
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		Insert: func(ctx context.Context, s conformance.Structure, keys, vals []uint32) error {
			return as(s).Insert(ctx, keys, vals, nil)
		},
		Lookup: func(ctx context.Context, s conformance.Structure, keys []uint32) ([]uint32, []bool, error) {
			vals, res := make([]uint32, len(keys)), make([]slabhash.Result, len(keys))
			err := as(s).Lookup(ctx, keys, vals, res)
			return vals, found(res), err
		},
		Delete: func(ctx context.Context, s conformance.Structure, keys []uint32) error {
			return as(s).Delete(ctx, keys, nil)
		},
		Mismatch: func(ctx context.Context, s conformance.Structure) error {
			return as(s).Apply(ctx, []slabhash.Op{slabhash.OpInsert}, []uint32{1, 2}, []uint32{1, 2}, nil)
		},
	})
}

func TestSlabHashSet(t *testing.T) {
	as := func(s conformance.Structure) *slabhash.Set[uint32] { return s.(*slabhash.Set[uint32]) }
	run(t, conformance.Subject{
		Name: "slabhash.Set",
		New: func(t *testing.T, b warpkit.Backend) conformance.Structure {
			m, err := slabhash.NewSet[uint32](slabhash.Options{Backend: b})
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		Insert: func(ctx context.Context, s conformance.Structure, keys, vals []uint32) error {
			if len(keys) != len(vals) { // a set has no values: keep the contract's length rule
				return as(s).Insert(ctx, keys, make([]slabhash.Result, len(vals)))
			}
			return as(s).Insert(ctx, keys, nil)
		},
		Lookup: func(ctx context.Context, s conformance.Structure, keys []uint32) ([]uint32, []bool, error) {
			res := make([]slabhash.Result, len(keys))
			err := as(s).Lookup(ctx, keys, res)
			vals := make([]uint32, len(keys))
			for i := range keys {
				if res[i] == slabhash.Found {
					vals[i] = keys[i] // the conformance suite stores each key as its value
				}
			}
			return vals, found(res), err
		},
		Delete: func(ctx context.Context, s conformance.Structure, keys []uint32) error {
			return as(s).Delete(ctx, keys, nil)
		},
		Mismatch: func(ctx context.Context, s conformance.Structure) error {
			return as(s).Lookup(ctx, []uint32{1, 2}, make([]slabhash.Result, 1))
		},
	})
}

func TestSlabHashMultiMap(t *testing.T) {
	as := func(s conformance.Structure) *slabhash.MultiMap[uint32, uint32] {
		return s.(*slabhash.MultiMap[uint32, uint32])
	}
	run(t, conformance.Subject{
		Name: "slabhash.MultiMap",
		New: func(t *testing.T, b warpkit.Backend) conformance.Structure {
			m, err := slabhash.NewMultiMap[uint32, uint32](slabhash.Options{Backend: b})
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		Insert: func(ctx context.Context, s conformance.Structure, keys, vals []uint32) error {
			return as(s).Insert(ctx, keys, vals, nil)
		},
		Lookup: func(ctx context.Context, s conformance.Structure, keys []uint32) ([]uint32, []bool, error) {
			offs, all, err := as(s).LookupAll(ctx, keys)
			vals, found := make([]uint32, len(keys)), make([]bool, len(keys))
			if err != nil {
				return vals, found, err
			}
			for i := range keys {
				if offs[i+1] > offs[i] {
					vals[i], found[i] = all[offs[i]], true
				}
			}
			return vals, found, nil
		},
		Delete: func(ctx context.Context, s conformance.Structure, keys []uint32) error {
			return as(s).DeleteAll(ctx, keys, make([]uint32, len(keys)))
		},
		Mismatch: func(ctx context.Context, s conformance.Structure) error {
			return as(s).Count(ctx, []uint32{1, 2}, make([]uint32, 1))
		},
	})
}

func found(res []slabhash.Result) []bool {
	f := make([]bool, len(res))
	for i, r := range res {
		f[i] = r == slabhash.Found
	}
	return f
}

// TestSlabAlloc: the allocator is not a dictionary; it follows the contract's
// closing and device rules.
func TestSlabAlloc(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.String(), func(t *testing.T) {
			p, err := slaballoc.New(slaballoc.Options{Backend: b, BlocksPerSuperBlock: 1})
			if err != nil {
				t.Fatal(err)
			}
			if b == warpkit.CPU {
				conformance.CheckDeviceOnCPU(t, p)
			}
			conformance.CheckClosed(t, p)
		})
	}
}
