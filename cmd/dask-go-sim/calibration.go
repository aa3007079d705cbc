package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

// calibration is the "sim" section of scripts/sim/calibration.json, written
// by scripts/sim/calibrate.py from stock workers' traces: the cluster-side
// costs of the model (the per-task durations and sizes are in the exported
// graphs, see scripts/export-graph.py --calibration). Flags given on the
// command line override the file.
type calibration struct {
	Sim struct {
		TaskOverheadS      *float64 `json:"task_overhead_s"`
		TransferCPUS       *float64 `json:"transfer_cpu_s"`
		TransferCPUPerByte *float64 `json:"transfer_cpu_s_per_byte"`
		TransferWaitS      *float64 `json:"transfer_wait_s"`
		ReceiveEarly       *bool    `json:"receive_early"`
		WorkerUnmanaged    *int64   `json:"worker_unmanaged_bytes"`
		WorkerIdle         *int64   `json:"worker_idle_bytes"`
		// EngineBandwidth: the mean throughput of the traced workers'
		// transfers over 1 MB, which stock workers average into the
		// bandwidth their heartbeats report and the scheduler places tasks
		// by. With -cores transfers are CPU work and -bandwidth feeds only
		// the engine's estimate, so there it becomes -bandwidth; without
		// -cores -bandwidth is the simulated links' and stays as given.
		EngineBandwidth *float64 `json:"engine_bandwidth_bytes_s"`
		// WorkerSpeedSpread: how much the traced workers of one run
		// differed in speed (calibrate.py worker_speed).
		WorkerSpeedSpread *float64 `json:"worker_speed_spread"`
	} `json:"sim"`
}

func loadCalibration(path string) (*calibration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	var c calibration
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("calibration %s: %w", path, err)
	}
	return &c, nil
}

// apply sets every value of the file whose flag was not given explicitly.
func (c *calibration) apply(cf *clusterFlags, set map[string]bool) {
	s := c.Sim
	setF := func(name string, dst *float64, v *float64) {
		if v != nil && !set[name] {
			*dst = *v
		}
	}
	setF("task-overhead", &cf.taskOverhead, s.TaskOverheadS)
	setF("transfer-cpu", &cf.transferCPU, s.TransferCPUS)
	setF("transfer-cpu-per-byte", &cf.transferCPUPerByte, s.TransferCPUPerByte)
	setF("transfer-wait", &cf.transferWait, s.TransferWaitS)
	setF("worker-speed-spread", &cf.workerSpeedSpread, s.WorkerSpeedSpread)
	if s.ReceiveEarly != nil && !set["receive-early"] {
		cf.receiveEarly = *s.ReceiveEarly
	}
	if s.WorkerUnmanaged != nil && !set["worker-unmanaged"] {
		cf.workerUnmanaged = fmt.Sprint(*s.WorkerUnmanaged)
	}
	if s.EngineBandwidth != nil && *s.EngineBandwidth > 0 && cf.cores > 0 && !set["bandwidth"] {
		cf.bandwidth = *s.EngineBandwidth
	}
	if s.WorkerIdle != nil && !set["worker-idle"] {
		cf.workerIdle = fmt.Sprint(*s.WorkerIdle)
	}
}

// explicit lists the flags given on the command line.
func explicit(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
