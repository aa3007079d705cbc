package compat

import (
	"os"
	"strconv"
	"strings"
)

// A helper frees each graph after answering it and asks glibc to hand the
// memory back (materializer.py: release_memory), so its RSS normally falls
// back near its start-up size. Where the allocator keeps it anyway
// (fragmented arenas), the helper is retired once idle: it takes no new
// request, its stdin is closed when its last answer is in, and the
// supervisor starts a fresh one (imports: about a second of CPU), which the
// queued requests wait for.

// noteHelperRSS applies the recycle policy after a graph answer; rss is the
// helper's RSS once it has freed the graph.
func (m *Materializer) noteHelperRSS(inc *incarnation, rss int64) {
	if m.cfg.RecycleAbove < 0 || rss <= 0 || inc.startRSS <= 0 || rss-inc.startRSS <= m.cfg.RecycleAbove {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if inc.retiring || m.closed {
		return
	}
	inc.retiring = true
	m.recycled++
	m.log.Info().Int("helper_pid", inc.pid).Int64("rss", rss).Int64("start_rss", inc.startRSS).
		Msg("materializer helper keeps its memory after a graph; replacing it once idle")
	m.closeIfRetiredLocked(inc)
}

// closeIfRetiredLocked ends a retiring helper whose answers are all in.
// Caller holds m.mu.
func (m *Materializer) closeIfRetiredLocked(inc *incarnation) {
	if !inc.retiring || len(inc.pending) > 0 {
		return
	}
	inc.mu.Lock()
	inc.retired = true
	inc.mu.Unlock()
	_ = inc.stdin.Close()
	select { // the writer may be waiting for work: it returns on seeing retiring
	case m.wake <- struct{}{}:
	default:
	}
}

func (inc *incarnation) isRetired() bool {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	return inc.retired
}

// Recycled is how many helpers were replaced for their memory.
func (m *Materializer) Recycled() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recycled
}

// processRSS reads a process's resident set size from /proc (0 where there
// is no /proc).
func processRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
