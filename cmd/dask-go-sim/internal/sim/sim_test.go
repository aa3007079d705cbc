package sim

import (
	"math"
	"testing"
)

func mustSynthetic(t *testing.T, spec string) *Graph {
	t.Helper()
	g, err := Synthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustRun(t *testing.T, g *Graph, cfg Config) *Result {
	t.Helper()
	r, err := Run(g, cfg)
	if err != nil {
		t.Fatalf("%s %s on %d workers: %v", g.Workload, cfg.Mode, cfg.Workers, err)
	}
	return r
}

// simulated facts only: the timing fields differ between identical runs
func facts(r *Result) Result {
	c := *r
	c.EngineCPUS, c.EngineCPUUsPerTask, c.SimWallS = 0, 0, 0
	c.EngineCPURawS, c.EngineClockNs, c.EngineWallS = 0, 0, 0
	return c
}

// Every mode, with the engine's invariant checks after every step: the
// client gets every result, and once it releases them every worker has
// freed everything (data is held until the scheduler frees it).
func TestRunAllModesValidated(t *testing.T) {
	for _, spec := range []string{"tree:300", "indep:100"} {
		for _, mode := range Modes {
			g := mustSynthetic(t, spec)
			r := mustRun(t, g, Config{Workers: 3, Threads: 2, Mode: mode, Validate: true})
			if r.LeakedBytes != 0 {
				t.Errorf("%s %s: %d bytes still held after release", spec, mode, r.LeakedBytes)
			}
			if r.NTasks != len(g.Tasks) || r.MakespanS <= 0 || r.EngineHandles == 0 {
				t.Errorf("%s %s: implausible result %+v", spec, mode, r)
			}
			if r.PeakWorkerMemoryBytes > r.PeakClusterMemoryBytes || r.PeakWorkerMemoryBytes <= 0 {
				t.Errorf("%s %s: peak worker %d vs cluster %d", spec, mode, r.PeakWorkerMemoryBytes, r.PeakClusterMemoryBytes)
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, mode := range Modes {
		g := mustSynthetic(t, "tree:500")
		cfg := Config{Workers: 7, Threads: 2, Mode: mode, Seed: 42}
		a, b := facts(mustRun(t, g, cfg)), facts(mustRun(t, g, cfg))
		if a != b {
			t.Errorf("%s: two runs with seed 42 differ:\n%+v\n%+v", mode, a, b)
		}
	}
}

// Independent 1 s tasks on W*T threads: the makespan is the number of
// waves plus the final sum and the latencies; every output (1 MiB) is
// held until the sum has run, so the cluster peak holds them all; the
// sum's inputs not on its own worker cross the network.
func TestIndependentTasksPhysics(t *testing.T) {
	const n, workers, threads = 60, 4, 3
	for _, mode := range Modes {
		g := mustSynthetic(t, "indep:60")
		r := mustRun(t, g, Config{Workers: workers, Threads: threads, Mode: mode, Bandwidth: 1 << 30, Latency: 0.001})
		waves := math.Ceil(float64(n) / (workers * threads))
		if r.MakespanS < waves || r.MakespanS > waves+0.5 {
			t.Errorf("%s: makespan %.3f s, want %.0f waves of 1 s plus < 0.5 s", mode, r.MakespanS, waves)
		}
		if r.PeakClusterMemoryBytes < n<<20 {
			t.Errorf("%s: peak %d < the %d outputs of 1 MiB", mode, r.PeakClusterMemoryBytes, n)
		}
		if r.TransferredBytes%(1<<20) != 0 || r.TransferredBytes < (n-n/workers-threads*2)<<20 || r.TransferredBytes > n<<20 {
			t.Errorf("%s: transferred %d bytes, want most of the %d outputs moved once", mode, r.TransferredBytes, n)
		}
	}
}

// The simulator must show what the engine does: with withholding alone,
// siblings of a reduction land on different workers and the tree's inputs
// cross the network, and so they do with no co-location at all (off);
// co-assignment (main's and ours) keeps them local.
func TestCoAssignmentSavesTransfers(t *testing.T) {
	g := mustSynthetic(t, "tree:2000")
	by := map[string]*Result{}
	for _, mode := range Modes {
		by[mode] = mustRun(t, g, Config{Workers: 4, Threads: 2, Mode: mode})
	}
	for _, co := range []string{"main", "coassign"} {
		if 2*by[co].TransferredBytes >= by["off"].TransferredBytes {
			t.Errorf("%s transferred %d bytes, off %d: want co-assignment to move far less",
				co, by[co].TransferredBytes, by["off"].TransferredBytes)
		}
		if 2*by[co].TransferredBytes >= by["withholding"].TransferredBytes {
			t.Errorf("%s transferred %d bytes, withholding %d: want co-assignment to move far less",
				co, by[co].TransferredBytes, by["withholding"].TransferredBytes)
		}
	}
}

// A larger network latency can only delay results.
func TestLatencyDelays(t *testing.T) {
	g := mustSynthetic(t, "tree:200")
	fast := mustRun(t, g, Config{Workers: 4, Mode: "withholding", Latency: 0.001})
	slow := mustRun(t, g, Config{Workers: 4, Mode: "withholding", Latency: 0.2})
	if slow.MakespanS <= fast.MakespanS {
		t.Errorf("latency 0.2 s: makespan %.3f, latency 1 ms: %.3f", slow.MakespanS, fast.MakespanS)
	}
}

func TestConfigRejects(t *testing.T) {
	g := mustSynthetic(t, "tree:4")
	for _, cfg := range []Config{{Workers: 0, Mode: "off"}, {Workers: 2, Mode: "fast"}, {Workers: 2, Mode: "off", Latency: -1}} {
		if _, err := Run(g, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	if _, err := Synthetic("tree:0"); err == nil {
		t.Error("tree:0 accepted")
	}
	if _, err := Synthetic("ring:5"); err == nil {
		t.Error("unknown synthetic kind accepted")
	}
}

// The peak trace accounts for the peak: its parts add up to what it
// recorded, and that is within 1 % of the run's peak.
func TestPeakTraceAddsUp(t *testing.T) {
	g := mustSynthetic(t, "tree:400")
	res := mustRun(t, g, Config{Workers: 3, Mode: "withholding", TracePeak: true})
	tr := res.PeakTrace
	if tr == nil {
		t.Fatal("no peak trace")
	}
	if tr.TotalBytes > res.PeakClusterMemoryBytes || tr.TotalBytes < res.PeakClusterMemoryBytes*99/100 {
		t.Errorf("trace total %d, peak %d", tr.TotalBytes, res.PeakClusterMemoryBytes)
	}
	var byPrefix, perWorker int64
	for _, p := range tr.ByPrefix {
		byPrefix += p.Bytes
	}
	for _, b := range tr.PerWorker {
		perWorker += b
	}
	if perWorker != tr.TotalBytes || byPrefix+tr.TransientBytes != tr.TotalBytes {
		t.Errorf("parts: workers %d, prefixes %d + transient %d, total %d", perWorker, byPrefix, tr.TransientBytes, tr.TotalBytes)
	}
	if len(tr.ByPrefix) == 0 || tr.ReplicaBytes > byPrefix {
		t.Errorf("trace %+v", tr)
	}
	if untraced := mustRun(t, g, Config{Workers: 3, Mode: "withholding"}); untraced.PeakTrace != nil {
		t.Error("trace without TracePeak")
	}
}
