package kv

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/batchrepr"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/vfs"
)

// testLog encodes a write-ahead log of one-key batches: batch i sets
// keys[i] = "v"+keys[i] at sequence number seq+i. It returns the log and the
// offset at which each record starts.
func testLog(t *testing.T, seq base.SeqNum, keys ...string) (data []byte, starts []int) {
	t.Helper()
	var buf bytes.Buffer
	w := record.NewWriter(&buf)
	for i, k := range keys {
		b := &Batch{}
		b.Set([]byte(k), []byte("v"+k))
		if err := b.prepare(); err != nil {
			t.Fatal(err)
		}
		batchrepr.SetSeqNum(b.repr, seq+base.SeqNum(i))
		off, err := w.WriteRecord(b.repr)
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, int(off))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), starts
}

// storeWithLogs creates an empty store in /db and adds logs, numbered from
// 100 in the order given, that recovery will replay: the manifest records
// them as the store's logs, none sealed (as a store that stopped without a
// clean Close, in the middle of switching logs, would leave them).
func storeWithLogs(t *testing.T, logs ...[]byte) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	db, err := Open("/db", &Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var nums []base.FileNum
	for i, data := range logs {
		num := base.FileNum(100 + i)
		nums = append(nums, num)
		if err := vfs.WriteFile(mem, "/db/"+base.MakeFilename(base.FileTypeLog, num), data); err != nil {
			t.Fatal(err)
		}
	}
	recordLogs(t, mem, "/db", nil, nums...)
	return mem
}

// recordLogs adds logs to the manifest of the closed store in dir, as
// manifest edits of the store would have: each of nums as written, and
// sealed at the size sealed gives, if any.
func recordLogs(t *testing.T, fs vfs.FS, dir string, sealed map[base.FileNum]int64, nums ...base.FileNum) {
	t.Helper()
	vs, err := manifest.Load(manifest.Options{FS: fs, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	e := &manifest.VersionEdit{WALs: nums}
	for n, size := range sealed {
		e.SealedWALs = append(e.SealedWALs, manifest.SealedWAL{Num: n, Size: size})
	}
	for _, n := range nums {
		vs.MarkFileNumUsed(n)
	}
	if err := vs.Activate(e); err != nil {
		t.Fatal(err)
	}
}

// checkKeys fails unless the store holds exactly keys (set by testLog).
func checkKeys(t *testing.T, db *DB, keys ...string) {
	t.Helper()
	want := map[string]string{}
	for _, k := range keys {
		want[k] = "v" + k
	}
	if got := scanAll(t, db); !mapsEqual(got, want) {
		t.Fatalf("store holds %v, want %v", got, want)
	}
}

func zeros(n int) []byte { return make([]byte, n) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestWALZeroedTail: the end of the last log may be zeros (a file system
// extends a file with zeros when a crash beats the data, or the space was
// preallocated) or cut short: recovery keeps the records before it and
// opens. A torn or zeroed end of an earlier log is damage (a log is synced
// whole before anything is written to the next), and so is a zero hole
// followed by intact records: WALStrict refuses them, WALSalvage keeps
// every intact record.
func TestWALZeroedTail(t *testing.T) {
	abc, abcStarts := testLog(t, 1, "a", "b", "c")
	de, _ := testLog(t, 4, "d", "e")
	cut := abc[:abcStarts[2]+10] // c's record cut short
	hole := cat(abc[:abcStarts[1]], zeros(abcStarts[2]-abcStarts[1]), abc[abcStarts[2]:])

	type tc struct {
		name  string
		logs  [][]byte
		keys  []string // after a successful open (salvaging, when bad)
		bad   string   // WALStrict fails naming this log
		torn  int64    // Metrics().Recovery.TornTails
		salvd int64    // Metrics().Recovery.SalvagedRecords under WALSalvage
	}
	cases := []tc{
		{name: "last log cut", logs: [][]byte{cut}, keys: []string{"a", "b"}, torn: 1},
		{name: "hole then records", logs: [][]byte{hole}, keys: []string{"a", "c"}, bad: "000100.log", salvd: 1},
		{name: "earlier log cut", logs: [][]byte{cut, de}, keys: []string{"a", "b", "d", "e"}, bad: "000100.log", salvd: 1},
		{name: "earlier log zeroed", logs: [][]byte{cat(abc, zeros(100)), de}, keys: []string{"a", "b", "c", "d", "e"}, bad: "000100.log", salvd: 1},
		{name: "earlier log with a hole", logs: [][]byte{hole, de}, keys: []string{"a", "c", "d", "e"}, bad: "000100.log", salvd: 1},
		// A crash after the next log was created but before the cut log
		// was synced and closed: nothing was written to the new log.
		{name: "cut log then empty log", logs: [][]byte{cut, nil}, keys: []string{"a", "b"}, torn: 1},
		{name: "cut log then zeroed log", logs: [][]byte{cut, zeros(50)}, keys: []string{"a", "b"}, torn: 2},
		{name: "zeroed tail then cut log", logs: [][]byte{cat(abc, zeros(9)), de[:len(de)-3]}, keys: []string{"a", "b", "c", "d"}, bad: "000100.log", torn: 1, salvd: 1},
	}
	for _, n := range []int{1, 6, 7, 100, record.BlockSize - len(abc), record.BlockSize + 3, 3 * record.BlockSize} {
		cases = append(cases, tc{name: fmt.Sprintf("last log with %d zeros", n), logs: [][]byte{de, cat(abc, zeros(n))},
			keys: []string{"a", "b", "c", "d", "e"}, torn: 1})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := storeWithLogs(t, c.logs...)
			db, err := Open("/db", &Options{FS: mem})
			if c.bad != "" {
				var ce *CorruptionError
				if !errors.Is(err, ErrCorruption) || !errors.As(err, &ce) || ce.File != c.bad {
					t.Fatalf("WALStrict open: %v; want corruption in %s", err, c.bad)
				}
				db, err = Open("/db", &Options{FS: mem, WALRecovery: WALSalvage})
			}
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			checkKeys(t, db, c.keys...)
			r := db.Metrics().Recovery
			if r.TornTails != c.torn || r.SalvagedRecords != c.salvd {
				t.Fatalf("torn tails %d, salvaged %d; want %d, %d", r.TornTails, r.SalvagedRecords, c.torn, c.salvd)
			}
		})
	}
}
