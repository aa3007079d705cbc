package scheduler

import (
	"daskgo/scheduler/coord"
	"sort"
	"time"
)

// Snapshot is what the outside may read of the engine (the dashboard,
// /metrics, /json/*): aggregates per worker, per task prefix and per state,
// never a record per task. The outer ring takes one on its tick and
// publishes it behind an atomic pointer; readers never touch the engine.
// (distributed's dashboard reads live state on the event loop; its issue
// #4055 shows what that costs at 100k tasks.) A Snapshot is immutable once
// returned: nothing in it aliases engine state.
type Snapshot struct {
	At          time.Time
	SchedulerID string
	Address     string
	Started     time.Time

	Workers []WorkerView // by address
	// Clients excludes the fire-and-forget pseudo-client, as distributed's
	// dask_scheduler_clients does.
	Clients int
	// Tasks counts the tasks held by state; Forgotten counts those ever
	// forgotten.
	Tasks      [numStatus]int
	Forgotten  int64
	TaskGroups int
	Prefixes   []PrefixView // by name
	Unrunnable int
	// Queued is withholding's queue (roots waiting on the scheduler); with
	// co-assignment, CoOwned of them are dealt to workers' family runs and
	// CoRuns is the number of those runs.
	Queued  int
	CoOwned int
	CoRuns  int
	// Saturation and CoAssignment are the withholding settings in force.
	Saturation   float64
	CoAssignment bool

	Stealing   StealStats
	Semaphores []SemaphoreView
	// DesiredWorkers is adaptive_target() at the default target duration;
	// IdleSince is check_idle() (zero while busy).
	DesiredWorkers int
	IdleSince      time.Time
	// TasksDone, Transitions: tasks finished and transitions made since
	// the start (the dashboard's rates).
	TasksDone   int64
	Transitions uint64
	// Stream is the last runs of tasks (at most Config.DashboardStreamLength),
	// oldest first, for the dashboard's task stream; StreamIndex counts every
	// run ever recorded, so a reader can ask only for what is new.
	Stream      []StreamRun
	StreamIndex int64
}

// WorkerView is one worker in a Snapshot.
type WorkerView struct {
	Address, Name, Host, Status string
	NThreads                    int
	MemoryLimit                 int64
	// Managed is the bytes of the keys it holds (distributed's
	// ws.nbytes); Processing and InMemory count tasks.
	Managed    int64
	Processing int
	InMemory   int
	Occupancy  float64 // seconds of work assigned, estimated
	Idle       bool
	Saturated  bool
	LastSeen   time.Time
}

// PrefixView is one task prefix in a Snapshot (key_split of its keys).
type PrefixView struct {
	Name   string
	States [numStatus]int
	// StateTotals accumulates every transition into each state
	// (TaskPrefix.state_counts).
	StateTotals     [numStatus]int64
	ComputeSeconds  float64 // the compute time its tasks reported
	TransferSeconds float64
	NBytes          int64 // bytes in memory, without duplicates
	Suspicious      int64 // times one of its tasks was running on a worker that died
	DurationAverage float64
}

// SemaphoreView is one Semaphore or Lock.
type SemaphoreView = coord.SemaphoreView

// StreamRun is one finished or erred run of a task: its prefix, where and
// when (unix seconds) it computed.
type StreamRun struct {
	Prefix, Worker string
	Start, Stop    float64
	Erred          bool
}

// Snapshot builds the view now. Its cost is O(workers + prefixes + groups
// + stream length), independent of the number of tasks.
func (s *State) Snapshot() *Snapshot {
	snap := &Snapshot{
		At: s.now, SchedulerID: s.cfg.SchedulerID, Address: s.cfg.SchedulerAddress, Started: s.cfg.StartedAt,
		Forgotten: s.forgotten, TaskGroups: len(s.groups), Unrunnable: s.unrunnable.Len(),
		Queued: s.queuedLen(), CoOwned: s.co.owned, CoRuns: s.co.bySize.Len(),
		Saturation: s.cfg.WorkerSaturation, CoAssignment: s.coOn(),
		Stealing: s.StealStats(), TasksDone: s.tasksDone, Transitions: s.log.total,
		DesiredWorkers: s.AdaptiveTarget(0), IdleSince: s.idleSince,
	}
	for _, cs := range s.clientOrder.Items() {
		if cs.ID != fireAndForget {
			snap.Clients++
		}
	}
	for _, ws := range s.workerOrder.Items() {
		snap.Workers = append(snap.Workers, WorkerView{
			Address: ws.Address, Name: ws.Name, Host: ws.Host, Status: ws.status, NThreads: ws.NThreads,
			MemoryLimit: ws.MemoryLimit, Managed: ws.nbytes, Processing: ws.processing.Len(), InMemory: ws.hasWhat.Len(),
			Occupancy: s.occupancy(ws), Idle: s.idle.Has(ws), Saturated: s.saturated.Has(ws), LastSeen: ws.lastSeen,
		})
	}
	sort.Slice(snap.Workers, func(i, j int) bool { return snap.Workers[i].Address < snap.Workers[j].Address })
	nbytes := map[*TaskPrefix]int64{}
	for _, tg := range s.groups {
		nbytes[tg.prefix] += tg.nbytesTotal
	}
	for _, tp := range s.prefixes {
		pv := PrefixView{Name: tp.Name, States: tp.states, StateTotals: tp.stateTotals,
			ComputeSeconds: tp.computeSeconds, TransferSeconds: tp.transferSeconds, NBytes: nbytes[tp],
			Suspicious: int64(tp.suspicious), DurationAverage: tp.durationAverage}
		for st, n := range tp.states {
			snap.Tasks[st] += n
		}
		snap.Prefixes = append(snap.Prefixes, pv)
	}
	sort.Slice(snap.Prefixes, func(i, j int) bool { return snap.Prefixes[i].Name < snap.Prefixes[j].Name })
	snap.Semaphores = s.coord.Semaphores()
	snap.Stream, snap.StreamIndex = s.dashStream.items(), s.dashStream.total
	return snap
}

// noteRun records a run that left processing for the dashboard's stream.
func (s *State) noteRun(ts *TaskState, worker string, ss []StartStop, erred bool) {
	if s.dashStream.max <= 0 {
		return
	}
	for _, x := range ss {
		if x.Action == "compute" {
			s.dashStream.add(StreamRun{Prefix: ts.prefix.Name, Worker: worker, Start: x.Start, Stop: x.Stop, Erred: erred})
			return
		}
	}
}
