package sim

import "time"

// Result is one run's record in scripts/sim/results/latest.json.
type Result struct {
	Workload               string  `json:"workload"`
	Scale                  string  `json:"scale"`
	NWorkers               int     `json:"n_workers"`
	ThreadsPerWorker       int     `json:"threads_per_worker"`
	Mode                   string  `json:"mode"`
	NTasks                 int     `json:"n_tasks"`
	MakespanS              float64 `json:"makespan_s"`
	PeakClusterMemoryBytes int64   `json:"peak_cluster_memory_bytes"`
	// PeakClusterSampledBytes: the peak as the benchmark measures one, the
	// largest of the cluster's memory sampled every Config.SampleInterval
	// (PeakClusterMemoryBytes also counts what lasts between two samples).
	PeakClusterSampledBytes int64 `json:"peak_cluster_sampled_bytes"`
	PeakWorkerMemoryBytes   int64 `json:"peak_worker_memory_bytes"`
	TransferredBytes        int64 `json:"transferred_bytes"`
	// EngineCPUS is the engine's CPU time: the time measured around every
	// State.Handle and State.Recycle on the EngineClock (engineclock.go;
	// records before 2026-12-05 23:00 UTC have no engine_clock field and
	// used "thread"), less the clock's own cost (EngineClockNs per
	// interval, EngineTimed intervals). EngineCPURawS is the sum before
	// that correction (what records before 2026-12 called engine_cpu_s).
	// EngineCPUUsPerTask is EngineCPUS per task of the graph.
	EngineClock        string  `json:"engine_clock"`
	EngineCPUS         float64 `json:"engine_cpu_s"`
	EngineCPUUsPerTask float64 `json:"engine_cpu_us_per_task"`
	EngineCPURawS      float64 `json:"engine_cpu_raw_s"`
	EngineClockNs      float64 `json:"engine_clock_ns"`
	// EngineWallS: on the wall-scaled clock, the intervals' wall time
	// before each chunk was scaled by its time on a CPU (0 on "thread").
	EngineWallS      float64 `json:"engine_wall_s"`
	EngineHandles    int64   `json:"engine_handles"`
	EngineTimed      int64   `json:"engine_timed"`
	SimWallS         float64 `json:"sim_wall_s"`
	WorkersOverLimit int     `json:"workers_over_limit"`
	MemoryLimitBytes int64   `json:"memory_limit_bytes"`
	BandwidthBytesS  float64 `json:"bandwidth_bytes_s"`
	LatencyS         float64 `json:"latency_s"`
	Seed             uint64  `json:"seed"`
	DataBytes        int64   `json:"data_bytes"`
	EngineLogs       int     `json:"engine_logs"`
	// LeakedBytes is memory still held once the client released its
	// results and every message was delivered: 0 unless something is wrong.
	LeakedBytes int64 `json:"leaked_bytes"`
	// HolderMismatches counts who_has entries naming a worker that no
	// longer held the data when the fetch started (message races).
	HolderMismatches int `json:"holder_mismatches"`
	// Stealing: the run had work stealing on; StealsConfirmed counts the
	// tasks it moved.
	Stealing        bool  `json:"stealing,omitempty"`
	StealsConfirmed int64 `json:"steals_confirmed,omitempty"`
	// AMMIntervalS: the active memory manager's period; 0 (absent, as in
	// records made before the simulator had it): off.
	AMMIntervalS float64 `json:"amm_interval_s,omitempty"`
	// SpilledBytes: bytes the workers spilled to disk (spill.go); Spill:
	// spilling was on.
	SpilledBytes int64 `json:"spilled_bytes"`
	Spill        bool  `json:"spill,omitempty"`
	// ReplicasDropped counts replicas workers released on remove-replicas.
	ReplicasDropped int64 `json:"replicas_dropped,omitempty"`
	// OutboxDigest: with Config.Digest, a hash of everything the engine
	// decided (digest.go).
	OutboxDigest string `json:"outbox_digest,omitempty"`
	// PeakTrace: with Config.TracePeak, the cluster's data at its peak.
	PeakTrace *PeakTrace `json:"peak_trace,omitempty"`
	// The calibrated model's terms (Config), recorded with each run.
	Cores              float64     `json:"cores,omitempty"`
	TaskOverheadS      float64     `json:"task_overhead_s,omitempty"`
	TransferCPUS       float64     `json:"transfer_cpu_s,omitempty"`
	TransferCPUPerByte float64     `json:"transfer_cpu_s_per_byte,omitempty"`
	TransferWaitS      float64     `json:"transfer_wait_s,omitempty"`
	GIL                bool        `json:"gil,omitempty"` // shared cores under the interpreter lock (cpu.go)
	DurationSpread     float64     `json:"duration_spread,omitempty"`
	WorkerSpeedSpread  float64     `json:"worker_speed_spread,omitempty"`
	Memory             MemoryModel `json:"memory_model"`
	Calibration        string      `json:"calibration,omitempty"`
}

func (s *Sim) result(wall time.Duration) *Result {
	r := &Result{Workload: s.g.Workload, Scale: s.g.Scale, NWorkers: s.cfg.Workers,
		ThreadsPerWorker: s.cfg.Threads, Mode: s.cfg.Mode, NTasks: len(s.g.Tasks),
		MakespanS: s.makespan, PeakClusterMemoryBytes: s.peakCluster,
		PeakClusterSampledBytes: s.peakSampled, TransferredBytes: s.transferred,
		EngineHandles: s.handles, SimWallS: wall.Seconds(),
		MemoryLimitBytes: s.cfg.MemoryLimit, BandwidthBytesS: s.cfg.Bandwidth, LatencyS: s.cfg.Latency,
		Seed: s.cfg.Seed, DataBytes: s.g.DataBytes, EngineLogs: s.engineLogs, LeakedBytes: s.clusterMem,
		HolderMismatches: s.anomalies, PeakTrace: s.trace,
		Stealing: s.cfg.Stealing, StealsConfirmed: s.eng.StealStats().Confirmed,
		Cores: s.cfg.Cores, TaskOverheadS: s.cfg.TaskOverhead, TransferCPUS: s.cfg.TransferCPU,
		TransferCPUPerByte: s.cfg.TransferCPUPerByte, TransferWaitS: s.cfg.TransferWait,
		GIL: s.cfg.Cores > 0 && !s.cfg.NoGIL, DurationSpread: s.cfg.DurationSpread, WorkerSpeedSpread: s.cfg.WorkerSpeedSpread, Memory: s.cfg.Mem, Calibration: s.cfg.Calibration}
	if !s.cfg.NoAMM {
		r.AMMIntervalS = s.cfg.AMMInterval
	}
	r.ReplicasDropped = s.replicasDropped
	r.SpilledBytes, r.Spill = s.spilledBytes, !s.cfg.NoSpill
	cpu, raw := s.clock.total()
	r.EngineClock, r.EngineTimed = s.clock.mode, s.clock.timed
	r.EngineCPUS, r.EngineCPURawS = cpu.Seconds(), raw.Seconds()
	r.EngineClockNs = float64(s.clock.cost.Nanoseconds())
	r.EngineWallS = s.clock.wallSum.Seconds()
	if len(s.g.Tasks) > 0 {
		r.EngineCPUUsPerTask = float64(cpu.Nanoseconds()) / 1e3 / float64(len(s.g.Tasks))
	}
	for _, w := range s.workers {
		if w.active { // the worker's unmanaged growth stays with the process, it is no leak
			r.LeakedBytes -= s.cfg.Mem.WorkerUnmanaged
		}
		r.PeakWorkerMemoryBytes = max(r.PeakWorkerMemoryBytes, w.peak)
		if w.overLimit {
			r.WorkersOverLimit++
		}
	}
	return r
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
