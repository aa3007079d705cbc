package scheduler

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"daskgo/protocol"
)

// Work stealing (steal.go, steal_races.go): the cost model, balance,
// and every race of the steal-request / steal-response exchange, as
// deterministic stimulus sequences.

// stealCluster builds the usual stealing situation: w1 (1 thread) runs n
// non-root tasks slow-0..slow-n-1, each needing one of five scattered keys
// d-0..d-4 of 8 bytes (so the tasks are not root-ish and are placed on
// their data), held by w1 only. They were placed while w2 was paused; then
// w2 runs: an idle thief next to a backlogged victim. Durations are
// unknown, so each task is priced at unknown-task-duration (0.5 s).
func stealCluster(t *testing.T, n int, opts ...option) *tstate {
	t.Helper()
	return stealClusterHeld(t, n, []string{"w1"}, opts...)
}

// stealClusterHeld is stealCluster with the scattered keys held by holders.
func stealClusterHeld(t *testing.T, n int, holders []string, opts ...option) *tstate {
	t.Helper()
	s := newTestState(t, append([]option{withWorkers("w1:1")}, opts...)...)
	s.addWorker("w2", 1, func(aw *AddWorker) { aw.Status = "paused" })
	whoHas := map[protocol.Key][]string{}
	nbytes := map[protocol.Key]int64{}
	var addrs []string
	for _, h := range holders {
		addrs = append(addrs, addr(h))
	}
	for i := 0; i < 5; i++ {
		whoHas[k(fmt.Sprintf("d-%d", i))] = addrs
		nbytes[k(fmt.Sprintf("d-%d", i))] = 8
	}
	s.handle(&UpdateData{Client: "c1", WhoHas: whoHas, NBytes: nbytes})
	var tasks []GraphTask
	for i := 0; i < n; i++ {
		tasks = append(tasks, task(fmt.Sprintf("slow-%d", i), fmt.Sprintf("d-%d", i%5)))
	}
	s.submit("c1", tasks)
	for i := 0; i < n; i++ {
		s.wantOn(fmt.Sprintf("slow-%d", i), "w1")
	}
	s.handle(&WorkerStatusChange{Worker: addr("w2"), Status: "running"})
	return s
}

type stealReq struct{ key, sid string }

// stealRequests lists the steal-requests sent to worker, checking their
// exact fields.
func stealRequests(t *testing.T, out Outbox, worker string) []stealReq {
	t.Helper()
	var reqs []stealReq
	for _, m := range msgsOp(out.Workers.Of(addr(worker)), "steal-request") {
		eqSlice(t, fieldNames(m), []string{"op", "key", "stimulus_id"}, "steal-request fields")
		reqs = append(reqs, stealReq{msgKey(m), m.Get("stimulus_id").(string)})
	}
	return reqs
}

// allStealRequests counts the steal-requests to every worker.
func allStealRequests(out Outbox) int {
	n := 0
	for _, p := range out.Workers {
		n += len(msgsOp(p.Msgs, "steal-request"))
	}
	return n
}

func (s *tstate) stealTick() Outbox {
	s.t.Helper()
	return s.handle(&StealTick{})
}

func (s *tstate) stealAnswer(worker, key, state, sid string) Outbox {
	s.t.Helper()
	return s.handle(&StealResponse{Base: Base{ID: sid}, Worker: addr(worker), Key: k(key), State: state})
}

// wantOn checks that key is processing on worker.
func (s *tstate) wantOn(key, worker string) {
	s.t.Helper()
	ts := s.Task(k(key))
	if ts == nil || ts.state != StatusProcessing || ts.processingOn.Address != addr(worker) {
		s.t.Fatalf("task %s is not processing on %s\n%s", key, worker, s.storyString(k(key)))
	}
}

// wantStats compares the counters that matter to a test.
func (s *tstate) wantStats(want StealStats) {
	s.t.Helper()
	got := s.StealStats()
	got.RequestsByLevel, got.CostByLevel = [stealLevels]int64{}, [stealLevels]float64{}
	if got != want {
		s.t.Fatalf("steal stats:\n got %+v\nwant %+v", got, want)
	}
}

// ---- balance ---------------------------------------------------------------------

// TestStealBalanceRequestsFromBacklog: w1 holds 10 tasks priced 0.5 s, w2
// is idle. Each steal must leave the thief less busy than the victim
// (occ(thief) + compute <= occ(victim) - compute/2, with the in-flight
// moves counted): 0.5 <= 4.75, 1.0 <= 4.25, 1.5 <= 3.75; after the third
// w2 (1.5 s) is no longer unoccupied (< half the 2.5 s average), so
// balance stops there. The last tasks added go first.
func TestStealBalanceRequestsFromBacklog(t *testing.T) {
	s := stealCluster(t, 10)
	out := s.stealTick()
	reqs := stealRequests(t, out, "w1")
	eqSlice(t, reqs, []stealReq{{"slow-9", "steal-0"}, {"slow-8", "steal-1"}, {"slow-7", "steal-2"}}, "requests")
	eq(t, allStealRequests(out), 3, "requests go to the victim only")
	eq(t, countCompute(out), 0, "nothing moves before the answers")
	for _, key := range []string{"slow-9", "slow-8", "slow-7"} {
		s.wantOn(key, "w1")
	}
	st := s.StealStats()
	eq(t, st.Requests, 3, "requests")
	eq(t, st.InFlight, 3, "in flight")
	eq(t, st.Balances, 1, "balances")
	eq(t, st.RequestsByLevel[4], 3, "all at level 4 (0.1 s latency / 0.5 s compute)")
	// in_flight_occupancy: the victim gives 3 x 0.5 s away, the thief takes them
	// (the thief's includes fetching the 8-byte inputs: 8e-8 s each)
	w1, w2 := s.workers[addr("w1")], s.workers[addr("w2")]
	eq(t, w1.steal.inOcc, -1.5, "victim in-flight occupancy")
	near(t, w2.steal.inOcc, 1.5+3*8/s.bandwidth, "thief in-flight occupancy")
	eq(t, w1.steal.inTasks, -3, "victim in-flight tasks")
	eq(t, w2.steal.inTasks, 3, "thief in-flight tasks")
	ev := s.Events("stealing")
	eq(t, len(ev), 1, "one request event per balance")
}

// ---- what is never stolen ------------------------------------------------------

// TestStealRespectsRestrictions: a task restricted to w1 is never requested
// for w2 (_get_thief); with allow_other_workers it is.
func TestStealRespectsRestrictions(t *testing.T) {
	for _, loose := range []bool{false, true} {
		t.Run(fmt.Sprintf("loose=%v", loose), func(t *testing.T) {
			s := newTestState(t, withWorkers("w1:1"))
			var tasks []GraphTask
			for i := 0; i < 10; i++ {
				tasks = append(tasks, annotated(task(fmt.Sprintf("pinned-%d", i)),
					"workers", []any{addr("w1")}, "allow_other_workers", loose))
			}
			s.submit("c1", tasks)
			s.addWorker("w2", 1)
			out := s.stealTick()
			got := len(stealRequests(t, out, "w1"))
			if loose && got == 0 {
				t.Fatal("loose restrictions: nothing requested")
			}
			if !loose && got != 0 {
				t.Fatalf("restricted to w1 but %d requested", got)
			}
		})
	}
}

// TestStealNeverTakesWithheldRoots: with withholding (and with
// co-assignment), queued roots are in no level, and neither are the roots
// the queue placed: only the ordinary tasks of the backlog are requested.
// w2 is a thief here because it is unoccupied by occupancy (two roots,
// 1 s) while w1 holds 6 s: the queue is not empty, so no worker has a free
// slot.
func TestStealNeverTakesWithheldRoots(t *testing.T) {
	for _, co := range []bool{false, true} {
		t.Run(fmt.Sprintf("coassign=%v", co), func(t *testing.T) {
			s := newTestState(t, withWorkers("w1:1"), withSaturation(1.1), func(c *Config, _ *[]string) {
				c.RootTaskCoAssignment = co
			})
			s.submit("c1", rootTasks("root", 20))
			eq(t, s.Task(k("root-0")).state, StatusProcessing, "root-0")
			whoHas := map[protocol.Key][]string{}
			for i := 0; i < 5; i++ {
				whoHas[k(fmt.Sprintf("d-%d", i))] = []string{addr("w1")}
			}
			s.handle(&UpdateData{Client: "c1", WhoHas: whoHas})
			var tasks []GraphTask
			for i := 0; i < 10; i++ {
				tasks = append(tasks, task(fmt.Sprintf("slow-%d", i), fmt.Sprintf("d-%d", i%5)))
			}
			s.submit("c1", tasks)
			s.addWorker("w2", 1)
			queued := 0
			for _, ts := range s.tasks.all() {
				if ts.state == StatusQueued {
					queued++
				}
				if strings.HasPrefix(ts.Key.String(), "root") && ts.stealable() {
					t.Fatalf("root %s (%s) is stealable", ts.Key, ts.state)
				}
			}
			if queued == 0 {
				t.Fatal("nothing queued: the test needs withheld roots")
			}
			if !s.idle.Has(s.workers[addr("w2")]) {
				t.Fatal("w2 should be a thief")
			}
			out := s.stealTick()
			reqs := stealRequests(t, out, "w1")
			if len(reqs) == 0 {
				t.Fatal("nothing requested")
			}
			for _, r := range reqs {
				if !strings.HasPrefix(r.key, "slow-") {
					t.Fatalf("requested %s", r.key)
				}
			}
		})
	}
}

// TestStealConfigChangeMakesRootsStealable: turning withholding off turns
// queue-placed roots into ordinary processing tasks, stealable again.
func TestStealConfigChangeMakesRootsStealable(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), withSaturation(1.1))
	s.submit("c1", rootTasks("root", 20))
	if s.Task(k("root-0")).stealable() {
		t.Fatal("queue-placed root stealable")
	}
	s.handle(&ConfigChange{WorkerSaturation: inf})
	if !s.Task(k("root-0")).stealable() {
		t.Fatal("root not stealable after withholding was turned off")
	}
}

// TestStealFastTasksNeverStolen: prefixes at or under 1 ms in
// default-task-durations (rechunk-split here) are never stealable
// (stealing.fast_tasks), and start with that duration estimate.
func TestStealFastTasksNeverStolen(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), withSaturation(inf))
	s.submit("c1", rootTasks("rechunk-split", 30))
	eq(t, s.prefixes["rechunk-split"].durationAverage, 1e-6, "default duration")
	s.addWorker("w2", 1)
	for _, ts := range s.tasks.all() {
		if ts.stealable() {
			t.Fatalf("%s stealable", ts.Key)
		}
	}
	eq(t, allStealRequests(s.stealTick()), 0, "requests")
}

// TestStealOff: work-stealing false: no bookkeeping, no requests, answers
// ignored.
func TestStealOff(t *testing.T) {
	s := stealCluster(t, 10, func(c *Config, _ *[]string) { c.NoWorkStealing = true })
	for _, ws := range s.workerOrder.Items() {
		if ws.steal != nil {
			t.Fatal("stealing state allocated while off")
		}
	}
	eq(t, len(s.stealTick().Workers), 0, "nothing sent")
	s.stealAnswer("w1", "slow-9", "ready", "steal-0")
	s.wantOn("slow-9", "w1")
	s.wantStats(StealStats{})
	id := s.Identity(0)
	eq(t, id.Get("stealing").(*protocol.Map).Get("enabled"), any(false), "identity says off")
}

// ---- cost model ------------------------------------------------------------------

// TestStealLevels: steal_time_ratio's level is round(log2(transfer /
// compute) + 6), transfer = input bytes / bandwidth + 0.1 s; no inputs is
// level 0; at 15 and above a task is never stealable.
func TestStealLevels(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.bandwidth = 1e6 // 1 MB/s keeps the inputs under the memory limit
	bw := s.bandwidth
	cases := []struct {
		nbytes  int64
		compute float64
		level   int
		ok      bool
	}{
		{8, 0.5, 4, true},                 // log2(0.2)+6 = 3.68
		{int64(0.9 * bw), 0.5, 7, true},   // transfer 1 s: log2(2)+6 = 7
		{int64(99.9 * bw), 0.5, 14, true}, // 100 s: log2(200)+6 = 13.6
		{int64(300 * bw), 0.5, 0, false},  // log2(600)+6 = 15.2: too costly
		{0, 100, 1, true},                 // log2(0.001)+6 < 1: clamped to 1
		{int64(0.3 * bw), 0.1, 8, true},   // log2(4)+6 = 8
	}
	for i, c := range cases {
		key := fmt.Sprintf("dep%d-0", i)
		s.handle(&UpdateData{WhoHas: map[protocol.Key][]string{k(key): {addr("w1")}}, NBytes: map[protocol.Key]int64{k(key): c.nbytes}})
		name := fmt.Sprintf("t%d", i)
		s.submit("c1", []GraphTask{task(name, key)})
		ts := s.Task(k(name))
		ts.prefix.durationAverage = c.compute
		level, ok := s.stealLevel(ts)
		if ok != c.ok || (ok && level != c.level) {
			t.Errorf("case %d: level %d ok %v, want %d %v", i, level, ok, c.level, c.ok)
		}
	}
	s.submit("c1", []GraphTask{task("root")})
	if level, ok := s.stealLevel(s.Task(k("root"))); !ok || level != 0 {
		t.Fatalf("no dependencies: level %d ok %v, want 0", level, ok)
	}
	eqSlice(t, stealCostMultipliers[:3], []float64{1, 1 + 1.0/32, 1 + 1.0/16}, "cost multipliers")
}

// TestStealCheapTasksFirst: balance walks the levels in order, so a task
// without inputs (level 0) is requested before one whose inputs cost a
// transfer (level 4), whatever their order on the victim.
func TestStealCheapTasksFirst(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), withSaturation(inf))
	whoHas := map[protocol.Key][]string{}
	for i := 0; i < 5; i++ {
		whoHas[k(fmt.Sprintf("d-%d", i))] = []string{addr("w1")}
	}
	s.handle(&UpdateData{Client: "c1", WhoHas: whoHas})
	var tasks []GraphTask
	for i := 0; i < 8; i++ {
		tasks = append(tasks, task(fmt.Sprintf("slow-%d", i), fmt.Sprintf("d-%d", i%5)))
	}
	s.submit("c1", tasks)
	s.submit("c1", []GraphTask{task("free")}) // no inputs: level 0, added last
	s.addWorker("w2", 1)
	reqs := stealRequests(t, s.stealTick(), "w1")
	if len(reqs) < 2 || reqs[0].key != "free" {
		t.Fatalf("want the level-0 task first, got %v", reqs)
	}
	eq(t, s.StealStats().RequestsByLevel[0], 1, "level 0")
}

// TestStealExpensiveInputsStay: a task whose inputs would take long to
// move is not worth stealing: with 5 s to fetch, the idle thief would
// finish it at 5.5 s, no sooner than the victim's backlog of 10 x 0.5 s
// (0 + 5 + 0.5 > 5 - 0.5/2).
func TestStealExpensiveInputsStay(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	whoHas := map[protocol.Key][]string{}
	nbytes := map[protocol.Key]int64{}
	for i := 0; i < 5; i++ {
		key := k(fmt.Sprintf("big-%d", i))
		whoHas[key] = []string{addr("w1")}
		nbytes[key] = int64(5 * s.bandwidth) // 5 s each to move
	}
	s.handle(&UpdateData{Client: "c1", WhoHas: whoHas, NBytes: nbytes})
	var tasks []GraphTask
	for i := 0; i < 10; i++ {
		tasks = append(tasks, task(fmt.Sprintf("slow-%d", i), fmt.Sprintf("big-%d", i%5)))
	}
	s.submit("c1", tasks)
	s.addWorker("w2", 1)
	eq(t, allStealRequests(s.stealTick()), 0, "requests")
}

// TestStealRelevelsOnceDurationKnown: tasks put while their prefix had no
// measured duration are levelled again when the first one finishes
// (unknown_durations): 0.1 s latency over a 1 ms task is level 13.
func TestStealRelevelsOnceDurationKnown(t *testing.T) {
	s := stealCluster(t, 10)
	level := func(key string) int {
		ts := s.Task(k(key))
		set := ts.slotSet[roleStealable-1]
		for i := range ts.processingOn.steal.levels {
			if &ts.processingOn.steal.levels[i] == set {
				return i
			}
		}
		return -1
	}
	eq(t, level("slow-5"), 4, "level under the 0.5 s guess")
	ts := s.Task(k("slow-0"))
	s.handle(&TaskFinished{Worker: addr("w1"), Key: k("slow-0"), RunID: ts.runID, NBytes: 8,
		StartStops: []StartStop{{Action: "compute", Start: 1, Stop: 1.001}}})
	eq(t, level("slow-5"), 13, "level once measured")
	eq(t, len(s.prefixes["slow"].stealUnknown), 0, "unknown list emptied")
}

// TestStealUnknownListStaysBounded: tasks leaving processing do not pile up
// in the unknown-duration list.
func TestStealUnknownListStaysBounded(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), withSaturation(inf))
	for round := 0; round < 20; round++ {
		var tasks []GraphTask
		for i := 0; i < 50; i++ {
			tasks = append(tasks, task(fmt.Sprintf("u-%d-%d", round, i)))
		}
		s.submit("c1", tasks)
		var ks []protocol.Key
		for _, gt := range tasks {
			ks = append(ks, gt.Key)
		}
		s.handle(&ClientReleasesKeys{Client: "c1", Keys: ks})
	}
	if n := len(s.prefixes["u"].stealUnknown); n > 128 {
		t.Fatalf("unknown list holds %d entries for no processing task", n)
	}
}

// TestStealRestartClears: restart forgets every task; nothing stays
// stealable or in flight.
func TestStealRestartClears(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	s.handle(&Restart{})
	eq(t, s.StealStats().InFlight, 0, "in flight")
	for _, tp := range s.prefixes {
		eq(t, len(tp.stealUnknown), 0, "unknown list of "+tp.Name)
	}
}

// TestStealSaturatedVictim: a saturated worker is a victim even when
// several workers are busy; the idle one steals from it.
func TestStealSaturatedVictim(t *testing.T) {
	s := stealCluster(t, 40)
	s.addWorker("w3", 1)
	if !s.saturated.Has(s.workers[addr("w1")]) {
		t.Fatal("w1 should be saturated")
	}
	out := s.stealTick()
	n := len(stealRequests(t, out, "w1"))
	if n == 0 {
		t.Fatal("nothing requested from the saturated worker")
	}
	thieves := map[string]bool{}
	for ts, info := range s.steal.inFlight {
		_ = ts
		thieves[info.thief.Address] = true
	}
	if !thieves[addr("w2")] || !thieves[addr("w3")] {
		t.Fatalf("both idle workers should steal, got %v", thieves)
	}
}

// TestStealDeterministic: the same stimuli give the same outboxes.
func TestStealDeterministic(t *testing.T) {
	run := func() []string {
		s := stealCluster(t, 30)
		s.addWorker("w3", 2)
		var trace []string
		for round := 0; round < 3; round++ {
			out := s.stealTick()
			for _, w := range sortedAddrs(t, out.Workers) {
				for _, m := range out.Workers.Of(w) {
					trace = append(trace, w+" "+protocol.String(m))
				}
			}
			// the steals in flight live in a map: listed by key, so that
			// the trace's order is the engine's, and only this part sorted
			var inflight []string
			for ts := range s.steal.inFlight {
				inflight = append(inflight, "inflight "+ts.Key.String())
			}
			sortStrings(inflight)
			trace = append(trace, inflight...)
			for _, r := range stealRequests(t, out, "w1") {
				s.stealAnswer("w1", r.key, "ready", r.sid)
			}
		}
		return trace
	}
	a, b := run(), run()
	if len(a) == 0 {
		t.Fatal("no steal happened: the trace proves nothing")
	}
	eqSlice(t, a, b, "trace, message order included")
}

func sortStrings(xs []string) {
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j] < xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}

func near(t *testing.T, got, want float64, what string) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// TestStealCoAssignmentKeepsBigLocalInputs: with co-assignment on, a task
// whose inputs on its worker would take more than a quarter of its compute
// time to move stays where co-assignment's locality put it; one with small
// inputs is stealable as in distributed. Without co-assignment both are.
func TestStealCoAssignmentKeepsBigLocalInputs(t *testing.T) {
	for _, co := range []bool{false, true} {
		s := newTestState(t, withWorkers("w1:1"), withSaturation(1.1), func(c *Config, _ *[]string) {
			c.RootTaskCoAssignment = co
		})
		whoHas := map[protocol.Key][]string{}
		nbytes := map[protocol.Key]int64{}
		for i := 0; i < 5; i++ {
			for _, p := range []string{"small", "big"} {
				key := k(fmt.Sprintf("%s-%d", p, i))
				whoHas[key] = []string{addr("w1")}
				nbytes[key] = 8
				if p == "big" {
					nbytes[key] = int64(0.2 * s.bandwidth) // 0.2 s to move, 0.5 s to compute
				}
			}
		}
		s.handle(&UpdateData{Client: "c1", WhoHas: whoHas, NBytes: nbytes})
		s.submit("c1", []GraphTask{task("usesmall", "small-0"), task("usesbig", "big-0")})
		eq(t, s.Task(k("usesmall")).stealable(), true, fmt.Sprintf("co=%v: small local inputs stealable", co))
		eq(t, s.Task(k("usesbig")).stealable(), !co, fmt.Sprintf("co=%v: big local inputs stealable", co))
	}
}
