//go:build unix

package kvcompactbench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used so far, in user and in
// system (kernel) mode.
func processCPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
