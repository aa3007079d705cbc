package scheduler

import "fmt"

// validateWithholding checks the invariants of WITHHOLDING.md that the
// queue heap checks in validateQueue do not cover: the slot heap mirrors
// idle_task_count; with co-assignment, its runs (coassign_validate.go).
func (s *State) validateWithholding() {
	s.validateSlotHeap()
	s.validateCoAssignment()
}

func validateHeapOrder[T comparable](h *ixheap[T], what string) {
	for i := 1; i < len(h.items); i++ {
		if h.less(h.items[i], h.items[(i-1)/2]) {
			panic(fmt.Sprintf("scheduler invariant broken: %s heap order at %d", what, i))
		}
	}
}

func (s *State) validateSlotHeap() {
	for i, e := range s.slots.items {
		if e.ws.slotPos != i+1 || !s.idleTaskCount.Has(e.ws) || e.load != workerLoad(e.ws) {
			panic(fmt.Sprintf("scheduler invariant broken: slot heap entry %d (%s) stale", i, e.ws.Address))
		}
	}
	if s.slots.Len() != s.idleTaskCount.Len() {
		panic(fmt.Sprintf("scheduler invariant broken: slot heap has %d workers, idle_task_count %d", s.slots.Len(), s.idleTaskCount.Len()))
	}
	validateHeapOrder(&s.slots, "slot")
}
