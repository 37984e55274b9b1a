package vfs

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory file system that models durability the way a strict
// POSIX file system allows: a file's data is durable up to its last Sync, and
// a directory's entries (creations, renames, removals) are durable as of its
// directory's last Sync. CrashClone returns what a crash would leave.
//
// Paths use '/' separators; relative paths are relative to the root.
//
// Memory: a file's data lives in chunks of up to 1 MiB. Once nothing can
// read a file again (removed or replaced, with no handle open and no
// durable entry left), its full-size chunks are kept, up to 256 MiB in
// all, for the next writes: writing into fresh memory, which faults in
// every page, was most of the host's work in the CUDA compaction engine.
// That memory goes back only with the MemFS.
type MemFS struct {
	mu        sync.Mutex
	root      *memNode
	openFiles int // handles from Create and Open not yet closed
	// chunks keeps the full-size chunks of files that nothing refers to any
	// more (no directory entry, live or durable, and no open handle) for
	// new writes (memdata.go).
	chunks chunkPool
}

// memNode is a file or a directory.
type memNode struct {
	name  string
	isDir bool

	mu      sync.RWMutex // guards data and synced (readers share it); dir maps are under MemFS.mu
	data    memData
	synced  int // length of the durable prefix of data
	modTime time.Time
	// Under MemFS.mu, for files: the directory maps that hold the node
	// (children and durable entries) and its open handles. At zero both,
	// nothing can reach its data again, and its chunks go to the pool.
	links, handles int
	// Locks, under MemFS.mu: an exclusive holder (Lock) or a count of shared
	// holders (LockShared), never both.
	lockedExcl bool
	lockShared int
	children   map[string]*memNode // directories: live entries
	durable    map[string]*memNode // directories: entries as of the last dir sync
}

func newDir(name string) *memNode {
	return &memNode{name: name, isDir: true, children: map[string]*memNode{}, durable: map[string]*memNode{}, modTime: time.Now()}
}

// NewMem returns an empty in-memory file system.
func NewMem() *MemFS { return &MemFS{root: newDir("/")} }

func split(name string) []string {
	name = path.Clean("/" + strings.ReplaceAll(name, "\\", "/"))
	if name == "/" {
		return nil
	}
	return strings.Split(name[1:], "/")
}

// walk returns the parent directory of name and the last element. Caller
// holds fs.mu.
func (fs *MemFS) walk(name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", &os.PathError{Op: "open", Path: name, Err: os.ErrInvalid}
	}
	dir := fs.root
	for _, p := range parts[:len(parts)-1] {
		c, ok := dir.children[p]
		if !ok || !c.isDir {
			return nil, "", &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
		}
		dir = c
	}
	return dir, parts[len(parts)-1], nil
}

func (fs *MemFS) lookup(name string) (*memNode, error) {
	if len(split(name)) == 0 {
		return fs.root, nil
	}
	dir, base, err := fs.walk(name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	if !ok {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	return n, nil
}

// isDirError is the error of an op on name that wants a file and found a
// directory.
func isDirError(op, name string) error {
	return &os.PathError{Op: op, Path: name, Err: errors.New("is a directory")}
}

// lookupFile is lookup for an op that wants a file, not a directory.
func (fs *MemFS) lookupFile(op, name string) (*memNode, error) {
	n, err := fs.lookup(name)
	if err == nil && n.isDir {
		return nil, isDirError(op, name)
	}
	return n, err
}

// Create implements FS.
func (fs *MemFS) Create(name string) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dir, base, err := fs.walk(name)
	if err != nil {
		return nil, err
	}
	if old, ok := dir.children[base]; ok && old.isDir {
		return nil, isDirError("create", name)
	}
	n := &memNode{name: base, modTime: time.Now(), links: 1, handles: 1}
	if old, ok := dir.children[base]; ok {
		fs.unlinkLocked(old)
	}
	dir.children[base] = n
	fs.openFiles++
	return &memFile{fs: fs, n: n, path: name, write: true, read: true}, nil
}

// Open implements FS.
func (fs *MemFS) Open(name string) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.lookupFile("open", name)
	if err != nil {
		return nil, err
	}
	n.handles++
	fs.openFiles++
	return &memFile{fs: fs, n: n, path: name, read: true}, nil
}

// OpenDir implements FS.
func (fs *MemFS) OpenDir(name string) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.lookup(name)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, &os.PathError{Op: "open", Path: name, Err: errors.New("not a directory")}
	}
	return &memFile{fs: fs, n: n, path: name}, nil
}

// Remove implements FS.
func (fs *MemFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dir, base, err := fs.walk(name)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	if n.isDir && len(n.children) > 0 {
		return &os.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
	}
	delete(dir.children, base)
	fs.unlinkLocked(n)
	return nil
}

// unlinkLocked drops one directory map's hold on n, and gives its chunks
// to the pool when nothing else holds it.
func (fs *MemFS) unlinkLocked(n *memNode) {
	n.links--
	fs.releaseLocked(n)
}

// releaseLocked gives a file's chunks to the pool once no directory map
// and no handle holds it (nothing can read it again).
func (fs *MemFS) releaseLocked(n *memNode) {
	if n.isDir || n.links > 0 || n.handles > 0 {
		return
	}
	n.mu.Lock()
	d := n.data
	n.data, n.synced = memData{}, 0
	n.mu.Unlock()
	fs.chunks.put(&d)
}

// Rename implements FS.
func (fs *MemFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	odir, obase, err := fs.walk(oldname)
	if err != nil {
		return err
	}
	n, ok := odir.children[obase]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrNotExist}
	}
	ndir, nbase, err := fs.walk(newname)
	if err != nil {
		return err
	}
	t, replaced := ndir.children[nbase]
	if replaced && t.isDir != n.isDir {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrExist}
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	if replaced && t != n {
		fs.unlinkLocked(t)
	}
	return nil
}

// MkdirAll implements FS. New directories, like files, become durable
// entries of their parent only when the parent is synced.
func (fs *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d := fs.root
	for _, p := range split(dir) {
		c, ok := d.children[p]
		if !ok {
			c = newDir(p)
			c.links = 1
			d.children[p] = c
		} else if !c.isDir {
			return &os.PathError{Op: "mkdir", Path: dir, Err: errors.New("not a directory")}
		}
		d = c
	}
	return nil
}

// List implements FS.
func (fs *MemFS) List(dir string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.lookup(dir)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: errors.New("not a directory")}
	}
	names := slices.Sorted(maps.Keys(n.children))
	return names, nil
}

// Stat implements FS.
func (fs *MemFS) Stat(name string) (os.FileInfo, error) {
	fs.mu.Lock()
	n, err := fs.lookup(name)
	fs.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return n.info(), nil
}

// Lock implements FS. It fails with ErrLocked while the file has any other
// holder, exclusive or shared.
func (fs *MemFS) Lock(name string) (io.Closer, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dir, base, err := fs.walk(name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	if !ok {
		n = &memNode{name: base, modTime: time.Now(), links: 1}
		dir.children[base] = n
	}
	if n.isDir {
		return nil, isDirError("lock", name)
	}
	if n.lockedExcl || n.lockShared > 0 {
		return nil, fmt.Errorf("vfs: lock %s: %w", name, ErrLocked)
	}
	n.lockedExcl = true
	return &memLock{fs: fs, n: n}, nil
}

// LockShared implements FS. The file must exist and not be a directory.
func (fs *MemFS) LockShared(name string) (io.Closer, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.lookupFile("lock", name)
	if err != nil {
		return nil, err
	}
	if n.lockedExcl {
		return nil, fmt.Errorf("vfs: lock %s: %w", name, ErrLocked)
	}
	n.lockShared++
	return &memLock{fs: fs, n: n, shared: true}, nil
}

// memLock is one hold on a node's lock; closing it more than once releases
// it only once.
type memLock struct {
	fs     *MemFS
	n      *memNode
	shared bool
	once   sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.fs.mu.Lock()
		if l.shared {
			l.n.lockShared--
		} else {
			l.n.lockedExcl = false
		}
		l.fs.mu.Unlock()
	})
	return nil
}

// OpenFiles returns how many files opened with Create or Open are not yet
// closed; tests use it to find leaked handles.
func (fs *MemFS) OpenFiles() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.openFiles
}

// PathJoin implements FS.
func (*MemFS) PathJoin(elem ...string) string { return path.Join(elem...) }

// PathBase implements FS.
func (*MemFS) PathBase(p string) string { return path.Base(p) }

// CrashOptions says what a crash keeps beyond the durable state.
type CrashOptions struct {
	// Rand, when set, keeps for every file a random-length prefix of the data
	// written after its last sync, as a disk that persisted part of a write
	// would. Nil keeps exactly the synced data.
	Rand *rand.Rand
	// ZeroTail (with Rand) replaces, at random, a part of each kept unsynced
	// prefix with zero bytes, as a torn sector write can.
	ZeroTail bool
}

// CrashClone returns a new MemFS holding what a crash at this instant would
// leave on a strict file system: the directory entries as of each directory's
// last sync, each file's data up to its last sync (plus whatever CrashOptions
// keeps of the rest). Locks are not carried over. The receiver is unchanged
// and stays usable.
func (fs *MemFS) CrashClone(opts CrashOptions) *MemFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return &MemFS{root: cloneDurable(fs.root, opts)}
}

func cloneDurable(dir *memNode, opts CrashOptions) *memNode {
	out := newDir(dir.name)
	for name, c := range dir.durable {
		var cc *memNode
		if c.isDir {
			cc = cloneDurable(c, opts)
		} else {
			cc = c.crashCopy(name, opts)
		}
		cc.links = 2 // both maps of the clone's directory
		out.children[name] = cc
		out.durable[name] = cc
	}
	return out
}

func (n *memNode) crashCopy(name string, opts CrashOptions) *memNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	keep := n.synced
	var zeroFrom, zeroTo int
	if r := opts.Rand; r != nil && n.data.len() > n.synced {
		keep += r.IntN(n.data.len() - n.synced + 1)
		if opts.ZeroTail && keep > n.synced && r.IntN(2) == 0 {
			zeroFrom = n.synced + r.IntN(keep-n.synced)
			zeroTo = keep
		}
	}
	data := n.data.prefix(keep)
	for i := zeroFrom; i < zeroTo; i++ {
		data[i] = 0
	}
	return &memNode{name: name, data: memDataOf(data), synced: len(data), modTime: n.modTime}
}

// String lists the tree with file sizes (synced/total), for test failures.
func (fs *MemFS) String() string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var b strings.Builder
	var rec func(n *memNode, prefix string)
	rec = func(n *memNode, prefix string) {
		names := slices.Sorted(maps.Keys(n.children))
		for _, k := range names {
			c := n.children[k]
			durable := ""
			if n.durable[k] != c {
				durable = " (entry not durable)"
			}
			if c.isDir {
				fmt.Fprintf(&b, "%s%s/%s\n", prefix, k, durable)
				rec(c, prefix+"  ")
			} else {
				c.mu.Lock()
				fmt.Fprintf(&b, "%s%s %d/%d bytes synced%s\n", prefix, k, c.synced, c.data.len(), durable)
				c.mu.Unlock()
			}
		}
	}
	rec(fs.root, "")
	return b.String()
}

func (n *memNode) info() os.FileInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	mode := os.FileMode(0o644)
	if n.isDir {
		mode = os.ModeDir | 0o755
	}
	return memInfo{name: n.name, size: int64(n.data.len()), mode: mode, mod: n.modTime}
}

type memInfo struct {
	name string
	size int64
	mode os.FileMode
	mod  time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() os.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

// memFile is an open handle. Reads are positioned (ReadAt) or sequential
// (Read); writes append.
type memFile struct {
	fs          *MemFS
	n           *memNode
	path        string
	pos         int64
	read, write bool
	closed      bool
}

func (f *memFile) Read(p []byte) (int, error) {
	if f.closed {
		return 0, os.ErrClosed
	}
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed {
		return 0, os.ErrClosed
	}
	if !f.read || f.n.isDir {
		return 0, &os.PathError{Op: "read", Path: f.path, Err: os.ErrInvalid}
	}
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.path, Err: os.ErrInvalid}
	}
	f.n.mu.RLock() // reads of one file run side by side, as a real file's do
	defer f.n.mu.RUnlock()
	if off >= int64(f.n.data.len()) {
		return 0, io.EOF
	}
	n := f.n.data.readAt(p, int(off))
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.closed {
		return 0, os.ErrClosed
	}
	if !f.write {
		return 0, &os.PathError{Op: "write", Path: f.path, Err: os.ErrInvalid}
	}
	f.n.mu.Lock()
	f.n.data.append(p, f.fs.chunks.get)
	f.n.modTime = time.Now()
	f.n.mu.Unlock()
	return len(p), nil
}

// WriteVectors appends every buffer, in order, under one hold of the file
// (VectorWriter).
func (f *memFile) WriteVectors(bufs [][]byte) (int64, error) {
	if f.closed {
		return 0, os.ErrClosed
	}
	if !f.write {
		return 0, &os.PathError{Op: "write", Path: f.path, Err: os.ErrInvalid}
	}
	var n int64
	f.n.mu.Lock()
	for _, b := range bufs {
		f.n.data.append(b, f.fs.chunks.get)
		n += int64(len(b))
	}
	f.n.modTime = time.Now()
	f.n.mu.Unlock()
	return n, nil
}

// Sync makes the data durable; on a directory, it makes the current entries
// durable.
func (f *memFile) Sync() error {
	if f.closed {
		return os.ErrClosed
	}
	if f.n.isDir {
		f.fs.mu.Lock()
		old := f.n.durable
		f.n.durable = make(map[string]*memNode, len(f.n.children))
		for k, v := range f.n.children {
			f.n.durable[k] = v
			v.links++
		}
		for _, v := range old {
			f.fs.unlinkLocked(v)
		}
		f.fs.mu.Unlock()
		return nil
	}
	f.n.mu.Lock()
	f.n.synced = f.n.data.len()
	f.n.mu.Unlock()
	return nil
}

func (f *memFile) Size() (int64, error) {
	if f.closed {
		return 0, os.ErrClosed
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	return int64(f.n.data.len()), nil
}

func (f *memFile) Close() error {
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	if !f.n.isDir {
		f.fs.mu.Lock()
		f.fs.openFiles--
		f.n.handles--
		f.fs.releaseLocked(f.n)
		f.fs.mu.Unlock()
	}
	return nil
}
