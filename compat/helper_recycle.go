package compat

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// A helper frees each graph after answering it and asks glibc to hand the
// memory back (materializer.py: release_memory), so its RSS normally falls
// back near its start-up size. Where the allocator keeps it anyway
// (fragmented arenas), the helper is retired once idle: it takes no new
// request, its stdin is closed when its last answer is in, and the
// supervisor starts a fresh one (imports: about a second of CPU), which the
// queued requests wait for.

//
// Two thresholds: RecycleAbove retires the helper right after the graph
// that left it that far above its start; IdleRecycleAbove, smaller, retires
// it once it has been idle for IdleRecycleAfter with no graph since. The
// second is for the slow creep of a long-lived helper (about 3 MiB per
// 100k-task graph in the soak, scripts/bench/soak.py): a service that
// handled graphs all day falls back to a fresh helper's size once quiet,
// and pays the restart only when it is quiet.

// noteHelperRSS applies the recycle policy after a graph answer; rss is the
// helper's RSS once it has freed the graph.
func (m *Materializer) noteHelperRSS(inc *incarnation, rss int64) {
	if m.cfg.RecycleAbove < 0 || rss <= 0 || inc.startRSS <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answers++
	if inc.retiring || m.closed {
		return
	}
	if over := rss - inc.startRSS; over <= m.cfg.RecycleAbove {
		if over > m.cfg.IdleRecycleAbove {
			m.armIdleRecycleLocked(inc, rss)
		}
		return
	}
	m.retireLocked(inc, rss, "materializer helper keeps its memory after a graph; replacing it once idle")
}

// retireLocked marks inc retiring (it takes no new request), counts and
// logs it, and closes it now if no answer is owed. Caller holds m.mu.
func (m *Materializer) retireLocked(inc *incarnation, rss int64, why string) {
	inc.retiring = true
	m.recycled++
	m.log.Info().Int("helper_pid", inc.pid).Int64("rss", rss).Int64("start_rss", inc.startRSS).Msg(why)
	m.closeIfRetiredLocked(inc)
}

// armIdleRecycleLocked schedules retireIfIdle after IdleRecycleAfter; a
// later answer re-arms it. The timer is stopped by Close. Caller holds m.mu.
func (m *Materializer) armIdleRecycleLocked(inc *incarnation, rss int64) {
	if m.idleTimer != nil {
		m.idleTimer.Stop()
	}
	gen := m.answers
	m.idleTimer = time.AfterFunc(m.cfg.IdleRecycleAfter, func() { m.retireIfIdle(inc, gen, rss) })
}

// retireIfIdle retires inc if it is still the running helper and nothing
// happened since answer gen: no answer, no request in flight or queued.
func (m *Materializer) retireIfIdle(inc *incarnation, gen, rss int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.cur != inc || inc.retiring || m.answers != gen || len(inc.pending) > 0 || len(m.queue) > 0 {
		return
	}
	m.retireLocked(inc, rss, "materializer helper idle well above its start-up size; replacing it")
}

// closeIfRetiredLocked ends a retiring helper whose answers are all in.
// Caller holds m.mu.
func (m *Materializer) closeIfRetiredLocked(inc *incarnation) {
	if !inc.retiring || len(inc.pending) > 0 {
		return
	}
	inc.retired.Store(true)
	_ = inc.stdin.Close()
	select { // the writer may be waiting for work: it returns on seeing retiring
	case m.wake <- struct{}{}:
	default:
	}
}

func (inc *incarnation) isRetired() bool {
	return inc.retired.Load()
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

// ProcessRSS is a process's resident set size in bytes from /proc (0
// where there is none): the helpers' memory, for /metrics.
func ProcessRSS(pid int) int64 { return processRSS(pid) }
