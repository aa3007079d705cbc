package server

import (
	"os"
	"runtime"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// processStats is identity's "daskgo" section: what a long-lived scheduler
// holds, for operators and for tests/stress, which compare it before and
// after each case. Stock clients ignore keys they do not know.
//
//   - goroutines: every goroutine has an owner and an exit, so the count
//     falls back once clients and workers are gone;
//   - open_fds: descriptors of the Go process (Linux /proc; -1 elsewhere);
//   - pool_open: of those, connections the scheduler opened to workers and
//     nannies and keeps for reuse (comm.Pool; dropped when a worker leaves);
//   - footprint: the engine's per-kind state counts (scheduler.Footprint);
//   - heap_*: the Go runtime's view, to tell live objects from memory
//     freed but not yet returned to the OS;
//   - helper_pid, helper_pids, helpers_recycled: the materializer children
//     (the first helper, every running one, those replaced for memory).
func (s *Server) processStats(fp scheduler.Footprint) *protocol.Map {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return protocol.NewMap(
		"goroutines", int64(runtime.NumGoroutine()),
		"open_fds", int64(openFDs()),
		"pool_open", int64(s.pool.Open()),
		"footprint", fp.Map(),
		"heap_alloc", int64(ms.HeapAlloc),
		"heap_idle", int64(ms.HeapIdle),
		"heap_released", int64(ms.HeapReleased),
		"heap_sys", int64(ms.HeapSys),
		"helper_pid", int64(s.mat.PID()),
		"helper_pids", pidList(s.mat.PIDs()),
		"helpers_recycled", s.mat.Recycled(),
	)
}

func pidList(pids []int) []any {
	out := make([]any, len(pids))
	for i, p := range pids {
		out[i] = int64(p)
	}
	return out
}

func openFDs() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries) - 1 // the directory being read
}
