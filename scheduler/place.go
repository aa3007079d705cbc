package scheduler

import (
	"fmt"
	"math"
)

// Placement: where a ready task runs, or why it waits. placeReady is the one
// entry point of distributed's _transition_waiting_processing (and of
// no-worker -> processing); placeQueued is that of queued -> processing.
// Both are compositions of small stages, each of which returns the worker
// it chose together with the reason it chose it:
//
//	root-ish?  ─ no ─▶ restrictions ─▶ dependency locality ─▶ least occupied idle
//	   │yes
//	   ├─ withholding off ─▶ the group's last worker ─▶ best objective
//	   ├─ co-assignment on ─▶ queued (coFill deals it to its family's worker)
//	   └─ withholding on ─▶ least busy worker with a free slot ─▶ else queued
//
// The reason is recorded with the transition (Transition.Reason), so that
// Client.story(key), the dashboard and a panic's story say why a task ran
// where it ran. Reasons are small values rendered only when read: placement
// is on the hottest path.

// Placement is a placement decision: the worker, or (Worker nil) the state
// the task waits in, StatusQueued or StatusNoWorker. ViaQueue marks a task
// placed by the queuing policy (decide_worker_rootish_queuing_enabled, or
// co-assignment's runs): work stealing leaves such tasks alone, as
// distributed's stealing skips tasks queued-then-placed.
type Placement struct {
	Worker   *WorkerState
	Wait     Status
	Reason   Reason
	ViaQueue bool
}

// Rule names the stage that decided a placement.
type Rule uint8

// The placement rules. N1, N2 and Other in a Reason mean what each says.
const (
	RuleNone Rule = iota
	// RuleNoWorker: no running worker, or none the restrictions allow
	// (N1: the valid running workers).
	RuleNoWorker
	// RuleLocality: among the workers holding dependencies (or every
	// allowed one), the earliest expected start (N1: dependency bytes
	// already on the worker, N2: its expected start in seconds).
	RuleLocality
	// RuleRestricted: RuleLocality within worker, host or resource
	// restrictions (N1: valid workers).
	RuleRestricted
	// RuleIdle: no dependencies, no restrictions: the least occupied idle
	// worker, round-robin among unoccupied ones (N1: candidates, N2: 1 if
	// they are the idle workers, 0 if none was idle and every worker is).
	RuleIdle
	// RuleGroupWorker: root-ish with withholding off, kept on the group's
	// last worker so its siblings share it (N1: tasks left for it).
	RuleGroupWorker
	// RuleRootishObjective: root-ish with withholding off, the best
	// worker_objective among the idle workers (N1: candidates).
	RuleRootishObjective
	// RuleFreeSlot: withholding, the least busy worker with a free slot
	// (N1: tasks processing there, N2: its slots).
	RuleFreeSlot
	// RuleQueued: withholding, no running worker has a free slot (N1:
	// tasks queued before this one).
	RuleQueued
	// RuleCoQueued: co-assignment: queued until its family's worker has a
	// free slot.
	RuleCoQueued
	// RuleCoFamily: co-assignment, the next task of the worker's family
	// run (N1: family, -1 for contiguous ranges; N2: tasks processing).
	RuleCoFamily
	// RuleCoTakenOver: co-assignment, a run the worker took over from
	// Other when its own ran dry.
	RuleCoTakenOver
	// RuleStolen: work stealing moved it from Other (N1: the victim's
	// occupancy, N2: the thief's, seconds).
	RuleStolen
	// RuleCoPaced: co-assignment, the worker's next root was N1 ranks
	// ahead of the most urgent root still queued, beyond the families'
	// window of N2 ranks: it took an unstarted family from there on.
	RuleCoPaced
	// RuleCoPacedMemory: co-assignment, the worker held N1 bytes of the
	// co-assigned roots' outputs more than its share, above the memory
	// bound of N2, and its next root was ahead of the front: it took the
	// front root itself.
	RuleCoPacedMemory
)

// Reason is why a placement was made; String renders it.
type Reason struct {
	Rule   Rule
	N1, N2 float64
	Other  string // another worker the reason names (a victim, a run's owner)
}

var ruleNames = [...]string{
	RuleNone: "", RuleNoWorker: "no-worker", RuleLocality: "locality", RuleRestricted: "restricted",
	RuleIdle: "idle", RuleGroupWorker: "group-worker", RuleRootishObjective: "rootish-objective",
	RuleFreeSlot: "free-slot", RuleQueued: "queued", RuleCoQueued: "co-queued", RuleCoFamily: "co-family",
	RuleCoTakenOver: "co-taken-over", RuleStolen: "stolen", RuleCoPaced: "co-paced", RuleCoPacedMemory: "co-paced-memory",
}

// Name is the rule's short name, as transcripts print it.
func (r Rule) Name() string {
	if int(r) < len(ruleNames) {
		return ruleNames[r]
	}
	return fmt.Sprintf("rule-%d", r)
}

// String says why, in words.
func (r Reason) String() string {
	switch r.Rule {
	case RuleNone:
		return ""
	case RuleNoWorker:
		return fmt.Sprintf("no-worker: %d running workers allowed", int(r.N1))
	case RuleLocality:
		return fmt.Sprintf("dependency locality: %s of dependencies already there, expected start in %.3gs", bytesText(r.N1), r.N2)
	case RuleRestricted:
		if r.N1 == 0 {
			return "restrictions: no allowed worker is running; allow_other_workers, so dependency locality anywhere"
		}
		return fmt.Sprintf("restrictions: %d valid workers, then dependency locality", int(r.N1))
	case RuleIdle:
		if r.N2 == 0 {
			return fmt.Sprintf("no dependencies: least occupied of %d workers, none idle", int(r.N1))
		}
		return fmt.Sprintf("no dependencies: least occupied of %d idle workers", int(r.N1))
	case RuleGroupWorker:
		return fmt.Sprintf("root-ish, withholding off: its group's worker (%d more tasks for it)", int(r.N1))
	case RuleRootishObjective:
		return fmt.Sprintf("root-ish, withholding off: best worker_objective of %d candidates", int(r.N1))
	case RuleFreeSlot:
		return fmt.Sprintf("withholding: least busy worker with a free slot (%d processing, %d slots)", int(r.N1), int(r.N2))
	case RuleQueued:
		return fmt.Sprintf("queued: no running worker has a free slot (%d queued before it)", int(r.N1))
	case RuleCoQueued:
		return "queued: co-assignment deals it to its family's worker"
	case RuleCoFamily:
		if r.N1 < 0 {
			return fmt.Sprintf("co-assignment: next of the worker's priority range (%d processing)", int(r.N2))
		}
		return fmt.Sprintf("co-assignment: family %d's worker (%d processing)", int(r.N1), int(r.N2))
	case RuleCoTakenOver:
		return fmt.Sprintf("co-assignment: a run taken over from %s", r.Other)
	case RuleCoPaced:
		return fmt.Sprintf("co-assignment, paced: its next root was %d ranks ahead of the front, beyond the families' window of %d; it took an unstarted family from the front on",
			int(r.N1), int(r.N2))
	case RuleCoPacedMemory:
		return fmt.Sprintf("co-assignment, paced by memory: its worker held %s of roots' outputs more than its share, above %s; it took the front root",
			bytesText(r.N1), bytesText(r.N2))
	case RuleStolen:
		return fmt.Sprintf("stolen from %s: occupancy %.3gs there vs %.3gs here", r.Other, r.N1, r.N2)
	}
	return r.Rule.Name()
}

func bytesText(n float64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%d B", int64(n))
}

// placeReady decides where a task whose dependencies are in memory runs
// (distributed's _transition_waiting_processing, decide_worker_*).
func (s *State) placeReady(ts *TaskState) Placement {
	if !s.isRootish(ts) {
		return s.placeNonRootish(ts)
	}
	switch {
	case s.queuingOff() || ts.notQueueable:
		if s.cfg.SpreadRootsWithoutQueue && !ts.notQueueable {
			return s.placeNonRootish(ts)
		}
		return s.placeRootishUnqueued(ts)
	case s.coOn():
		// with co-assignment every root-ish task goes through the queue;
		// coFill hands it out from its worker's run
		return Placement{Wait: StatusQueued, Reason: Reason{Rule: RuleCoQueued}}
	}
	return s.placeFreeSlot()
}

// placeQueued decides where a queued task goes when a slot may have opened
// (queued -> processing without co-assignment's own choice).
func (s *State) placeQueued() Placement { return s.placeFreeSlot() }

// placeFreeSlot is decide_worker_rootish_queuing_enabled: the least busy
// worker (len(processing)/nthreads, ties by address) with a free slot, or
// queued. The slot heap makes it O(log workers).
func (s *State) placeFreeSlot() Placement {
	ws := s.slotTop()
	if ws == nil {
		return Placement{Wait: StatusQueued, Reason: Reason{Rule: RuleQueued, N1: float64(s.queuedLen())}}
	}
	return Placement{Worker: ws, Reason: Reason{Rule: RuleFreeSlot, N1: float64(ws.processing.Len()), N2: float64(s.slotLimit(ws))},
		ViaQueue: true}
}

// noWorker is a placement that waits in no-worker.
func noWorker(valid int) Placement {
	return Placement{Wait: StatusNoWorker, Reason: Reason{Rule: RuleNoWorker, N1: float64(valid)}}
}

// slotLimit is a worker's withholding slots: max(ceil(saturation *
// nthreads), 1) (_task_slots_available's limit).
func (s *State) slotLimit(ws *WorkerState) int {
	return max(int(math.Ceil(s.cfg.WorkerSaturation*float64(ws.NThreads))), 1)
}
