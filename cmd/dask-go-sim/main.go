// Command dask-go-sim drives the real scheduler engine (package scheduler)
// with simulated workers: a deterministic discrete-event simulation of a
// dask cluster of 5 to 1,000 workers running an exported task graph.
//
//	dask-go-sim run    -graph FILE | -synthetic tree:N   -workers N -mode M
//	dask-go-sim sweep  [-workloads a,b] [-workers 5,20,...] [-modes ...]
//	dask-go-sim report [-results DIR]
//
// Graphs come from scripts/export-graph.py (scripts/sim/graphs/); results
// go to scripts/sim/results/ (scripts/sim/README.md). The simulation logic
// lives in internal/sim; this file only parses flags.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"daskgo/cmd/dask-go-sim/internal/sim"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = cmdRun(os.Args[2:])
	case "sweep":
		err = cmdSweep(os.Args[2:])
	case "report":
		err = cmdReport(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dask-go-sim: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: dask-go-sim run|sweep|report [flags]  (-h for flags)")
	os.Exit(2)
}

// clusterFlags are the flags shared by run and sweep.
type clusterFlags struct {
	threads   int
	memory    string
	bandwidth float64
	latency   float64
	seed      uint64
	validate  bool

	cores                           float64
	taskOverhead, durationSpread    float64
	workerSpeedSpread               float64
	transferCPU, transferCPUPerByte float64
	transferWait                    float64
	receiveEarly                    bool
	workerUnmanaged                 string
	calibration                     string
	noAMM, noSpill, noGIL           bool
	ammInterval, monitorInterval    float64
	workerIdle                      string
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&c.threads, "threads", 2, "threads per worker")
	fs.StringVar(&c.memory, "memory-limit", "8GiB", "memory limit per worker")
	fs.Float64Var(&c.bandwidth, "bandwidth", 1e9, "bytes/s per worker link and direction")
	fs.Float64Var(&c.latency, "latency", 0.001, "seconds per message and transfer")
	fs.Uint64Var(&c.seed, "seed", 1, "seed (holder choice among replicas)")
	fs.BoolVar(&c.validate, "validate", false, "engine invariant checks after every step (slow)")
	fs.Float64Var(&c.cores, "cores", 0, "cores shared by all executing tasks and transfers of the cluster "+
		"(processor sharing; 0: a core per thread)")
	fs.BoolVar(&c.noGIL, "no-gil", false, "with -cores: every transfer a share of the cores of its own "+
		"(by default a worker's transfers take turns with its tasks, as under one interpreter lock)")
	fs.Float64Var(&c.taskOverhead, "task-overhead", 0, "seconds of worker work added to every task")
	fs.Float64Var(&c.durationSpread, "duration-spread", 0, "sigma of a log-normal factor (mean 1) on every execution's duration")
	fs.Float64Var(&c.workerSpeedSpread, "worker-speed-spread", 0, "sigma of a log-normal factor (mean 1) on all the work of each worker, drawn once per worker")
	fs.Float64Var(&c.transferCPU, "transfer-cpu", 0, "with -cores: CPU seconds per transfer")
	fs.Float64Var(&c.transferCPUPerByte, "transfer-cpu-per-byte", 0, "with -cores: CPU seconds per byte transferred")
	fs.Float64Var(&c.transferWait, "transfer-wait", 0, "with -cores: seconds each transfer waits besides its CPU work")
	fs.BoolVar(&c.receiveEarly, "receive-early", false, "a transfer's bytes count on its destination from its start")
	fs.StringVar(&c.workerUnmanaged, "worker-unmanaged", "0", "unmanaged bytes a worker grows by once it runs tasks")
	fs.BoolVar(&c.noSpill, "no-spill", false, "workers never spill to disk (they do by default, at distributed's thresholds)")
	fs.StringVar(&c.workerIdle, "worker-idle", "0", "an idle worker's memory, which its spill threshold counts")
	fs.Float64Var(&c.monitorInterval, "monitor-interval", 0.1, "seconds between two checks of a worker's memory monitor")
	fs.BoolVar(&c.noAMM, "no-amm", false, "active memory manager off (on by default, as in distributed)")
	fs.Float64Var(&c.ammInterval, "amm-interval", 2, "seconds between active memory manager cycles")
	fs.StringVar(&c.calibration, "calibration", "", "calibration.json (scripts/sim/calibrate.py): defaults for "+
		"-task-overhead, -transfer-cpu*, -transfer-wait, -receive-early, -worker-unmanaged, -worker-idle, -worker-speed-spread")
}

// resolve applies the calibration file, if any, under the explicit flags.
func (c *clusterFlags) resolve(fs *flag.FlagSet) error {
	if c.calibration == "" {
		return nil
	}
	cal, err := loadCalibration(c.calibration)
	if err != nil {
		return err
	}
	cal.apply(c, explicit(fs))
	return nil
}

func (c *clusterFlags) config(workers int, mode string) (sim.Config, error) {
	mem, err := parseBytes(c.memory)
	if err != nil {
		return sim.Config{}, err
	}
	unmanaged, err := optBytes("worker-unmanaged", c.workerUnmanaged)
	if err != nil {
		return sim.Config{}, err
	}
	idle, err := optBytes("worker-idle", c.workerIdle)
	if err != nil {
		return sim.Config{}, err
	}
	return sim.Config{Workers: workers, Threads: c.threads, MemoryLimit: mem, Bandwidth: c.bandwidth,
		Latency: c.latency, Mode: mode, Seed: c.seed, Validate: c.validate, NoAMM: c.noAMM, AMMInterval: c.ammInterval, NoSpill: c.noSpill, NoGIL: c.noGIL,
		MonitorInterval: c.monitorInterval, Cores: c.cores, TaskOverhead: c.taskOverhead, DurationSpread: c.durationSpread,
		WorkerSpeedSpread: c.workerSpeedSpread, TransferCPU: c.transferCPU,
		TransferCPUPerByte: c.transferCPUPerByte, TransferWait: c.transferWait, Calibration: c.calibration,
		Mem: sim.MemoryModel{ReceiveEarly: c.receiveEarly, WorkerUnmanaged: unmanaged, WorkerIdle: idle}}, nil
}

// optBytes parses a byte-size flag whose "0" or empty value means none.
func optBytes(flag, v string) (int64, error) {
	if v == "0" || v == "" {
		return 0, nil
	}
	n, err := parseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("-%s: %w", flag, err)
	}
	return n, nil
}

func cmdRun(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var cf clusterFlags
	cf.register(fs)
	graph := fs.String("graph", "", "exported graph file (.jsonl.gz)")
	synthetic := fs.String("synthetic", "", "synthetic graph: tree:N or indep:N")
	workers := fs.Int("workers", 20, "number of workers")
	mode := fs.String("mode", "withholding", "off | main | withholding | coassign")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile here")
	tracePeak := fs.Bool("trace-peak", false, "add peak_trace: the data held at peak memory, by prefix and worker")
	digest := fs.Bool("digest", false, "add outbox_digest: a hash of every message the engine sent and its last transitions")
	stealing := fs.Bool("stealing", false, "work stealing on (a steal tick every -steal-interval seconds)")
	stealInterval := fs.Float64("steal-interval", 1, "seconds between steal ticks (distributed's work-stealing-interval)")
	engineClock := fs.String("engine-clock", "wall-scaled", "how the engine's CPU is timed: wall-scaled | thread (internal/sim/engineclock.go)")
	coDepth := fs.Int("co-family-depth", 0, "co-assignment families: levels of dependents (0: the engine's default; negative: contiguous priority runs)")
	_ = fs.Parse(args)
	if err := cf.resolve(fs); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	g, err := loadGraph(*graph, *synthetic)
	if err != nil {
		return err
	}
	cfg, err := cf.config(*workers, *mode)
	if err != nil {
		return err
	}
	cfg.TracePeak, cfg.Digest = *tracePeak, *digest
	cfg.Stealing, cfg.StealInterval = *stealing, *stealInterval
	cfg.CoFamilyDepth, cfg.EngineClock = *coDepth, *engineClock
	res, err := sim.Run(g, cfg)
	if err != nil {
		return fmt.Errorf("%s on %d workers (%s): %w", g.Workload, *workers, *mode, err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

func loadGraph(path, synthetic string) (*sim.Graph, error) {
	switch {
	case synthetic != "" && path != "":
		return nil, fmt.Errorf("give -graph or -synthetic, not both")
	case synthetic != "":
		return sim.Synthetic(synthetic)
	case path != "":
		return sim.LoadGraph(path)
	}
	return nil, fmt.Errorf("no graph: give -graph FILE or -synthetic tree:N")
}

// parseBytes reads "8GiB", "500MB", "1e9".
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("bad byte size %q", s)
	}
	return int64(f * mult), nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
