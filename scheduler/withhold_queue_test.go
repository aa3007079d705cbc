package scheduler

import (
	"fmt"
	"testing"

	"daskgo/protocol"
)

func TestQueuingSlotLimit(t *testing.T) {
	for _, c := range []struct {
		sat       float64
		perWorker int
	}{{1.0, 2}, {1.1, 3}} {
		t.Run(fmt.Sprint(c.sat), func(t *testing.T) {
			s := newTestState(t, withWorkers("w1:2", "w2:2"), withSaturation(c.sat))
			out := s.submit("c1", rootTasks("x", 100))
			eq(t, len(computeTasksTo(out, "w1")), c.perWorker, "w1 slots")
			eq(t, len(computeTasksTo(out, "w2")), c.perWorker, "w2 slots")
			eq(t, s.Count(StatusQueued), 100-2*c.perWorker, "queued")
			// one finished task opens exactly one slot, on that worker
			ct := computeTasksTo(out, "w1")[0]
			out = s.finish("w1", msgKey(ct))
			eq(t, len(computeTasksTo(out, "w1")), 1, "refill")
			eq(t, countCompute(out), 1, "only one")
		})
	}
}

func TestQueueLeavesInPriorityOrder(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), withSaturation(1.0))
	tasks := rootTasks("x", 10)
	for i := range tasks {
		tasks[i].Order = int64(100 - i) // later keys are more urgent
	}
	out := s.submit("c1", tasks)
	sent := msgKey(computeTasksTo(out, "w1")[0])
	eq(t, sent, "x-9", "most urgent first")
	var order []string
	for i := 0; i < 9; i++ {
		out = s.finish("w1", sent)
		sent = msgKey(computeTasksTo(out, "w1")[0])
		order = append(order, sent)
	}
	eqSlice(t, order, []string{"x-8", "x-7", "x-6", "x-5", "x-4", "x-3", "x-2", "x-1", "x-0"}, "queue order")
}

func TestUserPriorityAnnotationWins(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), withSaturation(1.0))
	tasks := rootTasks("y", 6)
	tasks[5] = annotated(tasks[5], "priority", int64(10))
	out := s.submit("c1", tasks)
	ct := computeTasksTo(out, "w1")[0]
	eq(t, msgKey(ct), "y-5", "priority=10 first")
	eq(t, ct.Get("priority").([]any)[0], any(int64(-10)), "-user_priority")
}

func TestQueueDrainsWhenWorkerJoinsOrUnpauses(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), withSaturation(1.0))
	s.submit("c1", rootTasks("z", 20))
	eq(t, s.Count(StatusQueued), 19, "queued")
	out := s.addWorker("w2", 2)
	eq(t, len(computeTasksTo(out, "w2")), 2, "new worker fills its slots")
	s.handle(&WorkerStatusChange{Worker: addr("w2"), Status: "paused"})
	s.handle(&WorkerStatusChange{Worker: addr("w1"), Status: "paused"})
	for _, key := range s.Processing([]string{addr("w2")})[addr("w2")] {
		s.finish("w2", key.String())
	}
	eq(t, s.Count(StatusQueued), 17, "paused workers take nothing")
	out = s.handle(&WorkerStatusChange{Worker: addr("w2"), Status: "running"})
	eq(t, len(computeTasksTo(out, "w2")), 2, "unpaused worker refills")
}

func TestReleasingQueuedTasks(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), withSaturation(1.0))
	s.submit("c1", rootTasks("q", 5))
	var all []protocol.Key
	for i := 0; i < 5; i++ {
		all = append(all, k(fmt.Sprintf("q-%d", i)))
	}
	out := s.handle(&ClientReleasesKeys{Client: "c1", Keys: all})
	eq(t, s.Count(StatusQueued), 0, "queue emptied")
	eq(t, s.NumTasks(), 0, "everything forgotten")
	eq(t, len(msgsOp(out.Workers.Of(addr("w1")), "free-keys")), 1, "the running one freed")
	eq(t, countCompute(out), 0, "nothing new sent")
}

func TestNoQueuingWithInfiniteSaturation(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2", "w2:2"), withSaturation(inf))
	out := s.submit("c1", rootTasks("x", 100))
	eq(t, countCompute(out), 100, "everything sent")
	eq(t, s.Count(StatusQueued), 0, "nothing queued")
	n1, n2 := len(computeTasksTo(out, "w1")), len(computeTasksTo(out, "w2"))
	if n1 < 40 || n2 < 40 {
		t.Fatalf("root tasks not spread: %d/%d", n1, n2)
	}
}

func TestDataProducerIsRootish(t *testing.T) {
	s := newTestState(t, withWorkers("w1:4"), withSaturation(1.0))
	tasks := []GraphTask{task("dp-1"), task("dp-2"), task("dp-3"), task("dp-4"), task("dp-5")}
	for i := range tasks {
		tasks[i].DataProducer = true
	}
	s.submit("c1", tasks)
	eq(t, s.Count(StatusQueued), 1, "data producers are queued like root tasks")
}

// TestTaskHeapMatchesSortedOrder drives the queue (sorted deque + heap,
// lazy removal) with random pushes, mid-queue removals and pops, and checks
// each pop against a plain sorted reference and the queue's invariants.
// Pushes come mostly in increasing order (successive graphs' roots), mostly
// in decreasing order (one graph's roots) or in both, each with a quarter
// out of order.
func TestTaskHeapMatchesSortedOrder(t *testing.T) {
	for _, order := range []string{"increasing", "decreasing", "both"} {
		t.Run(order, func(t *testing.T) { checkTaskHeapOrder(t, order) })
	}
}

func checkTaskHeapOrder(t *testing.T, order string) {
	s := New(Config{ValidateInvariants: true})
	next := xorshift(42)
	var h taskHeap
	var ref []*TaskState // live queued tasks, any order
	seq := uint64(0)
	for step := 0; step < 20000; step++ {
		switch r := next(10); {
		case r < 5 && step%5000 < 4000: // push, mostly in increasing order like root-ish tasks; then drain
			seq++
			ts := &TaskState{state: StatusQueued, queueSeq: seq, recIdx: -1}
			o := float64(seq)
			if order == "decreasing" || (order == "both" && next(2) == 0) {
				o = float64(1_000_000 - seq)
			}
			if next(4) == 0 {
				o = float64(next(int(seq) + 1))
			}
			ts.priority = priority{0, 1, o}
			h.push(ts)
			ref = append(ref, ts)
		case r < 7 && len(ref) > 0: // release from the middle
			i := next(len(ref))
			h.remove(ref[i])
			ref[i] = ref[len(ref)-1]
			ref = ref[:len(ref)-1]
		case len(ref) > 0:
			best := 0
			for i, ts := range ref {
				a := heapEntry{prio: ts.priority, seq: ts.queueSeq}
				b := heapEntry{prio: ref[best].priority, seq: ref[best].queueSeq}
				if a.before(&b) {
					best = i
				}
			}
			got := h.pop()
			if got != ref[best] {
				t.Fatalf("step %d: popped %v/%d, want %v/%d", step, got.priority, got.queueSeq, ref[best].priority, ref[best].queueSeq)
			}
			ref[best] = ref[len(ref)-1]
			ref = ref[:len(ref)-1]
		}
		eq(t, h.Len(), len(ref), "live count")
		s.validateTaskHeap(&h)
	}
}

// A graph's roots are queued least urgent first: every push must go on the
// run's front (no entry in the heap, so no sifting), and pops come out most
// urgent first, also with pops between the pushes.
func TestTaskHeapTakesDescendingPushesOnTheFront(t *testing.T) {
	s := New(Config{ValidateInvariants: true})
	var h taskHeap
	var all []*TaskState
	for i := range 5000 {
		ts := &TaskState{state: StatusQueued, queueSeq: uint64(i + 1), recIdx: -1, priority: priority{0, 1, float64(5000 - i)}}
		h.push(ts)
		all = append(all, ts)
		if i%7 == 6 { // a slot opened: the most urgent so far goes
			if got := h.pop(); got != ts {
				t.Fatalf("push %d: popped %v, want the last pushed %v", i, got.priority, ts.priority)
			}
			all = all[:len(all)-1]
		}
	}
	eq(t, len(h.items), 0, "entries sifted through the heap")
	s.validateTaskHeap(&h)
	for i := len(all) - 1; i >= 0; i-- {
		if got := h.pop(); got != all[i] {
			t.Fatalf("popped %v, want %v", got.priority, all[i].priority)
		}
	}
	eq(t, h.Len(), 0, "left in the queue")
	if cap(h.run) > 2*5000 {
		t.Fatalf("the run's array grew to %d slots for at most 5,000 entries", cap(h.run))
	}
}

// Pushes that alternate between the two ends (each more urgent than all
// before it, or less) all stay in the run, and come out in order.
func TestTaskHeapTakesPushesAtBothEnds(t *testing.T) {
	s := New(Config{ValidateInvariants: true})
	var h taskHeap
	const n = 20000
	byPrio := make([]*TaskState, 2*n+1)
	seq := uint64(0)
	for i := range n {
		for _, o := range []int{n - i, n + 1 + i} { // front, then back
			seq++
			ts := &TaskState{state: StatusQueued, queueSeq: seq, recIdx: -1, priority: priority{0, 0, float64(o)}}
			h.push(ts)
			byPrio[o] = ts
		}
	}
	eq(t, len(h.items), 0, "entries sifted through the heap")
	s.validateTaskHeap(&h)
	if cap(h.run) > 4*2*n {
		t.Fatalf("the run's array grew to %d slots for %d entries", cap(h.run), 2*n)
	}
	for o := 1; o <= 2*n; o++ {
		if got := h.pop(); got != byPrio[o] {
			t.Fatalf("popped %v, want priority %d", got.priority, o)
		}
	}
}
