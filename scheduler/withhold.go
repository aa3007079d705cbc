package scheduler

// Root-task withholding (distributed.scheduler.worker-saturation finite):
// root-ish tasks wait on the scheduler, queued in priority order
// (withhold_queue.go), and go out only as workers have free slots, at most
// max(ceil(saturation * nthreads), 1) tasks processing per worker. The
// placement stages are in place.go (placeFreeSlot); this file fills slots
// as they open. With co-assignment (coassign*.go) the queue is dealt by
// families instead. WITHHOLDING.md has the invariants and costs.

// queueSlotsMaybeOpened mirrors stimulus_queue_slots_maybe_opened: while
// a running worker has a free slot and tasks are queued, move the most
// urgent queued task to the least busy such worker (or, with co-assignment,
// the next task of that worker's runs). distributed first sums the free
// slots over idle_task_count; filling until none is left is the same
// result without the O(workers) sum, and each turn costs O(log n).
func (s *State) queueSlotsMaybeOpened() {
	if s.queuedLen() == 0 || s.queuingOff() {
		return
	}
	if s.coOn() {
		s.coFill()
		return
	}
	for s.queued.Len() > 0 {
		if s.slotTop() == nil {
			return
		}
		qts := s.queued.peek()
		s.transitionTo(qts, StatusProcessing)
		if qts.state == StatusQueued {
			return // no worker took it; stop rather than spin
		}
	}
}
