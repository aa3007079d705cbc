package sim

import "container/list"

// Spilling to disk, as a stock worker with distributed's default memory
// thresholds does (distributed.worker.memory.target 0.60, spill 0.70 in
// distributed.yaml). Without it the simulator holds every key in memory,
// while a real worker evicts its least recently used keys once it passes
// the thresholds: the workloads that spill in the benchmark (anom-mean and
// climactic-mean without withholding, a few hundred MB per run) peak
// lower on real workers than a model without spilling says.
//
// Two rules, both evicting least recently used keys first:
//   - the worker's SpillBuffer (distributed/spill.py, a zict LRU with
//     target = 0.60 × memory limit on managed bytes) evicts as soon as the
//     data held in memory exceeds its target;
//   - the memory monitor (WorkerMemoryManager.memory_monitor, a periodic
//     callback every distributed.worker.memory.monitor-interval, 100 ms)
//     evicts once process memory exceeds 0.70 × the limit, until it is
//     back at 0.60 × the limit (hysteresis). Process memory is the idle
//     worker's (MemoryModel.WorkerIdle) plus what the simulator counts.
//     Between two checks a worker's memory grows past the threshold
//     unchecked, as a real worker's does: the cluster's peak counts that
//     overshoot (Config.MonitorInterval).
//
// A spilled key is still held (the scheduler knows nothing of spilling)
// and comes back into memory when read: as a task's input or as the
// source of a transfer (SpillBuffer.__getitem__ unspills). Spilling and
// unspilling take no time: their disk I/O is not modelled, so a run that
// spills much is simulated somewhat fast.
const (
	spillTargetFraction = 0.60
	spillFraction       = 0.70
)

// spillBuffer is the worker's key store: every key it holds, and the
// least-recently-used order of those in memory.
type spillBuffer struct {
	data    map[int32]int64 // held keys (in memory or spilled) -> nbytes
	spilled map[int32]bool
	lru     *list.List // in-memory keys, most recently used at the front
	at      map[int32]*list.Element
	fast    int64 // bytes of the in-memory keys
}

func newSpillBuffer() spillBuffer {
	return spillBuffer{data: map[int32]int64{}, spilled: map[int32]bool{}, lru: list.New(), at: map[int32]*list.Element{}}
}

func (b *spillBuffer) held(t int32) bool { _, ok := b.data[t]; return ok }

// store adds t in memory (a no-op if held) and returns the memory change.
func (b *spillBuffer) store(t int32, nb int64) int64 {
	if b.held(t) {
		return 0
	}
	b.data[t] = nb
	b.at[t] = b.lru.PushFront(t)
	b.fast += nb
	return nb
}

// touch marks t used now; a spilled t is read back into memory. It
// returns the memory change.
func (b *spillBuffer) touch(t int32) int64 {
	nb, ok := b.data[t]
	switch {
	case !ok:
		return 0
	case b.spilled[t]:
		delete(b.spilled, t)
		b.at[t] = b.lru.PushFront(t)
		b.fast += nb
		return nb
	default:
		b.lru.MoveToFront(b.at[t])
		return 0
	}
}

// drop forgets t and returns the memory change.
func (b *spillBuffer) drop(t int32) int64 {
	nb, ok := b.data[t]
	if !ok {
		return 0
	}
	delete(b.data, t)
	if b.spilled[t] {
		delete(b.spilled, t)
		return 0
	}
	b.lru.Remove(b.at[t])
	delete(b.at, t)
	b.fast -= nb
	return -nb
}

// evict spills the least recently used in-memory key and returns the
// memory change; false when nothing is left in memory.
func (b *spillBuffer) evict() (int64, bool) {
	e := b.lru.Back()
	if e == nil {
		return 0, false
	}
	t := b.lru.Remove(e).(int32)
	delete(b.at, t)
	b.spilled[t] = true
	nb := b.data[t]
	b.fast -= nb
	return -nb, true
}

// spill applies the SpillBuffer's rule to w after its memory grew and
// returns the memory change (≤ 0) for the cluster total.
func (s *Sim) spill(w *worker) int64 {
	if s.cfg.NoSpill {
		return 0
	}
	target := int64(spillTargetFraction * float64(w.limit))
	return s.evictWhile(w, func() bool { return w.keys.fast > target })
}

// monitorMemory is one check of w's memory monitor: past 70 % of the
// limit in process memory, evict down to 60 %.
func (s *Sim) monitorMemory(w *worker) {
	limit := float64(w.limit)
	process := func() int64 { return s.cfg.Mem.WorkerIdle + w.mem }
	if float64(process()) > spillFraction*limit {
		target := int64(spillTargetFraction * limit)
		s.clusterMem += s.evictWhile(w, func() bool { return process() > target })
	}
}

// evictWhile spills w's least recently used keys while more is true and
// anything is left in memory, counts them as spilled and returns the
// memory change.
func (s *Sim) evictWhile(w *worker, more func() bool) int64 {
	var d int64
	for more() {
		e, ok := w.keys.evict()
		if !ok {
			break
		}
		d += w.addMem(e)
	}
	s.spilledBytes -= d
	return d
}
