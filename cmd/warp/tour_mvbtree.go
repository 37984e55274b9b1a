package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/mvbtree"
)

func init() {
	registerTourPart(tourPart{order: 55, name: "mvbtree: multiversion B-tree — snapshots beside writers, their versions reclaimed", run: tourMVBTree})
}

// tourMVBTree fills a tree, takes a snapshot, keeps writing, and shows the
// snapshot unchanged while the latest version moves on; once the snapshot is
// closed, Vacuum reclaims the versions it pinned.
func tourMVBTree(ctx context.Context, env tourEnv) error {
	t, err := mvbtree.New[uint64, uint64](mvbtree.Options{Backend: env.Backend, Device: env.Device})
	if err != nil {
		return err
	}
	defer t.Close()
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	keys, vals := make([]uint64, n), make([]uint64, n)
	for i := range keys {
		keys[i], vals[i] = rng.Uint64(), uint64(i)
	}
	start := time.Now()
	if err := t.Insert(ctx, keys, vals); err != nil {
		return err
	}
	filled := time.Since(start)
	start = time.Now()
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return err
	}
	took := time.Since(start)
	if err := t.Delete(ctx, keys[:n/2]); err != nil {
		return err
	}
	latest, err := t.Len(ctx)
	if err != nil {
		return err
	}
	then, err := snap.Len(ctx)
	if err != nil {
		return err
	}
	if then != n || latest != n-n/2 {
		return fmt.Errorf("snapshot %d pairs, latest %d: want %d and %d", then, latest, n, n-n/2)
	}
	if err := t.Check(ctx); err != nil {
		return err
	}
	pinned := ""
	if st, err := t.Stats(ctx); err != nil {
		return err
	} else if env.Backend == warpkit.CUDA {
		pinned = fmt.Sprintf(" (%d node versions pinned for it)", st.PinnedVersions)
	}
	fmt.Printf("   %d pairs inserted in %v; snapshot %d taken in %v; half deleted: the latest has %d pairs, the snapshot still %d%s\n",
		n, filled.Round(time.Millisecond), snap.Version(), took.Round(time.Microsecond), latest, then, pinned)
	if err := snap.Close(); err != nil {
		return err
	}
	if err := t.Vacuum(ctx); err != nil {
		return err
	}
	st, err := t.Stats(ctx)
	if err != nil {
		return err
	}
	if st.Versions != 0 {
		return fmt.Errorf("%d older versions left after the snapshot closed and Vacuum", st.Versions)
	}
	fmt.Printf("   snapshot closed and vacuumed: no older version left; invariants hold\n")
	return t.Check(ctx)
}
