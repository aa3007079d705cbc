package sim

import (
	"math"
	"testing"

	"daskgo/protocol"
)

// TestDurationSpreadKeepsTheMeanAndIsReproducible: the factor on each
// execution averages 1 with the configured sigma in log space, the same
// (task, run) always gets the same duration, and a spread of 0 leaves
// Duration + TaskOverhead exact.
func TestDurationSpreadKeepsTheMeanAndIsReproducible(t *testing.T) {
	const n = 20000
	g := &Graph{Tasks: make([]Task, n)}
	for i := range g.Tasks {
		g.Tasks[i].Duration = 2
	}
	s := &Sim{cfg: Config{DurationSpread: 0.3, Seed: 7, TaskOverhead: 0.5}, g: g}
	var sum, sumLog, sumLog2 float64
	for i := int32(0); i < n; i++ {
		w := s.taskWork(i, 1)
		if w != s.taskWork(i, 1) {
			t.Fatalf("task %d: two draws for one execution", i)
		}
		f := (w - 0.5) / 2
		sum += f
		sumLog += math.Log(f)
		sumLog2 += math.Log(f) * math.Log(f)
	}
	mean := sum / n
	sigma := math.Sqrt(sumLog2/n - (sumLog/n)*(sumLog/n))
	if math.Abs(mean-1) > 0.01 || math.Abs(sigma-0.3) > 0.01 {
		t.Errorf("factor mean %.4f (want 1), log sigma %.4f (want 0.3)", mean, sigma)
	}
	if s.taskWork(3, 1) == s.taskWork(3, 2) {
		t.Error("a re-run of a task drew the same factor")
	}
	s.cfg.DurationSpread = 0
	if w := s.taskWork(3, 1); w != 2.5 {
		t.Errorf("no spread: work %v, want 2.5", w)
	}
}

// TestWorkerSpeedSpread: each worker draws one factor from the seed (mean
// 1, the configured sigma in log space, the same on every call), and a
// worker's tasks take that factor times their work: on a cluster of
// single-task workers the makespans differ as the factors do.
func TestWorkerSpeedSpread(t *testing.T) {
	const n = 20000
	s := &Sim{cfg: Config{WorkerSpeedSpread: 0.05, Seed: 3}}
	var sum, sumLog, sumLog2 float64
	for i := range n {
		f := s.workerSpeed(i)
		if f != s.workerSpeed(i) {
			t.Fatalf("worker %d: two factors", i)
		}
		sum += f
		sumLog += math.Log(f)
		sumLog2 += math.Log(f) * math.Log(f)
	}
	if mean, sigma := sum/n, math.Sqrt(sumLog2/n-(sumLog/n)*(sumLog/n)); math.Abs(mean-1) > 0.002 || math.Abs(sigma-0.05) > 0.002 {
		t.Errorf("factor mean %.4f (want 1), log sigma %.4f (want 0.05)", mean, sigma)
	}
	s.cfg.WorkerSpeedSpread = 0
	if f := s.workerSpeed(5); f != 1 {
		t.Errorf("no spread: factor %v", f)
	}

	g := &Graph{Workload: "one-task", Scale: "synthetic"}
	g.add(protocol.StrKey("only"), nil, 10, 8, 0)
	one := Config{Workers: 1, Threads: 1, Mode: "main", Seed: 3, NoAMM: true}
	base := mustRun(t, g, one)
	one.WorkerSpeedSpread = 0.2
	slow := mustRun(t, g, one)
	f := (&Sim{cfg: one}).workerSpeed(0)
	if got, want := slow.MakespanS-base.MakespanS, (f-1)*10; f == 1 || math.Abs(got-want) > 1e-9 {
		t.Errorf("factor %.4f: the 10 s task took %.6f s longer, want %.6f", f, got, want)
	}
}
