package main

import (
	"context"
	"fmt"
	"time"

	hashbench "github.com/warpkit/warpkit/bench/hash"
	"github.com/warpkit/warpkit/slabhash"
)

func init() {
	registerTourPart(tourPart{order: 10, name: "slabhash: concurrent hash map, set and multimap", run: tourHash})
}

func tourRate(n int, d time.Duration) string {
	return fmt.Sprintf("%.1f M/s", float64(n)/d.Seconds()/1e6)
}

func tourHash(ctx context.Context, env tourEnv) error {
	const n = 1 << 17
	opts := slabhash.Options{Backend: env.Backend, Device: env.Device, ExpectedSize: n}
	keys := hashbench.Keys(0, n)
	vals := make([]uint32, n)
	for i := range vals {
		vals[i] = uint32(i)
	}

	m, err := slabhash.NewMap[uint32, uint32](opts)
	if err != nil {
		return err
	}
	defer m.Close()
	start := time.Now()
	if err := m.Insert(ctx, keys, vals, nil); err != nil {
		return err
	}
	ins := time.Since(start)
	got := make([]uint32, n)
	res := make([]slabhash.Result, n)
	start = time.Now()
	if err := m.Lookup(ctx, keys, got, res); err != nil {
		return err
	}
	find := time.Since(start)
	for i := range keys {
		if res[i] != slabhash.Found || got[i] != vals[i] {
			return fmt.Errorf("map: key %#x: %v %d, want %d", keys[i], res[i], got[i], vals[i])
		}
	}
	fmt.Printf("   Map[uint32,uint32]: inserted %d keys (%s), found them all (%s)\n", n, tourRate(n, ins), tourRate(n, find))
	// One mixed batch: delete the first half, replace a quarter, look up the rest.
	ops := make([]slabhash.Op, n)
	for i := range ops {
		switch {
		case i < n/2:
			ops[i] = slabhash.OpDelete
		case i < 3*n/4:
			ops[i], vals[i] = slabhash.OpInsert, vals[i]+1
		default:
			ops[i] = slabhash.OpFind
		}
	}
	start = time.Now()
	if err := m.Apply(ctx, ops, keys, vals, res); err != nil {
		return err
	}
	mixed := time.Since(start)
	counts := map[slabhash.Result]int{}
	for _, r := range res {
		counts[r]++
	}
	live, err := m.Len(ctx)
	if err != nil {
		return err
	}
	if counts[slabhash.Removed] != n/2 || counts[slabhash.Present] != n/4 || counts[slabhash.Found] != n/4 || live != n/2 {
		return fmt.Errorf("map: mixed batch gave %v, Len %d", counts, live)
	}
	if err := m.Compact(ctx); err != nil {
		return err
	}
	if live, err = m.Len(ctx); err != nil {
		return err
	}
	fmt.Printf("   one Apply batch: %d deletes, %d replaces, %d finds in one call (%s); Len %d after Compact\n",
		counts[slabhash.Removed], counts[slabhash.Present], counts[slabhash.Found], tourRate(n, mixed), live)
	if st, err := m.Stats(ctx); err == nil && st.MemoryBytes > 0 {
		fmt.Printf("   layout %s, %d buckets, %.0f%% memory utilization\n", st.Layout, st.Buckets, 100*st.Utilization)
	}

	s, err := slabhash.NewSet[uint64](opts)
	if err != nil {
		return err
	}
	defer s.Close()
	wide := make([]uint64, n)
	for i := range wide {
		wide[i] = uint64(keys[i])<<32 | uint64(i)
	}
	if err := s.Insert(ctx, wide[:n/2], nil); err != nil {
		return err
	}
	if err := s.Lookup(ctx, wide, res); err != nil {
		return err
	}
	in := 0
	for _, r := range res {
		if r == slabhash.Found {
			in++
		}
	}
	if in != n/2 {
		return fmt.Errorf("set: %d of %d inserted keys found", in, n/2)
	}
	fmt.Printf("   Set[uint64]: inserted %d keys, membership of %d checked: %d present\n", n/2, n, in)

	mm, err := slabhash.NewMultiMap[uint32, uint64](opts)
	if err != nil {
		return err
	}
	defer mm.Close()
	const owners = 1000
	mk := make([]uint32, n)
	mv := make([]uint64, n)
	for i := range mk {
		mk[i], mv[i] = keys[i%owners], uint64(i)
	}
	if err := mm.Insert(ctx, mk, mv, nil); err != nil {
		return err
	}
	offs, all, err := mm.LookupAll(ctx, keys[:3])
	if err != nil {
		return err
	}
	removed := make([]uint32, owners)
	if err := mm.DeleteAll(ctx, keys[:owners/2], removed[:owners/2]); err != nil {
		return err
	}
	left, err := mm.Len(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("   MultiMap[uint32,uint64]: %d pairs under %d keys; key 0 holds %d values (first %v); deleting all of half the keys removed %d each; %d pairs left\n",
		n, owners, offs[1]-offs[0], all[offs[0]:offs[0]+3], removed[0], left)
	return nil
}
