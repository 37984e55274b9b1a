//go:build unix

package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const lockHelperEnv = "VFS_LOCK_HELPER_FILE"

// TestLockHelperProcess is not a test: run by TestLockAcrossProcesses in a
// child process, it tries a shared lock, releases it, tries an exclusive
// lock, and prints what it got.
func TestLockHelperProcess(t *testing.T) {
	name := os.Getenv(lockHelperEnv)
	if name == "" {
		t.Skip("helper process only")
	}
	try := func(lock func(string) (io.Closer, error)) string {
		c, err := lock(name)
		switch {
		case err == nil:
			c.Close()
			return "ok"
		case errors.Is(err, ErrLocked):
			return "locked"
		}
		return "error: " + err.Error()
	}
	fmt.Printf("shared=%s exclusive=%s\n", try(Default.LockShared), try(Default.Lock))
}

// TestLockAcrossProcesses checks that the OS file system's locks exclude (and
// admit) another process as the contract says.
func TestLockAcrossProcesses(t *testing.T) {
	if os.Getenv(lockHelperEnv) != "" {
		t.Skip("in the helper process")
	}
	name := Default.PathJoin(t.TempDir(), "LOCK")
	if err := WriteFile(Default, name, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		parent string // the lock this process holds while the child runs
		want   string
	}{
		{"none", "shared=ok exclusive=ok"},
		{"shared", "shared=ok exclusive=locked"},
		{"exclusive", "shared=locked exclusive=locked"},
	} {
		t.Run(tc.parent, func(t *testing.T) {
			var c io.Closer
			var err error
			switch tc.parent {
			case "shared":
				c, err = Default.LockShared(name)
			case "exclusive":
				c, err = Default.Lock(name)
			}
			if err != nil {
				t.Fatal(err)
			}
			if c != nil {
				defer c.Close()
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), lockHelperEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			var got string
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "shared=") {
					got = line
				}
			}
			if got != tc.want {
				t.Fatalf("child saw %q, want %q\n%s", got, tc.want, out)
			}
		})
	}
}
