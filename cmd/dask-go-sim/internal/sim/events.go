package sim

import (
	"container/heap"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// The simulation is a single event queue ordered by (time, sequence): two
// events at the same instant run in the order they were scheduled, so a
// run is a pure function of its inputs and seed.

type eventKind uint8

const (
	// evToScheduler: a stimulus reaches the engine (after the link latency).
	evToScheduler eventKind = iota
	// evToWorker: a batch of engine messages reaches a worker.
	evToWorker
	// evTaskDone: a worker thread finishes executing a task.
	evTaskDone
	// evTransferDone: a dependency has arrived at a worker.
	evTransferDone
	// evStealTick: the engine's work-stealing period (Config.Stealing).
	evStealTick
	// evAMMTick: the active memory manager's period (unless Config.NoAMM).
	evAMMTick
	// evMemoryMonitor: worker w's memory monitor (unless Config.NoSpill).
	evMemoryMonitor
	// evSample: a sample of the cluster's memory (Config.SampleInterval).
	evSample
	// evCPU: the earliest finish on the shared cores (Config.Cores); run
	// holds the cpu generation it was computed for, stale ones are skipped.
	evCPU
)

type event struct {
	at   float64 // seconds since the start of the simulation
	seq  uint64
	kind eventKind
	w    int32 // worker index (destination)
	task int32
	run  int64 // run_id of evTaskDone
	st   scheduler.Stimulus
	msgs []*protocol.Map
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

// clock owns the queue and the current time.
type clock struct {
	now float64
	seq uint64
	q   eventQueue
}

func (c *clock) schedule(e *event) {
	c.seq++
	e.seq = c.seq
	heap.Push(&c.q, e)
}

func (c *clock) next() *event {
	if len(c.q) == 0 {
		return nil
	}
	e := heap.Pop(&c.q).(*event)
	c.now = e.at
	return e
}
