package scheduler

import (
	"fmt"
	"math"
	"time"

	"daskgo/protocol"
)

// Config holds the knobs of distributed.scheduler.* that shape the engine's
// decisions. It is a plain struct filled by cmd/ (viper lives there); zero
// fields get dask's defaults in Validate.
type Config struct {
	// AllowedFailures: a task errs with KilledWorker once more than this many
	// workers died while running it (distributed.scheduler.allowed-failures).
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
	// ours). 0 means 4; negative partitions by contiguous priority ranges
	// instead (the first design, kept for comparison).
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
	// intervals) are removed on Tick. Negative disables the check.
	WorkerTTL time.Duration
	// NoWorkersTimeout: a task left unrunnable (no-worker), or queued with
	// no running worker, for longer than this errs (noworkers.go); 0 is
	// dask's null, never.
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
	// (distributed.scheduler.active-memory-manager.interval, default 2s).
	ActiveMemoryManagerInterval time.Duration
	// WorkStealingInterval is how often the outer ring sends StealTick
	// (distributed.scheduler.work-stealing-interval, default 1s).
	WorkStealingInterval time.Duration
	// DefaultTaskDurations are the duration estimates of prefixes never
	// measured (distributed.scheduler.default-task-durations, applied when a
	// prefix is created as TaskPrefix.__init__ does); prefixes listed at 1 ms
	// or less are never stolen (stealing.fast_tasks). nil gets dask's
	// defaults (the four split prefixes at 1us).
	DefaultTaskDurations map[string]time.Duration
	// LeaseValidationInterval: how often Tick drops semaphore leases not
	// refreshed within their lease timeout
	// (distributed.scheduler.locks.lease-validation-interval, default 10s).
	LeaseValidationInterval time.Duration
	// ValidateInvariants checks every invariant after every Handle and panics with the
	// task's story on a broken one (dask's validate flag). Tests turn it on.
	ValidateInvariants bool
	// TransitionLogSize bounds the transition log (default 1000, as
	// distributed.admin.low-level-log-length bounds SchedulerState's
	// transition_log: a bigger ring pins the keys and stimulus ids of tasks
	// long forgotten, and every transition writes a cache-cold entry).
	TransitionLogSize int
	// TransitionCounterMax bounds the transitions one stimulus may cause
	// (distributed's transition_counter_max, which bounds them over the
	// scheduler's life in its tests): a recommendation cycle then fails
	// with the task's story instead of hanging the engine. 0 means 16 *
	// (the most tasks held during the stimulus + 1024), far above the 3 or
	// 4 transitions per task the largest legitimate cascade (a client
	// releasing everything) makes.
	TransitionCounterMax int
	// TaskStreamLength bounds the task stream's records (TaskStreamPlugin's
	// maxlen: the larger of distributed.scheduler.dashboard.status and
	// .tasks task-stream-length, 100000 by default).
	TaskStreamLength int
	// DashboardStreamLength is how many of the last task runs the
	// dashboard's task stream keeps (Snapshot.Stream); 0, the default,
	// keeps none (no dashboard).
	DashboardStreamLength int
	// MemoryRecentToOldTime is how long unmanaged memory must last to count
	// as unmanaged_old (distributed.worker.memory.recent-to-old-time,
	// default 30s; memory.go).
	MemoryRecentToOldTime time.Duration
	// EventLogLength bounds each event topic's deque
	// (distributed.admin.low-level-log-length, 1000 by default).
	EventLogLength int

	// Identity of the scheduler, for identity/scheduler_info replies.
	SchedulerAddress string
	SchedulerID      string
	StartedAt        time.Time
	Services         *protocol.Map

	allowedFailuresSet bool // AllowedFailures == 0 was meant (ExactAllowedFailures)
}

// DefaultConfig returns dask's defaults.
func DefaultConfig() Config {
	c := Config{}
	_ = c.Validate()
	return c
}

// Validate fills defaults and rejects contradictions.
func (c *Config) Validate() error {
	if c.AllowedFailures < 0 {
		return fmt.Errorf("scheduler config: allowed-failures %d < 0", c.AllowedFailures)
	}
	if c.AllowedFailures == 0 && !c.allowedFailuresSet {
		c.AllowedFailures = 3
	}
	if c.WorkerSaturation == 0 {
		c.WorkerSaturation = 1.1
	}
	if math.IsNaN(c.WorkerSaturation) || c.WorkerSaturation < 0 {
		return fmt.Errorf("scheduler config: worker-saturation must be > 0, got %v", c.WorkerSaturation)
	}
	if c.RootishTaskgroup == 0 {
		c.RootishTaskgroup = 5
	}
	if c.RootishTaskgroupDependencies == 0 {
		c.RootishTaskgroupDependencies = 5
	}
	if c.WorkerTTL == 0 {
		c.WorkerTTL = 5 * time.Minute
	}
	if c.NoWorkersTimeout < 0 {
		return fmt.Errorf("scheduler config: no-workers-timeout %v < 0", c.NoWorkersTimeout)
	}
	if c.UnknownTaskDuration <= 0 {
		c.UnknownTaskDuration = 500 * time.Millisecond
	}
	if c.Bandwidth <= 0 {
		c.Bandwidth = 100e6
	}
	if c.DefaultDataSize <= 0 {
		c.DefaultDataSize = 1024
	}
	if c.ActiveMemoryManagerInterval <= 0 {
		c.ActiveMemoryManagerInterval = 2 * time.Second
	}
	if c.WorkStealingInterval <= 0 {
		c.WorkStealingInterval = time.Second
	}
	if c.DefaultTaskDurations == nil {
		c.DefaultTaskDurations = defaultTaskDurations()
	}
	if c.LeaseValidationInterval <= 0 {
		c.LeaseValidationInterval = 10 * time.Second
	}
	if c.TransitionLogSize <= 0 {
		c.TransitionLogSize = 1000
	}
	if c.TaskStreamLength <= 0 {
		c.TaskStreamLength = 100000
	}
	if c.MemoryRecentToOldTime <= 0 {
		c.MemoryRecentToOldTime = 30 * time.Second
	}
	if c.EventLogLength <= 0 {
		c.EventLogLength = 1000
	}
	if c.SchedulerID == "" {
		c.SchedulerID = "Scheduler-go"
	}
	return nil
}

// defaultTaskDurations is distributed.yaml's default-task-durations.
func defaultTaskDurations() map[string]time.Duration {
	return map[string]time.Duration{
		"rechunk-split":     time.Microsecond,
		"split-shuffle":     time.Microsecond,
		"split-taskshuffle": time.Microsecond,
		"split-stage":       time.Microsecond,
	}
}

// ExactAllowedFailures marks AllowedFailures as set on purpose, so that 0
// (KilledWorker on the first death) survives Validate.
func (c *Config) ExactAllowedFailures(n int) {
	c.AllowedFailures = n
	c.allowedFailuresSet = true
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
