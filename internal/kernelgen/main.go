// Command kernelgen compiles a package's CUDA C source to PTX for embedding.
// It is run by go:generate lines of the form
//
//	//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/kernels.ptx kernels.cu
//	//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/kv32x64.ptx -DWK_WIDTH=WK_KV32X64 slabhash.cu
//
// (go generate runs it in the package directory) and writes the PTX, with a
// provenance header (see package ptxcheck) naming the nvcc version, the flags
// and the sha256 of the source and of every local header it includes, so that
// a plain test can tell when the PTX is stale. Generated PTX lives in the
// package's ptx/ directory (ptxcheck.Dir), apart from the sources it is
// compiled from; that is also where it goes when -o is left out.
//
// -D NAME[=VALUE] (or -DNAME[=VALUE]), repeatable, defines a macro for the
// compilation, so that one source can be compiled into several PTX files (a
// module per key/value width, each loaded only by the types that use it). The
// macros are recorded in the header, and ptxcheck holds the PTX stale when the
// generate line that writes it no longer gives the same ones. Other nvcc flags cannot be
// added: every kernel is built with ptxcheck.Flags.
//
// With WARPKIT_KERNELGEN_LINEINFO=1 in the environment kernelgen also passes
// -lineinfo (and records it among the flags, so that such PTX is stale to
// the tests and is never committed): scripts/profile-build.sh builds a CLI
// from it whose kernels Nsight Compute can map to source lines.
//
// The target is compute_70 (Volta, the oldest supported architecture); the
// driver JIT-compiles the PTX for the actual GPU. Headers in internal/devcode
// are on the include path. nvcc comes from scripts/install-cuda-toolkit.sh.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

const usage = `usage: kernelgen [-o out.ptx] [-D NAME[=VALUE]]... source.cu

  -o out.ptx       the output (default: ptx/<source name>.ptx beside the source)
  -D NAME[=VALUE]  define a macro (also -DNAME[=VALUE]); repeatable
`

func main() {
	cmd, err := ptxcheck.ParseCommand(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "kernelgen: %v\n%s", err, usage)
		os.Exit(2)
	}
	if err := run(cmd); err != nil {
		fmt.Fprintln(os.Stderr, "kernelgen:", err)
		os.Exit(1)
	}
}

func run(c ptxcheck.Command) error {
	src, out := filepath.FromSlash(c.Source), filepath.FromSlash(c.Output())
	nvcc, err := exec.LookPath("nvcc")
	if err != nil {
		return fmt.Errorf("nvcc not found; install it with scripts/install-cuda-toolkit.sh")
	}
	version, err := nvccVersion(nvcc)
	if err != nil {
		return err
	}
	absSrc, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	root, err := ptxcheck.ModuleRoot(filepath.Dir(absSrc))
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, absSrc)
	if err != nil {
		return err
	}
	rel = filepath.ToSlash(rel)
	inputs, err := ptxcheck.Inputs(root, rel)
	if err != nil {
		return err
	}

	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".kernelgen-*.ptx")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName)

	flags := append([]string{}, ptxcheck.Flags...)
	if os.Getenv("WARPKIT_KERNELGEN_LINEINFO") == "1" {
		flags = append(flags, "-lineinfo")
	}
	args := append([]string{}, flags...)
	for _, d := range c.Defines {
		args = append(args, "-D"+d)
	}
	for _, d := range ptxcheck.IncludeDirs {
		args = append(args, "-I", filepath.Join(root, filepath.FromSlash(d)))
	}
	args = append(args, "-o", tmpName, absSrc)
	cmd := exec.Command(nvcc, args...)
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nvcc %s: %w", rel, err)
	}
	ptx, err := os.ReadFile(tmpName)
	if err != nil {
		return err
	}
	h := ptxcheck.Header{Source: rel, NVCC: version, Flags: strings.Join(flags, " "), Defines: c.Defines, Inputs: inputs}
	var buf bytes.Buffer
	buf.WriteString(h.Format())
	buf.Write(ptx)
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// nvccVersion returns the "Cuda compilation tools, release X, VX.Y.Z" line.
func nvccVersion(nvcc string) (string, error) {
	b, err := exec.Command(nvcc, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("nvcc --version: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "release") {
			return strings.TrimSpace(line), nil
		}
	}
	return "", fmt.Errorf("nvcc --version printed no release line: %q", b)
}
