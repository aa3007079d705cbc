//go:build linux

package sim

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPU is the CPU time of the calling OS thread (Linux
// CLOCK_THREAD_CPUTIME_ID). Run locks its goroutine to one thread, so
// neither the neighbours on a shared machine nor the collector's
// background workers count; GC assists charged to the engine's
// allocations do. The clock has no vDSO fast path: each read is a system
// call (about 0.55 µs on the 2-core VM of
// scripts/sim/results/engine-throughput.md), which is why the engine
// clock reads it per chunk, not per interval (engineclock.go).
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
