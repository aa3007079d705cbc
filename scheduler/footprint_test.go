package scheduler

import (
	"fmt"
	"testing"
	"time"
)

// runToEnd finishes every task the engine sends to a worker, until it
// sends no more; it returns how many it finished.
func (s *tstate) runToEnd(out Outbox) int {
	s.t.Helper()
	done := 0
	pending := []Outbox{out}
	for len(pending) > 0 {
		next := pending[0]
		pending = pending[1:]
		for w, keys := range allComputeTasks(next) {
			for _, key := range keys {
				if ts := s.Task(k(key)); ts == nil || ts.processingOn == nil {
					continue
				}
				pending = append(pending, s.finish(w[len("tcp://"):len(w)-len(":8000")], key))
				done++
			}
		}
	}
	return done
}

// reduction is n roots, pair sums above them and one total on top.
func reduction(prefix string, n int) []GraphTask {
	g := rootTasks(prefix+"-root", n)
	var sums []string
	for i := 0; i+1 < n; i += 2 {
		key := fmt.Sprintf("%s-sum-%d", prefix, i/2)
		g = append(g, task(key, fmt.Sprintf("%s-root-%d", prefix, i), fmt.Sprintf("%s-root-%d", prefix, i+1)))
		sums = append(sums, key)
	}
	return append(g, task(prefix+"-total", sums...))
}

func wantNoTaskState(t *testing.T, s *tstate, when string) {
	t.Helper()
	f := s.Footprint()
	if f.PerTask() != 0 {
		t.Fatalf("%s: state of forgotten tasks survives: %+v", when, f)
	}
}

// TestForgottenGraphLeavesNoState: after a graph is computed and released,
// cancelled mid-way (withheld roots queued, co-assignment runs open),
// failed, or its client gone, the engine holds nothing per task; prefixes
// remain (their duration estimates).
func TestForgottenGraphLeavesNoState(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []option
		// stealing: whether a steal is in flight at the cancel (withheld
		// roots are never stolen: only without withholding is there a
		// backlog of stealable roots)
		stealing bool
	}{
		{"withholding off", []option{withSaturation(inf)}, true},
		{"withholding", []option{withSaturation(1.0)}, false},
		{"withholding and co-assignment", []option{withSaturation(1.0), withCoAssignment(true)}, false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := newTestState(t, append(mode.opts, withWorkers("w1:2", "w2:2"))...)
			base := s.Footprint()

			out := s.submit("c1", reduction("done", 40), "done-total")
			eq(t, s.runToEnd(out), 40+20+1, "tasks computed")
			s.wantStatus("done-total", "memory")
			s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("done-total")})
			wantNoTaskState(t, s, "computed and released")

			out = s.submit("c1", reduction("cancel", 40), "cancel-total")
			for w, ks := range allComputeTasks(out) { // half the first wave finishes
				s.finish(w[len("tcp://"):len(w)-len(":8000")], ks[0])
			}
			s.addWorker("late", 2) // an idle thief
			s.clock = s.clock.Add(2 * time.Second)
			s.handle(&StealTick{})
			if got := len(s.steal.inFlight) > 0; got != mode.stealing {
				t.Fatalf("steals in flight at the cancel: %d; want some: %v", len(s.steal.inFlight), mode.stealing)
			}
			s.handle(&CancelKeys{Client: "c1", Keys: keys("cancel-total")})
			wantNoTaskState(t, s, "cancelled mid-way")

			out = s.submit("c1", reduction("fail", 4), "fail-total")
			for w, ks := range allComputeTasks(out) {
				s.fail(w[len("tcp://"):len(w)-len(":8000")], ks[0])
				break
			}
			s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("fail-total")})
			wantNoTaskState(t, s, "failed and released")

			s.handle(&AddClient{Client: "c2"})
			s.submit("c2", reduction("gone", 10), "gone-total")
			s.handle(&RemoveClient{Client: "c2"})
			wantNoTaskState(t, s, "client gone holding futures")

			f := s.Footprint()
			eq(t, f.Clients, base.Clients, "clients")
			eq(t, f.Workers, base.Workers+1, "workers (one joined)")
			eq(t, f.Prefixes, 4*3, "prefixes kept for their durations (root, sum, total per graph name)")
		})
	}
}
