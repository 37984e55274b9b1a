package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/lsm"
	"github.com/warpkit/warpkit/sortedarray"
)

func init() {
	registerTourPart(tourPart{order: 40, name: "sortedarray and lsm: batch dictionaries (sorted array, GPU LSM)", run: tourLSM})
}

// tourDict is the part of the API the tour drives; both structures have it.
type tourDict interface {
	Update(ctx context.Context, keys []uint32, vals []uint32, dels []bool) error
	Lookup(ctx context.Context, keys []uint32, vals []uint32, found []bool) error
	Count(ctx context.Context, lo, hi []uint32, counts []uint32) error
	Range(ctx context.Context, lo, hi []uint32) (*warpkit.Ranges[uint32, uint32], error)
	Successor(ctx context.Context, keys, outKeys []uint32, outVals []uint32, found []bool) error
}

// tourLSM applies the same mixed batches (insertions, re-insertions and
// deletions over the full 32-bit key range) to a sorted array and an LSM,
// cleans the LSM up, and checks that both answer every query alike.
func tourLSM(ctx context.Context, env tourEnv) error {
	const batch, batches = 1 << 12, 24
	l, err := lsm.New[uint32, uint32](lsm.Options{Backend: env.Backend, Device: env.Device, BatchSize: batch})
	if err != nil {
		return err
	}
	defer l.Close()
	a, err := sortedarray.New[uint32, uint32](sortedarray.Options{Backend: env.Backend, Device: env.Device})
	if err != nil {
		return err
	}
	defer a.Close()

	r := rand.New(rand.NewPCG(3, 4))
	var inserted []uint32
	var took [2]time.Duration
	for range batches {
		keys, vals, dels := make([]uint32, batch), make([]uint32, batch), make([]bool, batch)
		for j := range keys {
			switch c := r.IntN(10); {
			case len(inserted) > 0 && c == 0: // delete an earlier key
				keys[j], dels[j] = inserted[r.IntN(len(inserted))], true
			case len(inserted) > 0 && c == 1: // replace an earlier key's value
				keys[j], vals[j] = inserted[r.IntN(len(inserted))], r.Uint32()
			default:
				keys[j], vals[j] = r.Uint32(), r.Uint32()
				inserted = append(inserted, keys[j])
			}
		}
		for i, d := range []tourDict{a, l} {
			start := time.Now()
			if err := d.Update(ctx, keys, vals, dels); err != nil {
				return err
			}
			took[i] += time.Since(start)
		}
	}
	st, err := l.Stats(ctx)
	if err != nil {
		return err
	}
	live, err := a.Len(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("   %d mixed batches of %d (10%% deletions, 10%% replacements): sorted array %s, LSM %s (%.1fx)  [%s backend]\n",
		batches, batch, took[0].Round(time.Microsecond), took[1].Round(time.Microsecond), took[0].Seconds()/took[1].Seconds(), l.Backend())
	fmt.Printf("   LSM: %d entries resident in levels %v and %d staged for %d live keys\n", st.Resident, st.Levels, st.Staged, live)
	if err := tourCompare(ctx, a, l, inserted, "before cleanup"); err != nil {
		return err
	}
	start := time.Now()
	if err := l.Compact(ctx); err != nil {
		return err
	}
	if st, err = l.Stats(ctx); err != nil {
		return err
	}
	fmt.Printf("   LSM compaction (the paper's cleanup) in %s: %d entries resident in levels %v and %d staged\n", time.Since(start).Round(time.Microsecond), st.Resident, st.Levels, st.Staged)
	return tourCompare(ctx, a, l, inserted, "after cleanup")
}

// tourCompare runs lookups, counts, ranges and successors on both structures
// and requires equal answers: the same values, counts, range pairs (keys and
// values) and successor pairs.
func tourCompare(ctx context.Context, a, l tourDict, keys []uint32, when string) error {
	n := len(keys)
	var got [2][]uint32
	var found [2][]bool
	var took [2]time.Duration
	for i, d := range []tourDict{a, l} {
		got[i], found[i] = make([]uint32, n), make([]bool, n)
		start := time.Now()
		if err := d.Lookup(ctx, keys, got[i], found[i]); err != nil {
			return err
		}
		took[i] = time.Since(start)
	}
	present := 0
	for j := range keys {
		if got[0][j] != got[1][j] || found[0][j] != found[1][j] {
			return fmt.Errorf("%s: lookup(%d): sorted array (%d, %v), LSM (%d, %v)", when, keys[j], got[0][j], found[0][j], got[1][j], found[1][j])
		}
		if found[0][j] {
			present++
		}
	}
	lo, hi := make([]uint32, 1000), make([]uint32, 1000)
	for j := range lo {
		lo[j] = keys[j]
		hi[j] = lo[j] + 1<<22
		if hi[j] < lo[j] {
			hi[j] = ^uint32(0)
		}
	}
	var counts [2][]uint32
	var ranges [2]*warpkit.Ranges[uint32, uint32]
	var succK, succV [2][]uint32
	var succF [2][]bool
	for i, d := range []tourDict{a, l} {
		counts[i], succK[i], succV[i], succF[i] = make([]uint32, len(lo)), make([]uint32, len(lo)), make([]uint32, len(lo)), make([]bool, len(lo))
		var err error
		if err = d.Count(ctx, lo, hi, counts[i]); err == nil {
			ranges[i], err = d.Range(ctx, lo, hi)
		}
		if err == nil {
			err = d.Successor(ctx, lo, succK[i], succV[i], succF[i])
		}
		if err != nil {
			return err
		}
	}
	total := 0
	for j := range lo {
		if counts[0][j] != counts[1][j] || ranges[0].Count(j) != ranges[1].Count(j) {
			return fmt.Errorf("%s: query [%d, %d]: counts %d/%d, ranges of %d/%d pairs", when, lo[j], hi[j],
				counts[0][j], counts[1][j], ranges[0].Count(j), ranges[1].Count(j))
		}
		ra, rl := ranges[0], ranges[1]
		for p := range ra.Count(j) {
			pa, pl := ra.Offsets[j]+p, rl.Offsets[j]+p
			if ra.Keys[pa] != rl.Keys[pl] || ra.Vals[pa] != rl.Vals[pl] {
				return fmt.Errorf("%s: range [%d, %d], pair %d: sorted array (%d, %d), LSM (%d, %d)", when, lo[j], hi[j], p,
					ra.Keys[pa], ra.Vals[pa], rl.Keys[pl], rl.Vals[pl])
			}
		}
		if succK[0][j] != succK[1][j] || succV[0][j] != succV[1][j] || succF[0][j] != succF[1][j] {
			return fmt.Errorf("%s: successor(%d): sorted array (%d, %d, %v), LSM (%d, %d, %v)", when, lo[j],
				succK[0][j], succV[0][j], succF[0][j], succK[1][j], succV[1][j], succF[1][j])
		}
		total += int(counts[0][j])
	}
	fmt.Printf("   %s: %d lookups (%d present) agree: sorted array %s, LSM %s; 1000 counts, ranges (%d pairs) and successors agree\n",
		when, n, present, took[0].Round(time.Microsecond), took[1].Round(time.Microsecond), total)
	return nil
}
