// Package mvbtree is a multiversion B-tree: an ordered map from K to V
// (uint32 or uint64 each, every key usable) whose readers may hold
// snapshots — the tree as it was when each was taken — for as long as they
// like, beside writers that keep changing it. It is the structure of Awad's
// thesis, chapter 4 ("A GPU Multiversion B-Tree", PACT 2022), with
// long-lived snapshot handles the thesis does not have. Design:
// shared/docs/specs/mvbtree.md.
//
// # Use
//
//	t, err := mvbtree.New[uint32, uint32](mvbtree.Options{})
//	err = t.Insert(ctx, keys, vals)
//	snap, err := t.Snapshot(ctx) // the tree as it is now
//	defer snap.Close()           // unpins its versions
//	err = t.Delete(ctx, keys)    // snap still sees them
//	err = snap.Lookup(ctx, keys, vals, found)
//	all, err := snap.All(ctx)    // iter.Seq2 over the snapshot
//
// # Semantics
//
// The latest version has package btree's contracts (Build, Insert, Delete,
// Lookup, Successor, Predecessor, Count, Range, Ascend*, Len, Stats,
// Compact, Check), with two promises more: an update batch is atomic (a
// snapshot sees all of it or none) and Range is linearizable (every query
// of a call sees one version). AscendRange, AscendGreaterOrEqual and All
// walk a transient snapshot: they copy nothing, hold no writer back, and a
// loop may update the tree it iterates. Snapshot linearizes after every
// update that returned before it was called; its queries run beside the
// tree's writers and each other. Snapshots are numbered in the order they
// were taken (Version). Close unpins a snapshot; Tree.Close closes every
// open snapshot. Every method of a closed tree or snapshot returns an error
// wrapping ErrClosed, a second Close included.
//
// # Backends
//
// The CPU backend (internal/ordmap, shared with btree's) keeps a
// tidwall/btree map whose snapshots are copy-on-write copies: O(1) to take,
// each later write copying the nodes it changes while a snapshot holds
// them; a closed snapshot's nodes go to Go's garbage collector, so Vacuum
// and Restamp have nothing to do there.
//
// # Status
//
// Issue 18, in part: the API above and the CPU backend (the oracle of the
// CUDA backend to come) are built and tested (a differential test against a
// model per version over random sequences of builds, inserts, deletes,
// compactions, snapshots, closes and every query, keys at both ends of K's
// range included, 32- and 64-bit; snapshots taken, read twice and closed by
// goroutines beside writers, each holding whole batches; iteration beside
// writes; the structure contract's errors). Not built: the CUDA backend —
// the shared B-link core factored out of btree.cu (M1), epoch-based
// reclamation (M2), the versioned nodes with the copy rules, pinning,
// splicing, Vacuum and Restamp on the device (M3) — its Device methods, and
// `warp bench mvbtree`. Options.Copy and MaxPoolBytes are for the CUDA
// backend; Backend CUDA fails with ErrInvalidArgument until it is built.
//
// # Departures from the spec (shared/docs/specs/mvbtree.md)
//
//   - Snapshot.Close is not idempotent: a second Close returns ErrClosed,
//     as docs/CONTRACT.md has every Close do.
//   - Version() numbers snapshots from 0 in the order they were taken (a
//     64-bit count of the host's); the CUDA backend's 32-bit node stamps and
//     their Restamp stay inside.
//   - Apply (mixed batches with per-operation snapshots) is the next issue's
//     (M4), as the spec's split says; so are the Options Streams, BagSize
//     and VacuumPinnedBytes.
//   - A snapshot's iterator stops (yields nothing more) once the snapshot
//     is closed.
package mvbtree
