package server

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"daskgo/scheduler"
)

// bigGraphTasks is the graph size after which the Go heap's free memory is
// handed back to the OS. Applying a graph leaves behind what the helper's
// chunks, their decoding and the conversion to task states used on the way
// (on a 1M-task tree: 1,205 MiB resident for 820 MiB of live heap). The Go
// runtime returns such pages only slowly, and a scheduler that stays
// resident at its largest transient size holds that memory for its whole
// life. A forced collection costs about one mark of the live heap, so it
// is kept for graphs big enough for the transient to matter.
const bigGraphTasks = 50_000

// collectBeforeBigGraph runs a collection before a big graph goes to the
// engine (forwardResults, off the engine's lock). By then what the graph
// cost on its way is garbage: the helper's decoded chunks and dask.order's
// working sets, some 60 MB on a 200k-task tree. Applying the graph then
// allocates about as much again, nearly all of it kept (task states,
// their sets, the queue). Left to the pacer, the heap grew on top of the
// garbage or not depending on when the last cycle had run: the Go process
// peaked at 214-256 MiB from one run to the next. Collected first, the
// apply reuses the garbage's pages: 195-196 MiB. It costs one mark of the
// live heap, about 70 MB here, and no CPU per task that the benchmark
// can see (scripts/bench/results/memory-per-task).
func collectBeforeBigGraph(st scheduler.Stimulus) {
	if gm, ok := st.(*scheduler.GraphMaterialized); ok && len(gm.Tasks) >= bigGraphTasks {
		runtime.GC()
	}
}

// memoryReturner runs debug.FreeOSMemory (a full collection, then every
// free page back to the OS) off the engine's lock, at most one at a
// time: kicks that arrive while one runs fold into the next. It is kicked
// after a big graph is applied and after the scheduler has forgotten as
// many tasks (a cancelled or released graph): in both cases the heap has
// pages the runtime would otherwise keep for a long time.
//
// It also returns memory once the scheduler has been idle for idleReturn
// after doing something: between two collections the heap holds garbage up
// to its goal (twice the live heap), which the runtime scavenger keeps; a
// service that sits quiet overnight should sit at its live size.
type memoryReturner struct {
	kick chan struct{} // capacity 1
	// high is the most tasks the engine held since the last kick for
	// forgotten tasks; only a holder of the engine's lock (noteStimulus) touches it (doc.go).
	high int
	// busy: a stimulus other than the clock and heartbeats came since the
	// last return; lastBusy is when (UnixNano).
	busy     atomic.Bool
	lastBusy atomic.Int64
	clock    Clock
}

// idleReturn is how long the scheduler must be idle before its free heap
// memory is handed back.
const idleReturn = 30 * time.Second

func newMemoryReturner(clock Clock) *memoryReturner {
	return &memoryReturner{kick: make(chan struct{}, 1), clock: clock}
}

// noteStimulus runs under the engine's lock after each stimulus, with the
// number of tasks the engine holds after it: it kicks the returner once a
// big graph has been applied, or once bigGraphTasks tasks have been
// forgotten since the high-water mark.
func (m *memoryReturner) noteStimulus(st scheduler.Stimulus, tasks int) {
	switch st.(type) {
	case *scheduler.Tick, *scheduler.StealTick, *scheduler.AMMTick, *scheduler.WorkerHeartbeat, *scheduler.HeartbeatClient:
	default:
		m.busy.Store(true)
		m.lastBusy.Store(m.clock.Now().UnixNano())
	}
	if gm, ok := st.(*scheduler.GraphMaterialized); ok && len(gm.Tasks) >= bigGraphTasks {
		m.signal()
	}
	m.high = max(m.high, tasks)
	if m.high-tasks >= bigGraphTasks {
		m.high = tasks
		m.signal()
	}
}

func (m *memoryReturner) signal() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// run is owned by the server (goRun) and exits with it.
func (m *memoryReturner) run(s *Server) {
	idle := m.clock.NewTicker(idleReturn / 3)
	defer idle.Stop()
	for {
		why := "after a big graph"
		select {
		case <-s.ctx.Done():
			return
		case <-m.kick:
		case now := <-idle.C():
			if !m.idleDue(now) {
				continue
			}
			why = "once idle"
		}
		m.busy.Store(false)
		t0 := m.clock.Now()
		debug.FreeOSMemory()
		s.log.Debug().Dur("took", m.clock.Now().Sub(t0)).Str("when", why).Msg("returned free heap memory to the OS")
	}
}

// idleDue reports whether an idle return is due at now (tests).
func (m *memoryReturner) idleDue(now time.Time) bool {
	return m.busy.Load() && now.Sub(time.Unix(0, m.lastBusy.Load())) >= idleReturn
}
