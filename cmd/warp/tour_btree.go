package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/warpkit/warpkit/btree"
)

func init() {
	registerTourPart(tourPart{order: 50, name: "btree: GPU B-link tree (ordered map)", run: tourBTree})
}

// tourBTree builds a tree, inserts, looks up, asks for successors and a range,
// runs one mixed batch, and checks the structure.
func tourBTree(ctx context.Context, env tourEnv) error {
	t, err := btree.New[uint64, uint64](btree.Options{Backend: env.Backend, Device: env.Device})
	if err != nil {
		return err
	}
	defer t.Close()
	const n = 100_000
	r := rand.New(rand.NewPCG(1, 2))
	keys, vals := make([]uint64, n), make([]uint64, n)
	for i := range keys {
		keys[i] = r.Uint64() // the full 64-bit range: no reserved keys
		vals[i] = uint64(i)
	}
	start := time.Now()
	if err := t.Build(ctx, keys[:n/2], vals[:n/2]); err != nil {
		return err
	}
	built := time.Since(start)
	start = time.Now()
	if err := t.Insert(ctx, keys[n/2:], vals[n/2:]); err != nil {
		return err
	}
	inserted := time.Since(start)
	got, found := make([]uint64, n), make([]bool, n)
	start = time.Now()
	if err := t.Lookup(ctx, keys, got, found); err != nil {
		return err
	}
	looked := time.Since(start)
	for i := range keys {
		if !found[i] || got[i] != vals[i] {
			return fmt.Errorf("lookup of key %d: got (%d, %v), want %d", keys[i], got[i], found[i], vals[i])
		}
	}
	st, err := t.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("   built %d keys in %s, inserted %d in %s, looked up all %d in %s (%s backend)\n",
		n/2, built.Round(time.Microsecond), n/2, inserted.Round(time.Microsecond), n, looked.Round(time.Microsecond), t.Backend())
	if st.Nodes > 0 {
		fmt.Printf("   %d keys in %d nodes of %d bytes, height %d\n", st.Keys, st.Nodes, st.NodeBytes, st.Height)
	}
	sk, sv, sf := make([]uint64, 1), make([]uint64, 1), make([]bool, 1)
	if err := t.Successor(ctx, []uint64{1 << 63}, sk, sv, sf); err != nil {
		return err
	}
	seq, err := t.AscendRange(ctx, 1<<63, 1<<63+1<<50)
	if err != nil {
		return err
	}
	inRange := 0
	for range seq {
		inRange++
	}
	fmt.Printf("   successor of 2^63 is %#x; %d keys lie in [2^63, 2^63+2^50)\n", sk[0], inRange)
	ops := btree.Ops[uint64, uint64]{
		Kinds: []btree.OpKind{btree.OpInsert, btree.OpDelete, btree.OpLookup, btree.OpCount},
		Keys:  []uint64{42, keys[0], keys[1], 0},
		Vals:  []uint64{4242, 0, 0, 0},
		His:   []uint64{0, 0, 0, 1 << 62},
	}
	res := btree.Results[uint64, uint64]{Found: make([]bool, 4), Counts: make([]uint32, 4)}
	if err := t.Apply(ctx, ops, res); err != nil {
		return err
	}
	fmt.Printf("   one mixed batch (insert, delete, lookup, count): lookup found=%v, %d keys below 2^62\n", res.Found[2], res.Counts[3])
	if err := t.Check(ctx); err != nil {
		return err
	}
	fmt.Println("   structural check passed")
	return nil
}
