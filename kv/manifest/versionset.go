package manifest

import (
	"errors"
	"fmt"
	"io"
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
type VersionSet struct {
	opts Options

	mu      sync.Mutex // guards current and the live list
	current *Version
	live    Version // sentinel of the list of versions with references

	applyMu      sync.Mutex // serialises LogAndApply and manifest writes
	nextFileNum  atomic.Uint64
	logNum       base.FileNum
	lastSeq      base.SeqNum
	manifestNum  base.FileNum
	manifestFile vfs.File
	manifest     *record.Writer
	edits        atomic.Int64
	err          error // sticky: a manifest write failed
}

func newVersionSet(opts Options) *VersionSet {
	if opts.MaxManifestSize <= 0 {
		opts.MaxManifestSize = 8 << 20
	}
	vs := &VersionSet{opts: opts}
	vs.live.next, vs.live.prev = &vs.live, &vs.live
	return vs
}

// Create initialises an empty store's manifest and CURRENT in opts.Dir.
func Create(opts Options) (*VersionSet, error) {
	vs := newVersionSet(opts)
	vs.nextFileNum.Store(1)
	if err := vs.rotate(&Version{}); err != nil {
		return nil, err
	}
	vs.install(&Version{})
	return vs, nil
}

// Load reads CURRENT and replays the manifest it names, then starts a fresh
// manifest holding the recovered version (so later edits never follow a torn
// tail). A torn last record (an edit whose write a crash cut short, which was
// therefore never acknowledged) is ignored; damage in the middle is a
// corruption error naming the manifest and offset.
func Load(opts Options) (*VersionSet, error) {
	vs := newVersionSet(opts)
	fs := opts.FS
	cur, err := vfs.ReadFile(fs, fs.PathJoin(opts.Dir, "CURRENT"))
	if err != nil {
		return nil, fmt.Errorf("manifest: read CURRENT: %w", err)
	}
	name, ok := strings.CutSuffix(string(cur), "\n")
	if !ok {
		return nil, base.Corruptf("CURRENT", 0, "no trailing newline")
	}
	typ, num, ok := base.ParseFilename(name)
	if !ok || typ != base.FileTypeManifest {
		return nil, base.Corruptf("CURRENT", 0, "names %q, not a manifest", name)
	}
	f, err := fs.Open(fs.PathJoin(opts.Dir, name))
	if err != nil {
		return nil, fmt.Errorf("manifest: open %s: %w", name, err)
	}
	defer f.Close()
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
			break // torn tail
		}
		var e VersionEdit
		if err := e.Decode(rec); err != nil {
			return nil, base.Corruptf(name, r.Offset(), "%v", err)
		}
		if e.Comparator != "" {
			if e.Comparator != Comparator {
				return nil, fmt.Errorf("manifest: store uses comparator %q, this build %q", e.Comparator, Comparator)
			}
			sawComparator = true
		}
		if e.LogNum != 0 {
			vs.logNum = e.LogNum
		}
		if e.NextFileNum != 0 {
			next = e.NextFileNum
		}
		if e.LastSeq != 0 {
			vs.lastSeq = e.LastSeq
		}
		if v, err = v.apply(&e); err != nil {
			return nil, base.Corruptf(name, r.Offset(), "%v", err)
		}
	}
	if !sawComparator {
		return nil, base.Corruptf(name, 0, "no comparator record")
	}
	for _, files := range v.Levels {
		for _, f := range files {
			next = max(next, f.FileNum+1)
		}
	}
	next = max(next, num+1, vs.logNum+1)
	vs.nextFileNum.Store(uint64(next))
	if err := vs.rotate(v); err != nil {
		return nil, err
	}
	vs.install(v)
	if opts.OnObsoleteManifest != nil {
		opts.OnObsoleteManifest(num)
	}
	return vs, nil
}

// snapshotEdit describes v completely.
func (vs *VersionSet) snapshotEdit(v *Version) *VersionEdit {
	e := &VersionEdit{
		Comparator:  Comparator,
		LogNum:      vs.logNum,
		NextFileNum: base.FileNum(vs.nextFileNum.Load()),
		LastSeq:     vs.lastSeq,
	}
	for l, files := range v.Levels {
		for _, f := range files {
			e.NewFiles = append(e.NewFiles, NewFile{Level: l, Meta: f})
		}
	}
	return e
}

// rotate starts a new manifest describing v and points CURRENT at it.
func (vs *VersionSet) rotate(v *Version) error {
	fs, dir := vs.opts.FS, vs.opts.Dir
	num := vs.NewFileNum()
	name := base.MakeFilename(base.FileTypeManifest, num)
	f, err := fs.Create(fs.PathJoin(dir, name))
	if err != nil {
		return fmt.Errorf("manifest: create %s: %w", name, err)
	}
	w := record.NewWriter(f)
	// The snapshot records the next file number after this manifest's own.
	if _, err := w.WriteRecord(vs.snapshotEdit(v).Encode(nil)); err != nil {
		f.Close()
		return fmt.Errorf("manifest: write %s: %w", name, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("manifest: write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("manifest: sync %s: %w", name, err)
	}
	if err := setCurrent(fs, dir, name, vs.NewFileNum()); err != nil {
		f.Close()
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

// setCurrent atomically replaces CURRENT with one naming manifest.
func setCurrent(fs vfs.FS, dir, manifest string, tmpNum base.FileNum) error {
	tmp := fs.PathJoin(dir, base.MakeFilename(base.FileTypeTemp, tmpNum))
	if err := vfs.WriteFile(fs, tmp, []byte(manifest+"\n")); err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("manifest: write CURRENT: %w", err)
	}
	if err := fs.Rename(tmp, fs.PathJoin(dir, "CURRENT")); err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("manifest: install CURRENT: %w", err)
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

// Edits returns how many edits have been applied since the set was opened.
func (vs *VersionSet) Edits() int64 { return vs.edits.Load() }

// LogAndApply applies an edit to the current version, makes it durable in
// the manifest, and installs the result. The edit's LogNum and LastSeq, when
// set, must not go backwards. On a write or sync error nothing is installed,
// but the edit may still be durable (it may be replayed by the next Load):
// the caller must not delete the tables it adds, and every later
// LogAndApply fails.
func (vs *VersionSet) LogAndApply(e *VersionEdit) error {
	vs.applyMu.Lock()
	defer vs.applyMu.Unlock()
	if vs.manifest == nil {
		return errors.New("manifest: version set closed")
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
	oldLog, oldSeq := vs.logNum, vs.lastSeq
	if e.LogNum != 0 {
		vs.logNum = e.LogNum
	}
	if e.LastSeq != 0 {
		vs.lastSeq = e.LastSeq
	}
	if vs.manifest.Size() >= vs.opts.MaxManifestSize {
		if err := vs.rotate(nv); err != nil {
			vs.logNum, vs.lastSeq = oldLog, oldSeq
			vs.err = fmt.Errorf("manifest: unusable after a failed write: %w", err)
			return err
		}
	} else {
		if err := vs.append(e); err != nil {
			// The edit may or may not be durable, and the log may end in a
			// partial record: refuse further edits.
			vs.logNum, vs.lastSeq = oldLog, oldSeq
			vs.err = fmt.Errorf("manifest: unusable after a failed write: %w", err)
			return err
		}
	}
	vs.edits.Add(1)
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
	if vs.manifestFile == nil {
		return nil
	}
	err := vs.manifestFile.Close()
	vs.manifestFile, vs.manifest = nil, nil
	return err
}
