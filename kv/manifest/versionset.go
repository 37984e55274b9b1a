package manifest

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/vfs"
)

// Options configure a VersionSet.
type Options struct {
	FS  vfs.FS
	Dir string
	// MaxManifestSize starts a new manifest when the current one grows past
	// it; default 8 MiB.
	MaxManifestSize int64
	// OnObsolete receives tables that no live version lists any more. It is
	// called without VersionSet locks held, from whichever goroutine dropped
	// the last reference; it must not block.
	OnObsolete func([]*FileMetadata)
	// OnObsoleteManifest receives the number of a manifest replaced by a newer
	// one (its deletion is safe once CURRENT names the new one).
	OnObsoleteManifest func(base.FileNum)
}

// VersionSet owns the current version, the live versions and the manifest.
// It is safe for concurrent use; LogAndApply calls are serialised.
//
// A set from Load or New writes nothing until Activate starts its manifest:
// until then (and for ever, in a read-only store) LogAndApply fails with
// ErrReadOnly.
type VersionSet struct {
	opts Options

	mu      sync.Mutex // guards current and the live list
	current *Version
	live    Version // sentinel of the list of versions with references

	applyMu      sync.Mutex // serialises LogAndApply and manifest writes
	nextFileNum  atomic.Uint64
	logNum       base.FileNum
	lastSeq      base.SeqNum
	format       uint64
	wals         map[base.FileNum]int64 // recorded logs >= logNum: sealed size, or -1
	manifestNum  base.FileNum
	manifestFile vfs.File
	manifest     *record.Writer
	err          error // sticky: a manifest write failed
	closed       bool

	// What Load found; fixed after Load.
	recovered Recovered
}

// Recovered describes the manifest a VersionSet was loaded from.
type Recovered struct {
	// Manifest is the manifest CURRENT named (0 for a new store).
	Manifest base.FileNum
	// NextFileNum is the next file number the manifest recorded (at least
	// one above every file it lists): every number below it was handed out
	// by the store, and a file numbered at or above it can only belong to
	// an edit the manifest does not hold.
	NextFileNum base.FileNum
	// TornTail is the manifest's ignored torn last record (an edit a crash
	// cut short, so never acknowledged), or nil.
	TornTail error
	// Size is the manifest's length; Records the edits read from it.
	Size    int64
	Records int
}

// ErrReadOnly is returned by LogAndApply on a set whose manifest was never
// activated (a read-only store).
var ErrReadOnly = errors.New("manifest: read-only (not activated)")

func newVersionSet(opts Options) *VersionSet {
	if opts.MaxManifestSize <= 0 {
		opts.MaxManifestSize = 8 << 20
	}
	vs := &VersionSet{opts: opts, wals: map[base.FileNum]int64{}}
	vs.live.next, vs.live.prev = &vs.live, &vs.live
	return vs
}

// New returns the version set of a new, empty store. It writes nothing:
// Activate creates the manifest and CURRENT.
func New(opts Options) *VersionSet {
	vs := newVersionSet(opts)
	vs.nextFileNum.Store(1)
	vs.format = FormatTracksWALs
	vs.recovered.NextFileNum = 1
	vs.install(&Version{})
	return vs
}

// Create is New followed by Activate with an empty edit.
func Create(opts Options) (*VersionSet, error) {
	vs := New(opts)
	if err := vs.Activate(&VersionEdit{}); err != nil {
		return nil, err
	}
	return vs, nil
}

// Load reads CURRENT and replays the manifest it names. It writes nothing;
// Activate starts a fresh manifest holding the recovered version (so later
// edits never follow a torn tail). A torn last record (an edit whose write a
// crash cut short, which was therefore never acknowledged) is ignored and
// reported in Recovered().TornTail; damage in the middle is a corruption
// error naming the manifest and offset. A CURRENT that is empty, malformed or
// names a missing manifest is a corruption error too.
func Load(opts Options) (*VersionSet, error) {
	vs := newVersionSet(opts)
	fs := opts.FS
	cur, err := vfs.ReadFile(fs, fs.PathJoin(opts.Dir, "CURRENT"))
	if err != nil {
		return nil, fmt.Errorf("manifest: read CURRENT: %w", err)
	}
	name, ok := strings.CutSuffix(string(cur), "\n")
	if !ok {
		return nil, base.Corruptf("CURRENT", 0, "no trailing newline (%d bytes)", len(cur))
	}
	typ, num, ok := base.ParseFilename(name)
	if !ok || typ != base.FileTypeManifest {
		return nil, base.Corruptf("CURRENT", 0, "names %q, not a manifest", name)
	}
	f, err := fs.Open(fs.PathJoin(opts.Dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, base.Corruptf("CURRENT", 0, "names %s, which does not exist", name)
	}
	if err != nil {
		return nil, fmt.Errorf("manifest: open %s: %w", name, err)
	}
	defer f.Close()
	if size, err := f.Size(); err == nil {
		vs.recovered.Size = size
	}
	r := record.NewReader(f, name)
	v := &Version{}
	var next base.FileNum
	sawComparator := false
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				return nil, fmt.Errorf("manifest: read %s: %w", name, err)
			}
			after, serr := r.SkipCorruption()
			if serr != nil {
				return nil, fmt.Errorf("manifest: read %s: %w", name, serr)
			}
			if after {
				return nil, err
			}
			vs.recovered.TornTail = err
			break
		}
		vs.recovered.Records++
		var e VersionEdit
		if err := e.Decode(rec); err != nil {
			return nil, base.Corruptf(name, r.Offset(), "%v", err)
		}
		if e.Comparator != "" {
			if e.Comparator != Comparator {
				return nil, fmt.Errorf("manifest: store uses comparator %q, this build %q", e.Comparator, Comparator)
			}
			sawComparator = true
		} else if !sawComparator {
			return nil, base.Corruptf(name, r.Offset(), "first edit is not a snapshot (no comparator)")
		}
		if e.Format != 0 {
			if e.Format > FormatTracksWALs {
				return nil, fmt.Errorf("manifest: %s has format %d, newer than this build's %d", name, e.Format, FormatTracksWALs)
			}
			vs.format = e.Format
		}
		if e.NextFileNum != 0 {
			next = e.NextFileNum
		}
		vs.applyCounters(&e)
		if v, err = v.apply(&e); err != nil {
			return nil, base.Corruptf(name, r.Offset(), "%v", err)
		}
	}
	if !sawComparator {
		return nil, base.Corruptf(name, 0, "no complete snapshot record (%d bytes)", vs.recovered.Size)
	}
	for _, files := range v.Levels {
		for _, f := range files {
			next = max(next, f.FileNum+1)
		}
	}
	for n := range vs.wals {
		next = max(next, n+1)
	}
	next = max(next, num+1, vs.logNum+1)
	vs.nextFileNum.Store(uint64(next))
	vs.recovered.Manifest = num
	vs.recovered.NextFileNum = next
	vs.install(v)
	return vs, nil
}

// LastSeqOf returns the largest last sequence number recorded in the
// manifest at path, reading its intact records up to the first damage; 0 if
// none can be read. Repair uses it as a floor for new sequence numbers.
func LastSeqOf(fs vfs.FS, path string) base.SeqNum {
	f, err := fs.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	r := record.NewReader(f, path)
	var last base.SeqNum
	for {
		rec, err := r.Next()
		if err != nil {
			return last
		}
		var e VersionEdit
		if e.Decode(rec) != nil {
			return last
		}
		last = max(last, e.LastSeq)
	}
}

// applyCounters applies an edit's log number, last sequence number and log
// records. Caller holds applyMu (or owns the set, in Load).
func (vs *VersionSet) applyCounters(e *VersionEdit) {
	if e.LogNum != 0 {
		vs.logNum = e.LogNum
	}
	if e.LastSeq != 0 {
		vs.lastSeq = e.LastSeq
	}
	for _, n := range e.WALs {
		if _, ok := vs.wals[n]; !ok {
			vs.wals[n] = -1
		}
	}
	for _, w := range e.SealedWALs {
		vs.wals[w.Num] = w.Size
	}
	for n := range vs.wals {
		if n < vs.logNum {
			delete(vs.wals, n)
		}
	}
}

// Activate applies e to the loaded (or new) version, writes a new manifest
// holding the result, and points CURRENT at it: the moment an Open commits
// to what it recovered. Until CURRENT is replaced nothing of the store
// changes; if Activate fails before that, the new manifest is removed again.
// The manifest that was loaded becomes obsolete (OnObsoleteManifest).
func (vs *VersionSet) Activate(e *VersionEdit) error {
	vs.applyMu.Lock()
	defer vs.applyMu.Unlock()
	if vs.manifest != nil || vs.closed {
		return errors.New("manifest: Activate on an active or closed set")
	}
	vs.mu.Lock()
	cur := vs.current
	vs.mu.Unlock()
	nv, err := cur.apply(e)
	if err != nil {
		return fmt.Errorf("%w (%w)", err, ErrCurrentUnchanged)
	}
	oldLog, oldSeq, oldWALs := vs.logNum, vs.lastSeq, maps.Clone(vs.wals)
	vs.applyCounters(e)
	vs.format = FormatTracksWALs
	if err := vs.rotate(nv); err != nil {
		vs.logNum, vs.lastSeq, vs.wals = oldLog, oldSeq, oldWALs
		return err
	}
	vs.install(nv)
	if vs.recovered.Manifest != 0 && vs.opts.OnObsoleteManifest != nil {
		vs.opts.OnObsoleteManifest(vs.recovered.Manifest)
	}
	return nil
}

// Recovered describes the manifest Load read.
func (vs *VersionSet) Recovered() Recovered { return vs.recovered }

// TracksWALs reports whether the loaded manifest records every log
// (FormatTracksWALs); a manifest of an older build does not.
func (vs *VersionSet) TracksWALs() bool {
	vs.applyMu.Lock()
	defer vs.applyMu.Unlock()
	return vs.format >= FormatTracksWALs
}

// WAL is a write-ahead log the manifest records.
type WAL struct {
	Num base.FileNum
	// Size is the log's sealed size, or -1 if it is not sealed (the log
	// the store was writing when it stopped without a clean Close).
	Size int64
}

// WALs returns the logs at or above the log number that the manifest
// records, in ascending order: they hold every write not yet flushed.
func (vs *VersionSet) WALs() []WAL {
	vs.applyMu.Lock()
	defer vs.applyMu.Unlock()
	out := make([]WAL, 0, len(vs.wals))
	for n, size := range vs.wals {
		out = append(out, WAL{Num: n, Size: size})
	}
	slices.SortFunc(out, func(a, b WAL) int { return cmp.Compare(a.Num, b.Num) })
	return out
}

// snapshotEdit describes v completely.
func (vs *VersionSet) snapshotEdit(v *Version) *VersionEdit {
	e := &VersionEdit{
		Comparator:  Comparator,
		LogNum:      vs.logNum,
		NextFileNum: base.FileNum(vs.nextFileNum.Load()),
		LastSeq:     vs.lastSeq,
		Format:      vs.format,
	}
	for n, size := range vs.wals {
		e.WALs = append(e.WALs, n)
		if size >= 0 {
			e.SealedWALs = append(e.SealedWALs, SealedWAL{Num: n, Size: size})
		}
	}
	slices.Sort(e.WALs)
	slices.SortFunc(e.SealedWALs, func(a, b SealedWAL) int { return cmp.Compare(a.Num, b.Num) })
	for l, files := range v.Levels {
		for _, f := range files {
			e.NewFiles = append(e.NewFiles, NewFile{Level: l, Meta: f})
		}
	}
	return e
}

// rotate starts a new manifest describing v and points CURRENT at it. If it
// fails before CURRENT is replaced, the new manifest is removed and the old
// one stays live.
func (vs *VersionSet) rotate(v *Version) error {
	fs, dir := vs.opts.FS, vs.opts.Dir
	num := vs.NewFileNum()
	name := base.MakeFilename(base.FileTypeManifest, num)
	f, err := fs.Create(fs.PathJoin(dir, name))
	if err != nil {
		return fmt.Errorf("manifest: create %s: %w (%w)", name, err, ErrCurrentUnchanged)
	}
	fail := func(err error) error {
		f.Close()
		fs.Remove(fs.PathJoin(dir, name))
		if !errors.Is(err, ErrCurrentUnchanged) {
			err = fmt.Errorf("%w (%w)", err, ErrCurrentUnchanged)
		}
		return err
	}
	w := record.NewWriter(f)
	// The snapshot records the next file number after this manifest's own.
	if _, err := w.WriteRecord(vs.snapshotEdit(v).Encode(nil)); err != nil {
		return fail(fmt.Errorf("manifest: write %s: %w", name, err))
	}
	if err := w.Flush(); err != nil {
		return fail(fmt.Errorf("manifest: write %s: %w", name, err))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("manifest: sync %s: %w", name, err))
	}
	if err := setCurrent(fs, dir, name, vs.NewFileNum()); err != nil {
		if errors.Is(err, ErrCurrentUnchanged) {
			return fail(err)
		}
		// CURRENT names the new manifest, but its rename may not be
		// durable: keep both manifests (the old one is not reported
		// obsolete) and write to the new one from now on.
		if vs.manifestFile != nil {
			vs.manifestFile.Close()
		}
		vs.manifestNum, vs.manifestFile, vs.manifest = num, f, w
		return err
	}
	old := vs.manifestNum
	if vs.manifestFile != nil {
		vs.manifestFile.Close()
	}
	vs.manifestNum, vs.manifestFile, vs.manifest = num, f, w
	if old != 0 && vs.opts.OnObsoleteManifest != nil {
		vs.opts.OnObsoleteManifest(old)
	}
	return nil
}

// ErrCurrentUnchanged is matched (errors.Is) by an error of Activate or
// LogAndApply that left CURRENT as it was: the set's old manifest is still
// the live one. Any other error of Activate may have replaced CURRENT (a
// failed directory sync after the rename), so the new manifest may be live.
var ErrCurrentUnchanged = errors.New("CURRENT unchanged")

// setCurrent atomically replaces CURRENT with one naming manifest.
func setCurrent(fs vfs.FS, dir, manifest string, tmpNum base.FileNum) error {
	tmp := fs.PathJoin(dir, base.MakeFilename(base.FileTypeTemp, tmpNum))
	if err := vfs.WriteFile(fs, tmp, []byte(manifest+"\n")); err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("manifest: write CURRENT: %w (%w)", err, ErrCurrentUnchanged)
	}
	if err := fs.Rename(tmp, fs.PathJoin(dir, "CURRENT")); err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("manifest: install CURRENT: %w (%w)", err, ErrCurrentUnchanged)
	}
	if err := vfs.SyncDir(fs, dir); err != nil {
		return fmt.Errorf("manifest: sync directory: %w", err)
	}
	return nil
}

// install makes v current (the set holds one reference to the current
// version) and releases the previous one.
func (vs *VersionSet) install(v *Version) {
	v.vs = vs
	for _, files := range v.Levels {
		for _, f := range files {
			f.refs.Add(1)
		}
	}
	v.refs.Store(1)
	vs.mu.Lock()
	v.prev, v.next = vs.live.prev, &vs.live
	vs.live.prev.next = v
	vs.live.prev = v
	old := vs.current
	vs.current = v
	vs.mu.Unlock()
	if old != nil {
		old.Unref()
	}
}

// release is called when a version's last reference goes.
func (vs *VersionSet) release(v *Version) {
	vs.mu.Lock()
	v.prev.next = v.next
	v.next.prev = v.prev
	v.prev, v.next = nil, nil
	vs.mu.Unlock()
	var obsolete []*FileMetadata
	for _, files := range v.Levels {
		for _, f := range files {
			if f.refs.Add(-1) == 0 {
				obsolete = append(obsolete, f)
			}
		}
	}
	if len(obsolete) > 0 && vs.opts.OnObsolete != nil {
		vs.opts.OnObsolete(obsolete)
	}
}

// Current returns the current version with a reference the caller must drop.
func (vs *VersionSet) Current() *Version {
	vs.mu.Lock()
	v := vs.current
	v.Ref()
	vs.mu.Unlock()
	return v
}

// NewFileNum allocates a file number.
func (vs *VersionSet) NewFileNum() base.FileNum {
	return base.FileNum(vs.nextFileNum.Add(1) - 1)
}

// MarkFileNumUsed makes sure later allocations are above n.
func (vs *VersionSet) MarkFileNumUsed(n base.FileNum) {
	for {
		cur := vs.nextFileNum.Load()
		if cur > uint64(n) || vs.nextFileNum.CompareAndSwap(cur, uint64(n)+1) {
			return
		}
	}
}

// LogNum returns the persisted log number: logs numbered below it are no
// longer needed.
func (vs *VersionSet) LogNum() base.FileNum {
	vs.applyMu.Lock()
	defer vs.applyMu.Unlock()
	return vs.logNum
}

// LastSeq returns the last sequence number persisted in the manifest.
func (vs *VersionSet) LastSeq() base.SeqNum {
	vs.applyMu.Lock()
	defer vs.applyMu.Unlock()
	return vs.lastSeq
}

// ManifestNum returns the live manifest's file number.
func (vs *VersionSet) ManifestNum() base.FileNum {
	vs.applyMu.Lock()
	defer vs.applyMu.Unlock()
	return vs.manifestNum
}

// LogAndApply applies an edit to the current version, makes it durable in
// the manifest, and installs the result. The edit's LogNum and LastSeq, when
// set, must not go backwards. On a write or sync error nothing is installed,
// but the edit may still be durable (it may be replayed by the next Load):
// the caller must not delete the tables it adds, and every later
// LogAndApply fails.
func (vs *VersionSet) LogAndApply(e *VersionEdit) error {
	vs.applyMu.Lock()
	defer vs.applyMu.Unlock()
	if vs.closed {
		return errors.New("manifest: version set closed")
	}
	if vs.manifest == nil {
		return ErrReadOnly
	}
	if vs.err != nil {
		return vs.err
	}
	if e.LogNum != 0 && e.LogNum < vs.logNum {
		return fmt.Errorf("manifest: log number going backwards (%d < %d)", e.LogNum, vs.logNum)
	}
	if e.LastSeq != 0 && e.LastSeq < vs.lastSeq {
		return fmt.Errorf("manifest: last sequence going backwards (%d < %d)", e.LastSeq, vs.lastSeq)
	}
	e.NextFileNum = base.FileNum(vs.nextFileNum.Load())
	vs.mu.Lock()
	cur := vs.current
	vs.mu.Unlock()
	nv, err := cur.apply(e)
	if err != nil {
		return err
	}
	oldLog, oldSeq, oldWALs := vs.logNum, vs.lastSeq, maps.Clone(vs.wals)
	vs.applyCounters(e)
	if vs.manifest.Size() >= vs.opts.MaxManifestSize {
		if err := vs.rotate(nv); err != nil {
			vs.logNum, vs.lastSeq, vs.wals = oldLog, oldSeq, oldWALs
			vs.err = fmt.Errorf("manifest: unusable after a failed write: %w", err)
			return err
		}
	} else {
		if err := vs.append(e); err != nil {
			// The edit may or may not be durable, and the log may end in a
			// partial record: refuse further edits.
			vs.logNum, vs.lastSeq, vs.wals = oldLog, oldSeq, oldWALs
			vs.err = fmt.Errorf("manifest: unusable after a failed write: %w", err)
			return err
		}
	}
	vs.install(nv)
	return nil
}

func (vs *VersionSet) append(e *VersionEdit) error {
	if _, err := vs.manifest.WriteRecord(e.Encode(nil)); err != nil {
		return fmt.Errorf("manifest: write: %w", err)
	}
	if err := vs.manifest.Flush(); err != nil {
		return fmt.Errorf("manifest: write: %w", err)
	}
	if err := vs.manifestFile.Sync(); err != nil {
		return fmt.Errorf("manifest: sync: %w", err)
	}
	return nil
}

// LiveFileNums returns the tables listed by any live version.
func (vs *VersionSet) LiveFileNums() map[base.FileNum]bool {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	live := map[base.FileNum]bool{}
	for v := vs.live.next; v != &vs.live; v = v.next {
		for _, files := range v.Levels {
			for _, f := range files {
				live[f.FileNum] = true
			}
		}
	}
	return live
}

// Close closes the manifest file; the current version keeps its reference.
func (vs *VersionSet) Close() error {
	vs.applyMu.Lock()
	defer vs.applyMu.Unlock()
	vs.closed = true
	if vs.manifestFile == nil {
		return nil
	}
	err := vs.manifestFile.Close()
	vs.manifestFile, vs.manifest = nil, nil
	return err
}
