//go:build !unix

package kvcompactbench

import "time"

// processCPU is not measured here: CPU-s/GB prints 0.
func processCPU() (user, sys time.Duration) { return 0, 0 }
