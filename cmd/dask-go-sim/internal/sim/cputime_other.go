//go:build !linux

package sim

import "time"

var cpuEpoch = time.Now()

// threadCPU falls back to wall time where no per-thread CPU clock exists.
func threadCPU() time.Duration { return time.Since(cpuEpoch) }
