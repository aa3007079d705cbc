package scheduler

import "fmt"

// workerSet is oset for the State's sets of workers that change on nearly
// every event: running, idle, idle_task_count and saturated
// (check_idle_saturated updates three of them per task finished). Each
// worker keeps its position in the one set of each role, so membership,
// insertion and swap-removal need no hashing: with 1,000 workers the
// osets' index maps cost about a quarter of a microsecond per task of the
// 1M-task simulation (scripts/sim/results/engine-throughput.md). Iteration
// order is oset's: insertion order with swap-remove.
//
// Invariant: ws.setPos[role] is 1 + ws's index in items, or 0 when absent.
type workerSet struct {
	items []*WorkerState
	role  workerRole
}

// workerRole names a State's worker set, indexing WorkerState.setPos.
type workerRole uint8

const (
	roleRunning workerRole = iota
	roleIdle
	roleIdleTaskCount
	roleSaturated
	numWorkerRoles
)

func (s *workerSet) Len() int { return len(s.items) }

// Items is the backing slice: read-only, and invalid after a mutation.
func (s *workerSet) Items() []*WorkerState { return s.items }

func (s *workerSet) Has(ws *WorkerState) bool { return ws.setPos[s.role] != 0 }

// Add inserts ws and reports whether it was new.
func (s *workerSet) Add(ws *WorkerState) bool {
	if ws.setPos[s.role] != 0 {
		return false
	}
	s.items = append(s.items, ws)
	ws.setPos[s.role] = int32(len(s.items))
	return true
}

// Remove deletes ws (moving the last worker into its place) and reports
// whether it was present.
func (s *workerSet) Remove(ws *WorkerState) bool {
	p := ws.setPos[s.role]
	if p == 0 {
		return false
	}
	i, last := int(p-1), len(s.items)-1
	if i != last {
		moved := s.items[last]
		s.items[i] = moved
		moved.setPos[s.role] = p
	}
	s.items[last] = nil
	s.items = s.items[:last]
	ws.setPos[s.role] = 0
	return true
}

// validate checks the positions (validate.go).
func (s *workerSet) validate(name string) {
	for i, ws := range s.items {
		if int(ws.setPos[s.role]) != i+1 {
			panic(fmt.Sprintf("scheduler invariant broken: worker %s at %d of %s records position %d", ws.Address, i, name, ws.setPos[s.role]-1))
		}
	}
}
