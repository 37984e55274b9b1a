// Package procmem reads the process's resident memory for the benchmarks:
// its peak (the kernel's high-water mark) over a window the caller opens.
//
// On Linux the window is opened by writing 5 to /proc/self/clear_refs,
// which sets the high-water mark (VmHWM in /proc/self/status) to the
// current resident set; Peak reads VmHWM. Elsewhere, or where /proc is not
// writable, Supported is false and Peak reports 0.
package procmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
)

// ErrUnsupported is returned where the platform has no resettable peak.
var ErrUnsupported = errors.New("procmem: no resettable peak resident set on this platform")

// ResetPeak returns the Go heap's free memory to the system and starts a
// window: the peak read by Peak is then the largest resident set since
// this call.
func ResetPeak() error {
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return nil
}

// Peak returns the largest resident set, in bytes, since the last ResetPeak
// (or since the process started), and the current one.
func Peak() (peak, current uint64, err error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return parseStatus(b)
}

// parseStatus reads VmHWM and VmRSS (kB) from a /proc/PID/status text.
func parseStatus(b []byte) (peak, current uint64, err error) {
	var gotPeak, gotCur bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		field := func(name string) (uint64, bool) {
			rest, ok := bytes.CutPrefix(line, []byte(name+":"))
			if !ok {
				return 0, false
			}
			f := bytes.Fields(rest)
			if len(f) != 2 || string(f[1]) != "kB" {
				return 0, false
			}
			v, perr := strconv.ParseUint(string(f[0]), 10, 64)
			return v << 10, perr == nil
		}
		if v, ok := field("VmHWM"); ok {
			peak, gotPeak = v, true
		} else if v, ok := field("VmRSS"); ok {
			current, gotCur = v, true
		}
	}
	if !gotPeak || !gotCur {
		return 0, 0, fmt.Errorf("%w: no VmHWM and VmRSS in /proc/self/status", ErrUnsupported)
	}
	return peak, current, nil
}
