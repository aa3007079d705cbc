package sim

import (
	"math"
	"testing"
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
