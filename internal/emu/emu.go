// Package emu builds warpkit's kernel sources for the CPU emulation of the
// GPU (emu.h beside this file) and opens emulated devices over them
// (cuda.OpenEmulated), so that a structure's CUDA backend — its kernels and
// the host code that drives them — runs in `go test` on a machine without a
// GPU. The emulation checks logic, not speed or the GPU memory model; the
// GPU test suites still run on a device (scripts/gpu-test.sh).
//
// A source is compiled by the host's C++ compiler (g++, C++20) as C++ with
// emu.h included first, so the device code must compile for both: inline
// PTX sits behind #ifndef WK_HOST_EMULATION with a host version beside it
// (internal/devcode/mem.cuh). Builds are cached under the user's cache
// directory by the sha256 of the compiler, the flags, the source and every
// header of its include directories.
package emu

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/warpkit/warpkit/cuda"
)

// dir is this package's source directory (emu.h and the shared headers'
// directory beside it).
func dir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("emu: cannot locate the package source")
	}
	return filepath.Dir(file), nil
}

// ErrUnsupported reports a machine where the emulation cannot run: not
// linux/amd64 (its fibers switch stacks with x86-64 assembly), or no g++.
var ErrUnsupported = errors.New("emu: the CPU emulation needs linux/amd64 and g++")

var flags = []string{"-std=c++20", "-O1", "-fPIC", "-shared", "-x", "c++"}

var (
	buildMu sync.Mutex
	built   = map[string]string{} // source key -> library path, per process
)

// Library compiles the kernel source src (a .cu file) against emu.h into a
// shared library and returns its path. The include path holds the source's
// directory and internal/devcode.
func Library(src string) (string, error) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return "", ErrUnsupported
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		return "", ErrUnsupported
	}
	here, err := dir()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return "", err
	}
	devcode := filepath.Join(filepath.Dir(here), "devcode")
	includes := []string{filepath.Dir(abs), devcode, here}

	buildMu.Lock()
	defer buildMu.Unlock()
	h := sha256.New()
	ver, _ := exec.Command(cxx, "--version").Output()
	h.Write(ver)
	fmt.Fprintln(h, strings.Join(flags, " "))
	if err := hashFile(h, abs); err != nil {
		return "", err
	}
	for _, inc := range includes {
		hs, _ := filepath.Glob(filepath.Join(inc, "*.cuh"))
		h2, _ := filepath.Glob(filepath.Join(inc, "*.h"))
		hs = append(hs, h2...)
		slices.Sort(hs)
		for _, f := range hs {
			fmt.Fprintln(h, filepath.Base(f))
			if err := hashFile(h, f); err != nil {
				return "", err
			}
		}
	}
	key := hex.EncodeToString(h.Sum(nil))[:24]
	if p, ok := built[key]; ok {
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cacheDir := filepath.Join(cache, "warpkit-emu")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(cacheDir, strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))+"-"+key+".so")
	if _, err := os.Stat(out); err == nil {
		built[key] = out
		return out, nil
	}
	tmp := fmt.Sprintf("%s.tmp%d", out, os.Getpid())
	args := append([]string{}, flags...)
	for _, inc := range includes {
		args = append(args, "-I", inc)
	}
	args = append(args, "-include", filepath.Join(here, "emu.h"), "-o", tmp, abs, "-lpthread")
	cmd := exec.Command(cxx, args...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("emu: compiling %s: %v\n%s", src, err, msg)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	built[key] = out
	return out, nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}

// Options configure Device.
type Options struct {
	// TotalMemory is the emulated device's memory (default 1 GiB).
	TotalMemory uint64
	// Parallel is how many blocks of a launch run at once, each on an OS
	// thread (default GOMAXPROCS): set it to the grid for kernels whose
	// blocks must all be resident, or to exercise more blocks at once.
	Parallel int
}

// Device builds the kernel sources srcs (paths relative to the test's
// package directory) and opens an emulated device over them for the test,
// closing it at cleanup. It skips the test where the emulation cannot run
// and fails it when a source does not build.
func Device(t testing.TB, opts Options, srcs ...string) *cuda.Device {
	t.Helper()
	var libs []string
	for _, src := range srcs {
		lib, err := Library(src)
		if errors.Is(err, ErrUnsupported) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		libs = append(libs, lib)
	}
	total := opts.TotalMemory
	if total == 0 {
		total = 1 << 30
	}
	d, err := cuda.OpenEmulated(cuda.EmulatorOptions{Libraries: libs, TotalMemory: total, Parallel: opts.Parallel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
