package manifest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/vfs"
)

func meta(n base.FileNum, lo, hi string, seq base.SeqNum) *FileMetadata {
	return &FileMetadata{
		FileNum: n, Size: 100,
		Smallest:    base.MakeInternalKey([]byte(lo), seq, base.KindSet),
		Largest:     base.MakeInternalKey([]byte(hi), seq, base.KindSet),
		SmallestSeq: seq, LargestSeq: seq,
	}
}

type obsoleteLog struct {
	mu        sync.Mutex
	files     []base.FileNum
	manifests []base.FileNum
}

func (o *obsoleteLog) opts(fs vfs.FS) Options {
	return Options{
		FS: fs, Dir: "/db",
		OnObsolete: func(fs []*FileMetadata) {
			o.mu.Lock()
			for _, f := range fs {
				o.files = append(o.files, f.FileNum)
			}
			o.mu.Unlock()
		},
		OnObsoleteManifest: func(n base.FileNum) { o.mu.Lock(); o.manifests = append(o.manifests, n); o.mu.Unlock() },
	}
}

func TestEditRoundTrip(t *testing.T) {
	e := &VersionEdit{Comparator: Comparator, LogNum: 5, NextFileNum: 9, LastSeq: 77,
		DeletedFiles: []DeletedFile{{1, 3}},
		NewFiles:     []NewFile{{2, meta(8, "a", "c", 4)}}}
	e.NewFiles[0].Meta.HasRangeDels = true
	e.NewFiles[0].Meta.Largest = base.MakeSentinel([]byte("d"))
	var d VersionEdit
	if err := d.Decode(e.Encode(nil)); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(d.DeletedFiles) != fmt.Sprint(e.DeletedFiles) || d.LogNum != 5 || d.NextFileNum != 9 || d.LastSeq != 77 || d.Comparator != Comparator {
		t.Fatalf("decoded %+v", d)
	}
	m := d.NewFiles[0].Meta
	if m.FileNum != 8 || !m.HasRangeDels || !m.Largest.IsExclusiveSentinel() || string(m.Smallest.UserKey) != "a" {
		t.Fatalf("new file %+v", m)
	}
	enc := e.Encode(nil)
	for i := range enc {
		var x VersionEdit
		x.Decode(enc[:i]) // must not panic
	}
	if err := (&VersionEdit{}).Decode([]byte{99}); err == nil {
		t.Fatal("unknown tag accepted")
	}
}

func TestCreateApplyReload(t *testing.T) {
	fs := vfs.NewMem()
	fs.MkdirAll("/db", 0o755)
	var ob obsoleteLog
	vs, err := Create(ob.opts(fs))
	if err != nil {
		t.Fatal(err)
	}
	n1, n2, n3 := vs.NewFileNum(), vs.NewFileNum(), vs.NewFileNum()
	if err := vs.LogAndApply(&VersionEdit{LogNum: 2, LastSeq: 10, NewFiles: []NewFile{{0, meta(n1, "a", "m", 5)}, {0, meta(n2, "c", "z", 9)}}}); err != nil {
		t.Fatal(err)
	}
	// An iterator holds the version that lists n1 and n2.
	held := vs.Current()
	if err := vs.LogAndApply(&VersionEdit{LastSeq: 12, DeletedFiles: []DeletedFile{{0, n1}, {0, n2}}, NewFiles: []NewFile{{1, meta(n3, "a", "z", 9)}}}); err != nil {
		t.Fatal(err)
	}
	if len(ob.files) != 0 {
		t.Fatalf("tables %v released while a version still lists them", ob.files)
	}
	held.Unref()
	if len(ob.files) != 2 {
		t.Fatalf("obsolete %v", ob.files)
	}
	if err := vs.LogAndApply(&VersionEdit{LastSeq: 5}); err == nil {
		t.Fatal("sequence going backwards accepted")
	}
	if err := vs.LogAndApply(&VersionEdit{DeletedFiles: []DeletedFile{{3, 999}}}); err == nil {
		t.Fatal("deleting an absent table accepted")
	}
	if err := vs.LogAndApply(&VersionEdit{NewFiles: []NewFile{{1, meta(vs.NewFileNum(), "b", "c", 3)}}}); err == nil {
		t.Fatal("overlapping L1 table accepted")
	}
	vs.Close()

	vs2, err := Load(ob.opts(fs))
	if err != nil {
		t.Fatal(err)
	}
	v := vs2.Current()
	defer v.Unref()
	if len(v.Levels[0]) != 0 || len(v.Levels[1]) != 1 || v.Levels[1][0].FileNum != n3 {
		t.Fatalf("reloaded version:\n%v", v)
	}
	if vs2.LogNum() != 2 || vs2.LastSeq() != 12 || vs2.NewFileNum() <= n3 {
		t.Fatalf("counters: log %d seq %d", vs2.LogNum(), vs2.LastSeq())
	}
	if len(ob.manifests) != 0 {
		t.Fatalf("Load reported a manifest obsolete before Activate: %v", ob.manifests)
	}
	if err := vs2.LogAndApply(&VersionEdit{LastSeq: 13}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("LogAndApply before Activate: %v", err)
	}
	if err := vs2.Activate(&VersionEdit{LastSeq: 13}); err != nil {
		t.Fatal(err)
	}
	if len(ob.manifests) != 1 {
		t.Fatalf("old manifest not reported obsolete: %v", ob.manifests)
	}
	if err := vs2.LogAndApply(&VersionEdit{LastSeq: 14}); err != nil {
		t.Fatal(err)
	}
}

// listing returns every file of a MemFS directory with its contents.
func listing(t *testing.T, fs vfs.FS, dir string) map[string]string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := vfs.ReadFile(fs, fs.PathJoin(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

func TestWALTracking(t *testing.T) {
	fs := vfs.NewMem()
	fs.MkdirAll("/db", 0o755)
	var ob obsoleteLog
	vs := New(ob.opts(fs))
	w1 := vs.NewFileNum()
	if err := vs.Activate(&VersionEdit{LogNum: w1, WALs: []base.FileNum{w1}}); err != nil {
		t.Fatal(err)
	}
	w2 := vs.NewFileNum()
	if err := vs.LogAndApply(&VersionEdit{SealedWALs: []SealedWAL{{w1, 4096}}, WALs: []base.FileNum{w2}}); err != nil {
		t.Fatal(err)
	}
	want := []WAL{{w1, 4096}, {w2, -1}}
	if got := vs.WALs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("WALs %v, want %v", got, want)
	}
	vs.Close()
	vs2, err := Load(ob.opts(fs))
	if err != nil {
		t.Fatal(err)
	}
	if got := vs2.WALs(); !reflect.DeepEqual(got, want) || !vs2.TracksWALs() {
		t.Fatalf("reloaded WALs %v (tracks %v), want %v", vs2.WALs(), vs2.TracksWALs(), want)
	}
	// A flush past w1 drops it; the snapshot of a rotation keeps w2.
	if err := vs2.Activate(&VersionEdit{LogNum: w2}); err != nil {
		t.Fatal(err)
	}
	if got := vs2.WALs(); !reflect.DeepEqual(got, []WAL{{w2, -1}}) {
		t.Fatalf("after LogNum %d: %v", w2, got)
	}
	if err := vs2.LogAndApply(&VersionEdit{SealedWALs: []SealedWAL{{w2, 77}}}); err != nil {
		t.Fatal(err)
	}
	vs2.Close()
	vs3, err := Load(ob.opts(fs))
	if err != nil {
		t.Fatal(err)
	}
	if got := vs3.WALs(); !reflect.DeepEqual(got, []WAL{{w2, 77}}) {
		t.Fatalf("sealed after reload: %v", got)
	}
	if r := vs3.Recovered(); r.NextFileNum <= w2 || r.TornTail != nil || r.Records != 2 {
		t.Fatalf("recovered %+v", r)
	}
}

func TestLoadWritesNothing(t *testing.T) {
	fs := vfs.NewMem()
	fs.MkdirAll("/db", 0o755)
	var ob obsoleteLog
	vs, _ := Create(ob.opts(fs))
	vs.LogAndApply(&VersionEdit{LastSeq: 3})
	vs.Close()
	before := listing(t, fs, "/db")
	for range 3 {
		vs, err := Load(ob.opts(fs))
		if err != nil {
			t.Fatal(err)
		}
		vs.Close()
	}
	if after := listing(t, fs, "/db"); !reflect.DeepEqual(before, after) {
		t.Fatalf("Load changed the directory:\n%v\n%v", before, after)
	}
}

func TestActivateFailureLeavesStore(t *testing.T) {
	mem := vfs.NewMem()
	mem.MkdirAll("/db", 0o755)
	var ob obsoleteLog
	vs, _ := Create(ob.opts(mem))
	vs.LogAndApply(&VersionEdit{LastSeq: 3})
	vs.Close()
	before := listing(t, mem, "/db")
	// Fail each write, sync and rename of Activate in turn.
	for n := int64(1); ; n++ {
		inj := vfs.NewCountdown(vfs.OpWrite|vfs.OpSync|vfs.OpRename|vfs.OpCreate, n, false)
		o := ob.opts(vfs.NewFault(mem, inj))
		vs, err := Load(o)
		if err != nil {
			t.Fatal(err)
		}
		err = vs.Activate(&VersionEdit{LastSeq: 4})
		vs.Close()
		if err == nil {
			break
		}
		after := listing(t, mem, "/db")
		if cur := after["CURRENT"]; cur != before["CURRENT"] {
			// Only a failed directory sync after the rename may leave the
			// new CURRENT in place.
			continue
		}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("fault %d (%v): directory changed:\n%v\n%v", n, err, keys(before), keys(after))
		}
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestDamagedCurrent(t *testing.T) {
	fs := vfs.NewMem()
	fs.MkdirAll("/db", 0o755)
	var ob obsoleteLog
	vs, _ := Create(ob.opts(fs))
	name := base.MakeFilename(base.FileTypeManifest, vs.ManifestNum())
	vs.Close()
	for _, tc := range []struct{ what, current string }{
		{"empty", ""},
		{"no newline", name},
		{"not a manifest", "000001.log\n"},
		{"missing manifest", "MANIFEST-999999\n"},
	} {
		vfs.WriteFile(fs, "/db/CURRENT", []byte(tc.current))
		_, err := Load(ob.opts(fs))
		var ce *base.CorruptionError
		if !errors.As(err, &ce) || ce.File != "CURRENT" {
			t.Errorf("%s CURRENT: %v", tc.what, err)
		}
	}
}

func TestTornTailAndMidCorruption(t *testing.T) {
	fs := vfs.NewMem()
	fs.MkdirAll("/db", 0o755)
	var ob obsoleteLog
	vs, _ := Create(ob.opts(fs))
	for i := range 20 {
		n := vs.NewFileNum()
		if err := vs.LogAndApply(&VersionEdit{LastSeq: base.SeqNum(i + 1), NewFiles: []NewFile{{1, meta(n, fmt.Sprintf("k%03d", i), fmt.Sprintf("k%03d", i), base.SeqNum(i+1))}}}); err != nil {
			t.Fatal(err)
		}
	}
	name := base.MakeFilename(base.FileTypeManifest, vs.ManifestNum())
	path := "/db/" + name
	vs.Close()
	data, _ := vfs.ReadFile(fs, path)

	// Torn tail: the last edit is cut; it is dropped.
	vfs.WriteFile(fs, path, data[:len(data)-3])
	vs2, err := Load(ob.opts(fs))
	if err != nil {
		t.Fatalf("torn tail: %v", err)
	}
	v := vs2.Current()
	if len(v.Levels[1]) != 19 {
		t.Fatalf("torn tail: %d tables", len(v.Levels[1]))
	}
	v.Unref()
	vs2.Close()

	// Damage in the middle: an error naming the manifest and an offset.
	cur, _ := vfs.ReadFile(fs, "/db/CURRENT")
	path = "/db/" + string(cur[:len(cur)-1])
	data, _ = vfs.ReadFile(fs, path)
	data = append([]byte(nil), data...)
	data[len(data)/3] ^= 0x40
	vfs.WriteFile(fs, path, append(data, data...)) // make sure valid records follow
	_, err = Load(ob.opts(fs))
	var ce *base.CorruptionError
	if !errors.As(err, &ce) || ce.File != string(cur[:len(cur)-1]) || ce.Offset < 0 {
		t.Fatalf("mid-manifest corruption: %v", err)
	}
}

func TestRotation(t *testing.T) {
	fs := vfs.NewMem()
	fs.MkdirAll("/db", 0o755)
	var ob obsoleteLog
	o := ob.opts(fs)
	o.MaxManifestSize = 512
	vs, _ := Create(o)
	first := vs.ManifestNum()
	for i := range 50 {
		n := vs.NewFileNum()
		if err := vs.LogAndApply(&VersionEdit{NewFiles: []NewFile{{2, meta(n, fmt.Sprintf("k%03d", i), fmt.Sprintf("k%03d", i), 1)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if vs.ManifestNum() == first || len(ob.manifests) == 0 {
		t.Fatal("manifest never rotated")
	}
	vs.Close()
	vs2, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	v := vs2.Current()
	defer v.Unref()
	if len(v.Levels[2]) != 50 {
		t.Fatalf("%d tables after rotation and reload", len(v.Levels[2]))
	}
}

func TestOverlappingAndFind(t *testing.T) {
	v := &Version{}
	v.Levels[0] = []*FileMetadata{meta(1, "a", "c", 1), meta(2, "b", "f", 2), meta(3, "x", "z", 3)}
	v.Levels[1] = []*FileMetadata{meta(4, "a", "b", 1), meta(5, "c", "e", 1), meta(6, "g", "k", 1)}
	v.Levels[1][1].Largest = base.MakeSentinel([]byte("g"))
	if err := v.CheckOrdering(); err != nil {
		t.Fatal(err)
	}
	got := v.Overlapping(0, []byte("a"), []byte("a"))
	if len(got) != 2 { // a-c pulls in b-f
		t.Fatalf("L0 expansion: %v", got)
	}
	if got := v.Overlapping(1, []byte("f"), []byte("g")); len(got) != 2 {
		t.Fatalf("L1 overlap with sentinel: %v", got)
	}
	if got := v.Overlapping(1, []byte("g"), []byte("h")); len(got) != 1 || got[0].FileNum != 6 {
		t.Fatalf("exclusive sentinel treated as inclusive: %v", got)
	}
	if f := v.FindFile(1, []byte("f")); f == nil || f.FileNum != 5 {
		t.Fatalf("FindFile(f) = %v", f)
	}
	if f := v.FindFile(1, []byte("l")); f != nil {
		t.Fatalf("FindFile(l) = %v", f)
	}
	if f := v.FindFile(1, []byte("g")); f == nil || f.FileNum != 6 {
		t.Fatalf("FindFile(g) = %v", f)
	}
}
