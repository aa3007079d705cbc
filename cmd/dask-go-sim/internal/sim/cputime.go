//go:build linux

package sim

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPU is the CPU time of the calling OS thread (Linux
// CLOCK_THREAD_CPUTIME_ID). Run locks its goroutine to one thread, so the
// difference around State.Handle is the engine's own CPU time: neither the
// neighbours on a shared machine nor the simulator's other work count.
// Garbage collection done by background workers is not included; GC
// assists charged to the engine's allocations are. The clock has no vDSO
// fast path: each read is a system call (about 0.55 µs on the 2-core VM
// of scripts/sim/results/engine-throughput.md), and about one read's worth
// falls inside each measured interval (clockCost).
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
