package kv

import (
	"errors"
	"fmt"
	"testing"

	"github.com/warpkit/warpkit/kv/vfs"
)

// TestRepairRebuildsWithoutCurrent: a store whose CURRENT is gone is
// refused by Open, untouched, and Repair rebuilds it with every key.
func TestRepairRebuildsWithoutCurrent(t *testing.T) {
	mem := vfs.NewMem()
	opts := &Options{FS: mem, MemTableSize: 64 << 10}
	db, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 5000 {
		k, v := fmt.Sprintf("key%05d", i), fmt.Sprintf("value%d", i)
		if err := db.Set([]byte(k), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	for i := 0; i < 5000; i += 7 {
		k := fmt.Sprintf("key%05d", i)
		if err := db.Delete([]byte(k), nil); err != nil {
			t.Fatal(err)
		}
		delete(want, k)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.Remove("/db/CURRENT"); err != nil {
		t.Fatal(err)
	}
	before, _ := dmgMustReadTree(t, mem, "/db")
	if _, err := Open("/db", opts); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Open without CURRENT: %v", err)
	}
	if after, _ := dmgMustReadTree(t, mem, "/db"); len(dmgDiffTrees(before, after)) > 0 {
		t.Fatalf("failed Open changed the directory: %v", dmgDiffTrees(before, after))
	}
	rep, err := Repair("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) == 0 || len(rep.Logs) == 0 || len(rep.Outputs) == 0 || len(rep.Lost) != 0 {
		t.Fatalf("report %+v", rep)
	}
	db, err = Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := scanAll(t, db); !mapsEqual(got, want) {
		t.Fatalf("after repair: %d keys, want %d", len(got), len(want))
	}
	if err := db.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}
