package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
)

// ErrInjected is the error a FaultFS returns (wrapped) for an injected fault.
var ErrInjected = errors.New("vfs: injected error")

// Op is a kind of file-system operation a fault can be injected into.
type Op uint16

// Operations; combine them with | in a mask.
const (
	OpCreate Op = 1 << iota
	OpOpen
	OpRead // Read and ReadAt
	OpWrite
	OpSync // file and directory syncs
	OpRemove
	OpRename
	OpList
	OpMkdir
	OpStat
	OpLock // Lock and LockShared

	// OpAll matches every operation.
	OpAll Op = 1<<iota - 1
)

var opNames = []string{"create", "open", "read", "write", "sync", "remove", "rename", "list", "mkdir", "stat", "lock"}

// String names the operation(s).
func (o Op) String() string {
	s := ""
	for i, n := range opNames {
		if o&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

// Injector decides whether an operation fails. MaybeError is called before
// the operation runs; a non-nil result is returned (wrapped in a PathError)
// instead of running it. It must be safe for concurrent use.
type Injector interface {
	MaybeError(op Op, path string) error
}

// InjectorFunc adapts a function to an Injector.
type InjectorFunc func(op Op, path string) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op, path string) error { return f(op, path) }

// Countdown fails the n-th operation matching mask (counting from 1), and
// every later one if sticky is set. Count reports how many matching
// operations it has seen, which a test can use to enumerate fault points.
type Countdown struct {
	mask   Op
	n      int64
	sticky bool
	seen   atomic.Int64
}

// NewCountdown returns a Countdown; n <= 0 never fails (use it to count).
func NewCountdown(mask Op, n int64, sticky bool) *Countdown {
	return &Countdown{mask: mask, n: n, sticky: sticky}
}

// MaybeError implements Injector.
func (c *Countdown) MaybeError(op Op, path string) error {
	if op&c.mask == 0 {
		return nil
	}
	k := c.seen.Add(1)
	if c.n > 0 && (k == c.n || (c.sticky && k > c.n)) {
		return ErrInjected
	}
	return nil
}

// Count returns how many matching operations have been seen.
func (c *Countdown) Count() int64 { return c.seen.Load() }

// Random fails each operation matching mask with probability p.
type Random struct {
	mask Op
	p    float64
	mu   sync.Mutex
	rng  *rand.Rand
}

// NewRandom returns a Random injector seeded with seed.
func NewRandom(mask Op, p float64, seed uint64) *Random {
	return &Random{mask: mask, p: p, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// MaybeError implements Injector.
func (r *Random) MaybeError(op Op, path string) error {
	if op&r.mask == 0 {
		return nil
	}
	r.mu.Lock()
	hit := r.rng.Float64() < r.p
	r.mu.Unlock()
	if hit {
		return ErrInjected
	}
	return nil
}

// FaultFS wraps an FS and consults an Injector before each operation.
type FaultFS struct {
	fs  FS
	inj atomic.Pointer[Injector]
}

// NewFault wraps fs; inj may be nil (no faults) and can be changed later.
func NewFault(fs FS, inj Injector) *FaultFS {
	f := &FaultFS{fs: fs}
	f.SetInjector(inj)
	return f
}

// SetInjector replaces the injector; nil disables faults.
func (f *FaultFS) SetInjector(inj Injector) {
	if inj == nil {
		f.inj.Store(nil)
		return
	}
	f.inj.Store(&inj)
}

func (f *FaultFS) check(op Op, path string) error {
	p := f.inj.Load()
	if p == nil {
		return nil
	}
	if err := (*p).MaybeError(op, path); err != nil {
		return &os.PathError{Op: op.String(), Path: path, Err: fmt.Errorf("%w", err)}
	}
	return nil
}

// Create implements FS.
func (f *FaultFS) Create(name string) (File, error) {
	if err := f.check(OpCreate, name); err != nil {
		return nil, err
	}
	file, err := f.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

// Open implements FS.
func (f *FaultFS) Open(name string) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

// OpenDir implements FS.
func (f *FaultFS) OpenDir(name string) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.fs.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

// Remove implements FS.
func (f *FaultFS) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

// Rename implements FS.
func (f *FaultFS) Rename(oldname, newname string) error {
	if err := f.check(OpRename, newname); err != nil {
		return err
	}
	return f.fs.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (f *FaultFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.check(OpMkdir, dir); err != nil {
		return err
	}
	return f.fs.MkdirAll(dir, perm)
}

// List implements FS.
func (f *FaultFS) List(dir string) ([]string, error) {
	if err := f.check(OpList, dir); err != nil {
		return nil, err
	}
	return f.fs.List(dir)
}

// Stat implements FS.
func (f *FaultFS) Stat(name string) (os.FileInfo, error) {
	if err := f.check(OpStat, name); err != nil {
		return nil, err
	}
	return f.fs.Stat(name)
}

// Lock implements FS.
func (f *FaultFS) Lock(name string) (io.Closer, error) {
	if err := f.check(OpLock, name); err != nil {
		return nil, err
	}
	return f.fs.Lock(name)
}

// LockShared implements FS; it is subject to OpLock faults, as Lock is.
func (f *FaultFS) LockShared(name string) (io.Closer, error) {
	if err := f.check(OpLock, name); err != nil {
		return nil, err
	}
	return f.fs.LockShared(name)
}

// PathJoin implements FS.
func (f *FaultFS) PathJoin(elem ...string) string { return f.fs.PathJoin(elem...) }

// PathBase implements FS.
func (f *FaultFS) PathBase(p string) string { return f.fs.PathBase(p) }

type faultFile struct {
	File
	fs   *FaultFS
	name string
}

func (f *faultFile) Read(p []byte) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

// WriteVectors is one write (OpWrite), through the file's own
// WriteVectors where it has one.
func (f *faultFile) WriteVectors(bufs [][]byte) (int64, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	if vw, ok := f.File.(VectorWriter); ok {
		return vw.WriteVectors(bufs)
	}
	n, err := f.File.Write(bytes.Join(bufs, nil)) // (one write, not one a buffer)
	return int64(n), err
}

func (f *faultFile) Sync() error {
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}
