package scheduler

import "daskgo/protocol"

// Footprint counts what the engine holds, per kind of state. A long-lived
// scheduler must hold nothing of a task once it is forgotten: every
// per-task count here falls back to zero when no client wants anything and
// no worker holds anything (TestForgottenGraphLeavesNoState checks it after
// computed, cancelled and failed graphs; tests/stress reads it through
// identity after each case).
//
// Two kinds of state outlive tasks by design, both bounded:
//   - task prefixes: distributed's SchedulerState.task_prefixes keeps
//     them for the duration estimates they carry; one per key name
//     (key_split), so their number follows the code, not the graphs.
//   - the transition log and the task stream: rings of fixed capacity
//     (transition-log-length, the task stream's length), holding keys and
//     stimulus ids, never task states.
type Footprint struct {
	Tasks, Groups, Prefixes         int
	Queued, Unrunnable              int
	Processing, HasWhat, WantsWhat  int // summed over workers and clients
	NeedsWhat, Executing, Actors    int // summed over workers
	CoRuns, CoOwned                 int // co-assignment runs and their tasks
	Stealable, StealsInFlight       int // work stealing's per-worker levels and requests
	Workers, Clients                int
	PendingGraphs, HeldStimuli      int
	ParkedRPCs                      int
	TransitionLog, TaskStreamRecord int // bounded rings
	ShuffleRuns                     int // active and archived P2P runs
	ProgressWatches                 int // open progress bars' feeds (progress.go)
}

// PerTask is the sum of the counts that must be zero once every task is
// forgotten.
func (f Footprint) PerTask() int {
	return f.Tasks + f.Groups + f.Queued + f.Unrunnable + f.Processing + f.HasWhat + f.WantsWhat +
		f.NeedsWhat + f.Executing + f.Actors + f.CoRuns + f.CoOwned + f.Stealable + f.StealsInFlight +
		f.PendingGraphs + f.HeldStimuli
}

// Footprint takes the counts; it walks workers and clients, not tasks.
func (s *State) Footprint() Footprint {
	f := Footprint{
		Tasks: s.tasks.Len(), Groups: len(s.groups), Prefixes: len(s.prefixes),
		Queued: s.queued.Len(), Unrunnable: s.unrunnable.Len(),
		CoRuns: s.co.bySize.Len(), CoOwned: s.co.owned, StealsInFlight: len(s.steal.inFlight),
		Workers: len(s.workers), Clients: len(s.clients),
		PendingGraphs: len(s.pending), ParkedRPCs: s.coord.NParked(),
		TransitionLog: s.log.n, TaskStreamRecord: len(s.stream.buf),
		ShuffleRuns:     len(s.shuffles.active) + len(s.shuffles.last),
		ProgressWatches: len(s.progress.watches),
	}
	for _, held := range s.held {
		f.HeldStimuli += len(held)
	}
	for _, ws := range s.workers {
		f.Processing += ws.processing.Len()
		f.HasWhat += ws.hasWhat.Len()
		f.NeedsWhat += ws.needsWhat.Len()
		f.Executing += len(ws.executing)
		f.Actors += ws.actors.Len()
		if ws.steal != nil {
			for i := range ws.steal.levels {
				f.Stealable += ws.steal.levels[i].Len()
			}
		}
	}
	for _, cs := range s.clients {
		f.WantsWhat += cs.wantsWhat.Len()
	}
	return f
}

// Map is the footprint as identity reports it (keys in snake case).
func (f Footprint) Map() *protocol.Map {
	return protocol.NewMap(
		"tasks", int64(f.Tasks), "task_groups", int64(f.Groups), "task_prefixes", int64(f.Prefixes),
		"queued", int64(f.Queued), "unrunnable", int64(f.Unrunnable),
		"processing", int64(f.Processing), "has_what", int64(f.HasWhat), "wants_what", int64(f.WantsWhat),
		"needs_what", int64(f.NeedsWhat), "executing", int64(f.Executing), "actors", int64(f.Actors),
		"co_runs", int64(f.CoRuns), "co_owned", int64(f.CoOwned),
		"stealable", int64(f.Stealable), "steals_in_flight", int64(f.StealsInFlight),
		"workers", int64(f.Workers), "clients", int64(f.Clients),
		"pending_graphs", int64(f.PendingGraphs), "held_stimuli", int64(f.HeldStimuli),
		"parked_rpcs", int64(f.ParkedRPCs), "transition_log", int64(f.TransitionLog),
		"task_stream_records", int64(f.TaskStreamRecord), "shuffle_runs", int64(f.ShuffleRuns),
		"progress_watches", int64(f.ProgressWatches), "per_task", int64(f.PerTask()),
	)
}
