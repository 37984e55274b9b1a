// Package stress runs CPU burners beside a benchmark, as the gLSM paper's
// stress-ng runs do (shared/docs/specs/gpucompact.md §6): processes that
// keep every core busy for a share of each 10 ms period, so that a
// compactor's speed can be measured on a host whose CPUs are loaded by
// other work — the case a GPU compactor is for.
//
// A burner is a copy of the running program, told by an environment
// variable to burn: a program that starts burners calls MaybeBurn first
// thing in main (and in TestMain for tests that start them). Burners are
// separate processes, so the benchmark's Go scheduler does not see them,
// as it would not see another program; they exit when the program that
// started them stops them, exits or dies.
package stress

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"
)

// envVar carries a burner's duty (percent) to the copy of the program.
const envVar = "WARPKIT_CPU_STRESS_BURNER"

// Period is the burners' duty cycle: each is busy for pct% of every
// Period and sleeps the rest.
const Period = 10 * time.Millisecond

// ErrPercent is returned for a duty outside 0..100.
var ErrPercent = errors.New("stress: percent outside 0..100")

// ErrNested is returned by Start in a burner: the program did not call
// MaybeBurn first thing, so its burners run it again.
var ErrNested = errors.New("stress: Start in a burner process (call MaybeBurn first thing in main and TestMain)")

// Burners are running burner processes.
type Burners struct {
	cmds   []*exec.Cmd
	stdins []io.WriteCloser
}

// Start starts n burner processes (runtime.NumCPU() when n is 0), each
// busy pct% of every Period on one core. pct 0 starts none.
func Start(pct, n int) (*Burners, error) {
	if pct < 0 || pct > 100 {
		return nil, fmt.Errorf("%w: %d", ErrPercent, pct)
	}
	if _, burner := os.LookupEnv(envVar); burner {
		// A burner that starts burners (a program that never called
		// MaybeBurn) would multiply without end.
		return nil, ErrNested
	}
	b := &Burners{}
	if pct == 0 {
		return b, nil
	}
	if n <= 0 {
		n = runtime.NumCPU()
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("stress: %w", err)
	}
	for range n {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envVar+"="+strconv.Itoa(pct))
		cmd.Stdout, cmd.Stderr = nil, os.Stderr
		// A burner exits when this pipe closes: at Stop, or when this
		// process ends however it ends (the kernel closes its end). (No
		// Pdeathsig: Linux sends it when the forking thread exits, which a
		// Go program's thread may do long before the process.)
		stdin, err := cmd.StdinPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			b.Stop()
			return nil, fmt.Errorf("stress: start a burner: %w", err)
		}
		b.cmds = append(b.cmds, cmd)
		b.stdins = append(b.stdins, stdin)
	}
	return b, nil
}

// Len returns how many burners run.
func (b *Burners) Len() int { return len(b.cmds) }

// Stop ends the burners, waits for them, and returns the CPU time they
// used in all.
func (b *Burners) Stop() (time.Duration, error) {
	for _, w := range b.stdins {
		w.Close()
	}
	var errs []error
	var cpu time.Duration
	for _, cmd := range b.cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, err)
		}
		if st := cmd.ProcessState; st != nil {
			cpu += st.UserTime() + st.SystemTime()
		}
	}
	b.cmds, b.stdins = nil, nil
	return cpu, errors.Join(errs...)
}

// MaybeBurn runs this process as a burner, and exits, when Start started it
// as one; otherwise it returns at once.
func MaybeBurn() {
	v, ok := os.LookupEnv(envVar)
	if !ok {
		return
	}
	pct, err := strconv.Atoi(v)
	if err != nil || pct < 1 || pct > 100 {
		fmt.Fprintf(os.Stderr, "stress: bad %s=%q\n", envVar, v)
		os.Exit(2)
	}
	go func() { // the parent closes stdin to stop it (or dies)
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	runtime.GOMAXPROCS(1)
	burn(pct, nil)
}

// burn keeps one core busy pct% of every Period (CRC-32 and integer work,
// as stress-ng's cpu stressor mixes) until stop is closed (nil: forever).
func burn(pct int, stop <-chan struct{}) (periods int) {
	busy := Period * time.Duration(pct) / 100
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	var sink uint32
	for {
		select {
		case <-stop:
			_ = sink
			return periods
		default:
		}
		start := time.Now()
		for time.Since(start) < busy {
			sink ^= crc32.ChecksumIEEE(buf)
			for j := uint32(1); j < 200; j++ {
				sink = sink*2654435761 + j
			}
		}
		if rest := Period - time.Since(start); rest > 0 {
			time.Sleep(rest)
		}
		periods++
	}
}
