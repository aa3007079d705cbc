package web

import (
	"net/http"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"daskgo/scheduler"
)

// /metrics: distributed's names and labels (distributed/http/scheduler/
// prometheus/core.py, semaphore.py, stealing.py, namespace "dask") for
// every fact the engine has, plus ours (withholding's queue,
// co-assignment's runs, the helpers) and the Go runtime's own series. A
// scrape reads the published Snapshot and the outer ring's counters;
// nothing here runs in the engine (its counters are read on scrape, as the
// house style asks). A registry of our own, not the global one.

func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&engineCollector{b: s.cfg.Backend},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// stealingLevels are WorkStealing.cost_multipliers as Python prints them:
// the cost_multiplier label values.
var stealingLevels = [...]string{"1.0", "1.03125", "1.0625", "1.125", "1.25", "1.5", "2", "3", "5", "9", "17",
	"33", "65", "129", "257"}

type metric struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
}

func newMetric(name, help string, kind prometheus.ValueType, labels ...string) metric {
	return metric{prometheus.NewDesc(name, help, labels, nil), kind}
}

var (
	mClients        = newMetric("dask_scheduler_clients", "Number of clients connected", prometheus.GaugeValue)
	mClientsAdded   = newMetric("dask_scheduler_client_connections_added_total", "Total number of client connections added", prometheus.CounterValue)
	mClientsRemoved = newMetric("dask_scheduler_client_connections_removed_total", "Total number of client connections removed", prometheus.CounterValue)
	mDesired        = newMetric("dask_scheduler_desired_workers", "Number of workers scheduler needs for task graph", prometheus.GaugeValue)
	mWorkers        = newMetric("dask_scheduler_workers", "Number of workers known by scheduler", prometheus.GaugeValue, "state")
	mWorkersAdded   = newMetric("dask_scheduler_workers_added_total", "Total number of workers added", prometheus.CounterValue)
	mWorkersRemoved = newMetric("dask_scheduler_workers_removed_total", "Total number of workers removed", prometheus.CounterValue)
	mSuspicious     = newMetric("dask_scheduler_tasks_suspicious_total", "Total number of times a task has been marked suspicious", prometheus.CounterValue, "task_prefix_name")
	mForgotten      = newMetric("dask_scheduler_tasks_forgotten_total", "Total number of processed tasks no longer in memory and already removed from the scheduler job queue\nNote: Task groups on the scheduler which have all tasks in the forgotten state are not included.", prometheus.CounterValue)
	mTasks          = newMetric("dask_scheduler_tasks", "Number of tasks known by scheduler", prometheus.GaugeValue, "state")
	mGroups         = newMetric("dask_scheduler_task_groups", "Number of task groups known by scheduler", prometheus.GaugeValue)
	mCompute        = newMetric("dask_scheduler_tasks_compute_seconds_total", "Total amount of compute time spent in each prefix", prometheus.CounterValue, "task_prefix_name")
	mTransfer       = newMetric("dask_scheduler_tasks_transfer_seconds_total", "Total amount of transfer time spent in each prefix", prometheus.CounterValue, "task_prefix_name")
	mOutputBytes    = newMetric("dask_scheduler_tasks_output_bytes", "Current number of bytes in memory (without duplicates) for each prefix", prometheus.GaugeValue, "task_prefix_name")
	mPrefixTotals   = newMetric("dask_scheduler_prefix_state_totals_total", "Accumulated count of task prefix in each state", prometheus.CounterValue, "task_prefix_name", "state")
	mGC             = newMetric("dask_scheduler_gc_collection_seconds_total", "Total time spent on garbage collection (here: the Go runtime's stop-the-world pauses)", prometheus.CounterValue)
	mLastTime       = newMetric("dask_scheduler_last_time_total", "SystemMonitor last time (here: when the engine last published its snapshot)", prometheus.CounterValue)
	mTickMax        = newMetric("dask_scheduler_tick_duration_maximum_seconds", "Maximum tick duration observed since Prometheus last scraped metrics", prometheus.GaugeValue)
	mTicks          = newMetric("dask_scheduler_tick_count_total", "Total number of ticks observed since the server started", prometheus.CounterValue)
	mLockHeldMax    = newMetric("dask_scheduler_engine_lock_held_maximum_seconds", "Longest the engine's lock was held at once since Prometheus last scraped metrics, ours", prometheus.GaugeValue)

	mSemMax      = newMetric("dask_semaphore_max_leases", "Maximum leases allowed per semaphore\nNote: This will be constant for each semaphore during its lifetime.", prometheus.GaugeValue, "name")
	mSemActive   = newMetric("dask_semaphore_active_leases", "Amount of currently active leases per semaphore", prometheus.GaugeValue, "name")
	mSemPending  = newMetric("dask_semaphore_pending_leases", "Amount of currently pending leases per semaphore", prometheus.GaugeValue, "name")
	mSemAcquire  = newMetric("dask_semaphore_acquire_total", "Total number of leases acquired per semaphore", prometheus.CounterValue, "name")
	mSemRelease  = newMetric("dask_semaphore_release_total", "Total number of leases released per semaphore\nNote: If a semaphore is closed while there are still leases active, this count will not equal `semaphore_acquire_total` after execution.", prometheus.CounterValue, "name")
	mSemAvgWait  = newMetric("dask_semaphore_average_pending_lease_time_s", "Exponential moving average of the time it took to acquire a lease per semaphore\nNote: This only includes time spent on scheduler side, it does not include time spent on communication.\nNote: This average is calculated based on order of leases instead of time of lease acquisition.", prometheus.GaugeValue, "name")
	mStealCount  = newMetric("dask_stealing_request_count_total", "Total number of stealing requests per cost multiplier.", prometheus.CounterValue, "cost_multiplier")
	mStealCost   = newMetric("dask_stealing_request_cost_total", "Total cost of stealing requests per cost multiplier.", prometheus.CounterValue, "cost_multiplier")
	mQueued      = newMetric("dask_scheduler_queued_root_tasks", "Root tasks withheld on the scheduler (worker-saturation), ours", prometheus.GaugeValue)
	mCoOwned     = newMetric("dask_scheduler_coassigned_tasks", "Withheld root tasks dealt to a worker's co-assignment runs, ours", prometheus.GaugeValue)
	mCoRuns      = newMetric("dask_scheduler_coassignment_runs", "Co-assignment runs (family ranges dealt to workers), ours", prometheus.GaugeValue)
	mTasksDone   = newMetric("dask_scheduler_tasks_finished_total", "Tasks finished since the start, ours", prometheus.CounterValue)
	mHelpers     = newMetric("dask_scheduler_helper_processes", "Materializer helper processes running, ours", prometheus.GaugeValue)
	mHelperRSS   = newMetric("dask_scheduler_helper_rss_bytes", "Resident memory of the materializer helpers, summed, ours", prometheus.GaugeValue)
	mTransitions = newMetric("dask_scheduler_transitions_total", "Task state transitions since the start, ours", prometheus.CounterValue)
	mHookQueued  = newMetric("dask_scheduler_plugin_events_queued", "Scheduler plugin hook events waiting for the Python host, ours", prometheus.GaugeValue)
	mHookDropped = newMetric("dask_scheduler_plugin_events_dropped_total", "Scheduler plugin hook events dropped because the host's queue was full, ours", prometheus.CounterValue)
)

var allMetrics = []metric{mClients, mClientsAdded, mClientsRemoved, mDesired, mWorkers, mWorkersAdded, mWorkersRemoved,
	mGC, mLastTime, mSuspicious, mForgotten, mTasks, mGroups, mCompute, mTransfer, mOutputBytes, mPrefixTotals, mTickMax, mTicks, mLockHeldMax,
	mSemMax, mSemActive, mSemPending, mSemAcquire, mSemRelease, mSemAvgWait, mStealCount, mStealCost,
	mQueued, mCoOwned, mCoRuns, mTasksDone, mHelpers, mHelperRSS, mTransitions, mHookQueued, mHookDropped}

// engineCollector turns the Snapshot into metrics on each scrape.
type engineCollector struct{ b Backend }

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range allMetrics {
		ch <- m.desc
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.b.Snapshot()
	proc := c.b.Process()
	emit := func(m metric, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, v, labels...)
	}
	emit(mClients, float64(snap.Clients))
	emit(mClientsAdded, float64(proc.ClientConnectionsAdded))
	emit(mClientsRemoved, float64(proc.ClientConnectionsRemoved))
	emit(mDesired, float64(snap.DesiredWorkers))
	c.workers(snap, emit)
	emit(mWorkersAdded, float64(proc.WorkersAdded))
	emit(mWorkersRemoved, float64(proc.WorkersRemoved))
	emit(mHookQueued, float64(proc.PluginEventsQueued))
	emit(mHookDropped, float64(proc.PluginEventsDropped))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	emit(mGC, float64(ms.PauseTotalNs)/1e9)
	if !snap.At.IsZero() {
		emit(mLastTime, float64(snap.At.UnixNano())/1e9)
	}
	for _, p := range snap.Prefixes {
		emit(mSuspicious, float64(p.Suspicious), p.Name)
	}
	emit(mForgotten, float64(snap.Forgotten))
	for st, n := range snap.Tasks {
		if status := scheduler.Status(st); status != scheduler.StatusForgotten {
			emit(mTasks, float64(n), status.String())
		}
	}
	emit(mGroups, float64(snap.TaskGroups))
	for _, p := range snap.Prefixes {
		emit(mCompute, p.ComputeSeconds, p.Name)
		emit(mTransfer, p.TransferSeconds, p.Name)
		emit(mOutputBytes, float64(p.NBytes), p.Name)
		for st, n := range p.StateTotals {
			emit(mPrefixTotals, float64(n), p.Name, scheduler.Status(st).String())
		}
	}
	emit(mTickMax, proc.TickMax.Seconds())
	emit(mTicks, float64(proc.Ticks))
	emit(mLockHeldMax, proc.LockHeldMax.Seconds())
	for _, sem := range snap.Semaphores {
		emit(mSemMax, float64(sem.MaxLeases), sem.Name)
		emit(mSemActive, float64(sem.Active), sem.Name)
		emit(mSemPending, float64(sem.Pending), sem.Name)
		emit(mSemAcquire, float64(sem.AcquireTotal), sem.Name)
		emit(mSemRelease, float64(sem.ReleaseTotal), sem.Name)
		emit(mSemAvgWait, sem.AveragePending.Seconds(), sem.Name)
	}
	for i, level := range stealingLevels {
		emit(mStealCount, float64(snap.Stealing.RequestsByLevel[i]), level)
		emit(mStealCost, snap.Stealing.CostByLevel[i], level)
	}
	emit(mQueued, float64(snap.Queued))
	emit(mCoOwned, float64(snap.CoOwned))
	emit(mCoRuns, float64(snap.CoRuns))
	emit(mTasksDone, float64(snap.TasksDone))
	emit(mTransitions, float64(snap.Transitions))
	var rss int64
	for _, r := range proc.HelperRSS {
		rss += r
	}
	emit(mHelpers, float64(len(proc.HelperRSS)))
	emit(mHelperRSS, float64(rss))
}

// workers is core.py's dask_scheduler_workers by state: idle, partially
// saturated (running, neither idle nor saturated), saturated, paused and
// retiring (neither running nor paused).
func (c *engineCollector) workers(snap *scheduler.Snapshot, emit func(metric, float64, ...string)) {
	var idle, saturated, running, paused int
	for _, w := range snap.Workers {
		switch {
		case w.Status == "paused":
			paused++
		case w.Status == "running":
			running++
			if w.Idle {
				idle++
			}
			if w.Saturated {
				saturated++
			}
		}
	}
	emit(mWorkers, float64(idle), "idle")
	emit(mWorkers, float64(running-idle-saturated), "partially_saturated")
	emit(mWorkers, float64(saturated), "saturated")
	emit(mWorkers, float64(paused), "paused")
	emit(mWorkers, float64(len(snap.Workers)-paused-running), "retiring")
}
