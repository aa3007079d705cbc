package scheduler

import (
	"errors"
	"fmt"
	"math"
	"time"

	"daskgo/protocol"
)

// Config holds the knobs of distributed.scheduler.* that shape the engine's
// decisions. It is a plain struct filled by cmd/ (viper lives in compat and
// cmd); DefaultConfig holds dask's values, the only place they are written.
//
// One rule for "no value": a zero field is unset, and Validate fills it
// from DefaultConfig. A setting whose dask value turns something off says so
// with a sentinel, never with zero: Never for a duration that never fires
// (dask's null), Off for a count whose feature is off. So Config{} with a
// few fields set is dask's default configuration with those changes, and
// no zero means two things.
type Config struct {
	// AllowedFailures: a task errs with KilledWorker once more than this many
	// workers died while running it (distributed.scheduler.allowed-failures).
	// Off is dask's 0: the first death errs the task.
	AllowedFailures int
	// WorkerSaturation: queue slots per thread for root-ish tasks;
	// math.Inf(1) turns queuing off (distributed.scheduler.worker-saturation).
	WorkerSaturation float64
	// RootTaskCoAssignment: with a finite WorkerSaturation, queued root-ish
	// tasks are grouped by the reductions they feed and each group is run
	// by one worker (distributed.scheduler.root-task-co-assignment;
	// WITHHOLDING.md).
	RootTaskCoAssignment bool
	// CoFamilyDepth: with co-assignment, roots that reach a common task
	// within this many levels of dependents form a family that one worker
	// runs (coassign_family.go; distributed.scheduler.root-task-co-assignment-depth,
	// ours). Off (dask's 0 or less) partitions by contiguous priority
	// ranges instead (the first design, kept for comparison).
	CoFamilyDepth int
	// SpreadRootsWithoutQueue: with WorkerSaturation = inf, place root-ish
	// tasks like any other task (worker_objective over all workers) instead
	// of distributed's group co-location (decide_worker_rootish_queuing_disabled).
	// No distributed release does this; the simulator uses it as the "off"
	// baseline (neither withholding nor any co-location).
	SpreadRootsWithoutQueue bool
	// RootishTaskgroup and RootishTaskgroupDependencies bound the dependency
	// groups a root-ish task group may have (is_rootish).
	RootishTaskgroup             int
	RootishTaskgroupDependencies int
	// WorkerTTL: workers silent longer than max(WorkerTTL, 10 heartbeat
	// intervals) are removed on Tick (distributed.scheduler.worker-ttl).
	// Never (dask's null) disables the check.
	WorkerTTL time.Duration
	// NoWorkersTimeout: a task left unrunnable (no-worker), or queued with
	// no running worker, for longer than this errs (noworkers.go;
	// distributed.scheduler.no-workers-timeout). Never, dask's null, is the
	// default.
	NoWorkersTimeout time.Duration
	// UnknownTaskDuration is the duration estimate of never-measured prefixes.
	UnknownTaskDuration time.Duration
	// Bandwidth (bytes/s) prices missing dependencies until heartbeats report.
	Bandwidth float64
	// DefaultDataSize is the nbytes of tasks never measured.
	DefaultDataSize int64
	// NoWorkStealing turns work stealing off (distributed.scheduler.
	// work-stealing: false): no stealable bookkeeping on transitions, and
	// StealTick does nothing. The zero value is dask's default, stealing on.
	NoWorkStealing bool
	// NoActiveMemoryManager starts the scheduler with the active memory
	// manager stopped (distributed.scheduler.active-memory-manager.start:
	// false): AMMTick does nothing until amm_handler starts it. The zero
	// value is dask's default, on, with the ReduceReplicas policy (amm.go).
	NoActiveMemoryManager bool
	// NoAMMPolicy: the policy list is empty (distributed.scheduler.
	// active-memory-manager.policies: []), so the manager does nothing even
	// when started (amm_control.go).
	NoAMMPolicy bool
	// ActiveMemoryManagerInterval is how often the outer ring sends AMMTick
	// (distributed.scheduler.active-memory-manager.interval).
	ActiveMemoryManagerInterval time.Duration
	// WorkStealingInterval is how often the outer ring sends StealTick
	// (distributed.scheduler.work-stealing-interval).
	WorkStealingInterval time.Duration
	// DefaultTaskDurations are the duration estimates of prefixes never
	// measured (distributed.scheduler.default-task-durations, applied when a
	// prefix is created as TaskPrefix.__init__ does); prefixes listed at 1 ms
	// or less are never stolen (stealing.fast_tasks).
	DefaultTaskDurations map[string]time.Duration
	// LeaseValidationInterval: how often Tick drops semaphore leases not
	// refreshed within their lease timeout
	// (distributed.scheduler.locks.lease-validation-interval).
	LeaseValidationInterval time.Duration
	// ValidateInvariants checks every invariant after every Handle and panics with the
	// task's story on a broken one (dask's validate flag). Tests turn it on.
	ValidateInvariants bool
	// TransitionLogSize bounds the transition log (as
	// distributed.admin.low-level-log-length bounds SchedulerState's
	// transition_log: a bigger ring pins the keys and stimulus ids of tasks
	// long forgotten, and every transition writes a cache-cold entry).
	TransitionLogSize int
	// TransitionCounterMax bounds the transitions one stimulus may cause
	// (distributed's transition_counter_max, which bounds them over the
	// scheduler's life in its tests): a recommendation cycle then fails
	// with the task's story instead of hanging the engine. Its default, 0,
	// is computed per stimulus: 16 * (the most tasks held during the
	// stimulus + 1024), far above the 3 or 4 transitions per task the
	// largest legitimate cascade (a client releasing everything) makes.
	TransitionCounterMax int
	// TaskStreamLength bounds the task stream's records (TaskStreamPlugin's
	// maxlen: the larger of distributed.scheduler.dashboard.status and
	// .tasks task-stream-length).
	TaskStreamLength int
	// DashboardStreamLength is how many of the last task runs the
	// dashboard's task stream keeps (Snapshot.Stream); its default, 0,
	// keeps none (no dashboard).
	DashboardStreamLength int
	// MemoryRecentToOldTime is how long unmanaged memory must last to count
	// as unmanaged_old (distributed.worker.memory.recent-to-old-time;
	// memory.go).
	MemoryRecentToOldTime time.Duration
	// EventLogLength bounds each event topic's deque
	// (distributed.admin.low-level-log-length).
	EventLogLength int

	// Identity of the scheduler, for identity/scheduler_info replies.
	SchedulerAddress string
	SchedulerID      string
	StartedAt        time.Time
	Services         *protocol.Map
}

// Never, in a duration setting, means the event never happens: dask's null
// for worker-ttl and no-workers-timeout (and idle-timeout in the server).
const Never time.Duration = -1

// Off, in an integer setting, turns off what it counts: AllowedFailures Off
// lets no failure pass, CoFamilyDepth Off forms no families.
const Off = -1

// DefaultConfig returns dask's defaults: distributed/distributed.yaml's
// values (2026.8.0) for the keys each field names, and ours for our keys.
// It is the one place they are written; compat's viper defaults and
// Validate both read it.
func DefaultConfig() Config {
	return Config{
		AllowedFailures:              3,
		WorkerSaturation:             1.1,
		CoFamilyDepth:                4, // why 4: State.coFamilyDepth
		RootishTaskgroup:             5,
		RootishTaskgroupDependencies: 5,
		WorkerTTL:                    5 * time.Minute,
		NoWorkersTimeout:             Never,
		UnknownTaskDuration:          500 * time.Millisecond,
		Bandwidth:                    100e6,
		DefaultDataSize:              1024, // "1kiB"
		ActiveMemoryManagerInterval:  2 * time.Second,
		WorkStealingInterval:         time.Second,
		DefaultTaskDurations: map[string]time.Duration{
			"rechunk-split":     time.Microsecond,
			"split-shuffle":     time.Microsecond,
			"split-taskshuffle": time.Microsecond,
			"split-stage":       time.Microsecond,
		},
		LeaseValidationInterval: 10 * time.Second,
		TransitionLogSize:       1000,
		TaskStreamLength:        100000,
		MemoryRecentToOldTime:   30 * time.Second,
		EventLogLength:          1000,
		SchedulerID:             "Scheduler-go",
	}
}

// Validate fills the zero fields from DefaultConfig and rejects
// contradictions.
func (c *Config) Validate() error {
	d := DefaultConfig()
	fill(&c.AllowedFailures, d.AllowedFailures)
	fill(&c.WorkerSaturation, d.WorkerSaturation)
	fill(&c.CoFamilyDepth, d.CoFamilyDepth)
	fill(&c.RootishTaskgroup, d.RootishTaskgroup)
	fill(&c.RootishTaskgroupDependencies, d.RootishTaskgroupDependencies)
	fill(&c.WorkerTTL, d.WorkerTTL)
	fill(&c.NoWorkersTimeout, d.NoWorkersTimeout)
	fill(&c.UnknownTaskDuration, d.UnknownTaskDuration)
	fill(&c.Bandwidth, d.Bandwidth)
	fill(&c.DefaultDataSize, d.DefaultDataSize)
	fill(&c.ActiveMemoryManagerInterval, d.ActiveMemoryManagerInterval)
	fill(&c.WorkStealingInterval, d.WorkStealingInterval)
	if c.DefaultTaskDurations == nil {
		c.DefaultTaskDurations = d.DefaultTaskDurations
	}
	fill(&c.LeaseValidationInterval, d.LeaseValidationInterval)
	fill(&c.TransitionLogSize, d.TransitionLogSize)
	fill(&c.TaskStreamLength, d.TaskStreamLength)
	fill(&c.MemoryRecentToOldTime, d.MemoryRecentToOldTime)
	fill(&c.EventLogLength, d.EventLogLength)
	fill(&c.SchedulerID, d.SchedulerID)
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("scheduler config: "+format, args...))
	}
	if c.AllowedFailures < 0 && c.AllowedFailures != Off {
		bad("allowed-failures %d < 0 (Off lets no failure pass)", c.AllowedFailures)
	}
	if math.IsNaN(c.WorkerSaturation) || c.WorkerSaturation < 0 {
		bad("worker-saturation must be > 0, got %v", c.WorkerSaturation)
	}
	if c.CoFamilyDepth < 0 && c.CoFamilyDepth != Off {
		bad("co-assignment depth %d < 0 (Off forms no families)", c.CoFamilyDepth)
	}
	for name, v := range map[string]time.Duration{"worker-ttl": c.WorkerTTL, "no-workers-timeout": c.NoWorkersTimeout} {
		if v < 0 && v != Never {
			bad("%s %v < 0 (Never turns it off)", name, v)
		}
	}
	for name, v := range map[string]time.Duration{
		"unknown-task-duration": c.UnknownTaskDuration, "active-memory-manager.interval": c.ActiveMemoryManagerInterval,
		"work-stealing-interval": c.WorkStealingInterval, "locks.lease-validation-interval": c.LeaseValidationInterval,
		"recent-to-old-time": c.MemoryRecentToOldTime,
	} {
		if v < 0 {
			bad("%s %v < 0", name, v)
		}
	}
	for name, v := range map[string]int64{
		"rootish-taskgroup": int64(c.RootishTaskgroup), "rootish-taskgroup-dependencies": int64(c.RootishTaskgroupDependencies),
		"default-data-size": c.DefaultDataSize, "transition log size": int64(c.TransitionLogSize),
		"task stream length": int64(c.TaskStreamLength), "event log length": int64(c.EventLogLength),
	} {
		if v < 0 {
			bad("%s %d < 0", name, v)
		}
	}
	if !(c.Bandwidth >= 0) {
		bad("bandwidth %v < 0", c.Bandwidth)
	}
	return errors.Join(errs...)
}

// fill sets an unset (zero) field to its default.
func fill[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// allowedFailures is the number of deaths a task survives, with Off read as
// dask's 0.
func (c *Config) allowedFailures() int {
	return max(c.AllowedFailures, 0)
}

// heartbeatInterval mirrors distributed.scheduler.heartbeat_interval: the
// interval (s) we want worker heartbeats at, given n workers.
func heartbeatInterval(n int) float64 {
	switch {
	case n <= 10:
		return 0.5
	case n < 50:
		return 1
	case n < 200:
		return 2
	default:
		return float64(n)/200 + 1
	}
}
