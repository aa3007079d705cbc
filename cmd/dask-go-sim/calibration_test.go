package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"daskgo/cmd/dask-go-sim/internal/sim"
)

// configFrom is the sim.Config a run gets from these command-line flags
// (4 workers, mode main).
func configFrom(t *testing.T, args ...string) sim.Config {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var cf clusterFlags
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := cf.resolve(fs); err != nil {
		t.Fatal(err)
	}
	cfg, err := cf.config(4, "main")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The calibration file fills the cluster terms, a flag given on the
// command line wins over it, and the terms reach sim.Config.
func TestCalibrationFileUnderFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calibration.json")
	doc := `{"sim": {"task_overhead_s": 0.003, "transfer_cpu_s": 0.002, "transfer_cpu_s_per_byte": 1.5e-9,
		"transfer_wait_s": 0.014, "receive_early": true, "worker_unmanaged_bytes": 15000000}}`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := configFrom(t, "-calibration", path, "-task-overhead", "0.5", "-cores", "2")
	if cfg.TaskOverhead != 0.5 {
		t.Errorf("task overhead %v: the explicit flag must win over the file's 0.003", cfg.TaskOverhead)
	}
	if cfg.TransferCPU != 0.002 || cfg.TransferCPUPerByte != 1.5e-9 || cfg.TransferWait != 0.014 || cfg.Cores != 2 {
		t.Errorf("transfer terms %v %v %v, cores %v", cfg.TransferCPU, cfg.TransferCPUPerByte, cfg.TransferWait, cfg.Cores)
	}
	if !cfg.Mem.ReceiveEarly || cfg.Mem.WorkerUnmanaged != 15000000 || cfg.Calibration != path {
		t.Errorf("memory terms %+v, calibration %q", cfg.Mem, cfg.Calibration)
	}
}

// The calibrated engine bandwidth sets -bandwidth only with -cores (where
// it feeds nothing but the engine's transfer estimate); without -cores the
// links keep theirs, and an explicit -bandwidth wins.
func TestCalibratedEngineBandwidthOnlyWithCores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calibration.json")
	if err := os.WriteFile(path, []byte(`{"sim": {"engine_bandwidth_bytes_s": 2.5e8, "worker_idle_bytes": 7}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want float64
	}{
		{[]string{"-cores", "2"}, 2.5e8},
		{nil, 1e9},
		{[]string{"-cores", "2", "-bandwidth", "5e8"}, 5e8},
	} {
		cfg := configFrom(t, append([]string{"-calibration", path}, tc.args...)...)
		if cfg.Bandwidth != tc.want || cfg.Mem.WorkerIdle != 7 {
			t.Errorf("%v: bandwidth %v (want %v), worker idle %d", tc.args, cfg.Bandwidth, tc.want, cfg.Mem.WorkerIdle)
		}
	}
}
