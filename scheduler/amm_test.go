package scheduler

import (
	"fmt"
	"testing"

	"daskgo/protocol"
)

// ammReplicas sets up x in memory on w1 with waiters c (on w2, which then
// holds a fetched replica) and d (on w1), and returns the state.
func ammReplicas(t *testing.T, opts ...option) *tstate {
	s := newTestState(t, append([]option{withWorkers("w1:1", "w2:1")}, opts...)...)
	on := func(gt GraphTask, w string) GraphTask { return annotated(gt, "workers", []any{addr(w)}) }
	s.submit("c1", []GraphTask{on(task("x"), "w1")}, "x")
	s.finish("w1", "x")
	s.submit("c1", []GraphTask{on(task("c", "x"), "w2"), on(task("d", "x"), "w1")}, "c", "d")
	s.handle(&AddKeys{Worker: addr("w2"), Keys: keys("x")}) // w2 fetched x for c
	eq(t, s.Task(k("x")).whoHas.Len(), 2, "holders of x after the fetch")
	return s
}

func removed(out Outbox, w string) []protocol.Key {
	var got []protocol.Key
	for _, m := range msgsOp(out.Workers.Of(addr(w)), "remove-replicas") {
		got = append(got, m.Get("keys").([]protocol.Key)...)
	}
	return got
}

// TestAMMDropsReplicasNoWaiterNeeds: ReduceReplicas keeps a replica on
// every worker a waiter is processing on, and drops the fetched copy once
// its consumer there is done (remove-replicas to that worker, forgotten by
// the scheduler at once); off, nothing is dropped.
func TestAMMDropsReplicasNoWaiterNeeds(t *testing.T) {
	s := ammReplicas(t)
	out := s.handle(&AMMTick{})
	eq(t, len(removed(out, "w1"))+len(removed(out, "w2")), 0, "replicas dropped while c and d both need x")

	s.finish("w2", "c")
	out = s.handle(&AMMTick{})
	eq(t, len(removed(out, "w1")), 0, "replicas dropped from w1, where d runs")
	got := removed(out, "w2")
	if len(got) != 1 || got[0] != k("x") {
		t.Fatalf("remove-replicas to w2: %v, want [x]", got)
	}
	x := s.Task(k("x"))
	eq(t, x.whoHas.Len(), 1, "holders of x after the drop")
	eq(t, x.whoHas.Items()[0].Address, addr("w1"), "the holder kept")
	eq(t, s.replicated.Len(), 0, "replicated tasks after the drop")

	off := ammReplicas(t, func(c *Config, _ *[]string) { c.NoActiveMemoryManager = true })
	off.finish("w2", "c")
	out = off.handle(&AMMTick{})
	eq(t, len(removed(out, "w2")), 0, "replicas dropped with the AMM off")
	eq(t, off.Task(k("x")).whoHas.Len(), 2, "holders of x with the AMM off")
}

// TestAMMKeepsReplicasOfKeysWithTwentyWaiters: ReduceReplicas counts the
// workers waiters run on only for 2–19 waiters; from 20 on it keeps one
// replica per waiter, so a replica nobody on its worker needs survives.
func TestAMMKeepsReplicasOfKeysWithTwentyWaiters(t *testing.T) {
	for _, tc := range []struct {
		waiters, dropped int
	}{{19, 1}, {20, 0}} {
		s := newTestState(t, withWorkers("w1:1", "w2:1"))
		on := func(gt GraphTask, w string) GraphTask { return annotated(gt, "workers", []any{addr(w)}) }
		s.submit("c1", []GraphTask{on(task("x"), "w1")}, "x")
		s.finish("w1", "x")
		var gts []GraphTask
		var want []string
		for i := range tc.waiters {
			name := fmt.Sprintf("d%d", i)
			gts = append(gts, on(task(name, "x"), "w1"))
			want = append(want, name)
		}
		s.submit("c1", gts, want...)
		s.handle(&AddKeys{Worker: addr("w2"), Keys: keys("x")}) // a stray replica on w2
		for _, d := range want {
			eq(t, s.Task(k(d)).processingOn.Address, addr("w1"), "worker of "+d)
		}
		out := s.handle(&AMMTick{})
		eq(t, len(removed(out, "w2")), tc.dropped, fmt.Sprintf("replicas dropped from w2 with %d waiters on w1", tc.waiters))
		eq(t, len(removed(out, "w1")), 0, "replicas dropped from w1")
	}
}
