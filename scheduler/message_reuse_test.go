package scheduler

import (
	"bytes"
	"fmt"
	"testing"

	"daskgo/protocol"
)

// encodeWorkerMsgs encodes every worker message of out, workers in
// address order: what the streams would write.
func encodeWorkerMsgs(t *testing.T, out Outbox) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, a := range sortedAddrs(t, out.Workers) {
		b.WriteString(a)
		for _, m := range out.Workers.Of(a) {
			frames, err := protocol.Encode(m, nil)
			if err != nil {
				t.Fatalf("encode a message to %s: %v", a, err)
			}
			for _, f := range frames {
				b.Write(f)
			}
		}
	}
	return b.Bytes()
}

// TestWrittenComputeTasksAreRebuiltInPlace: after MessagesWritten, a
// Handle that sends several compute-tasks at once (a second graph's eight
// roots and a task on two of the first graph's results) builds them in
// the messages the first graph's went out in, and a release's free-keys in
// an earlier release's; each encodes exactly as an engine that never
// reuses writes it.
func TestWrittenMessagesAreRebuiltInPlace(t *testing.T) {
	fresh := newTestState(t, withWorkers("a:8", "b:8"))
	reused := newTestState(t, withWorkers("a:8", "b:8"))
	same := func(what string, a, b Outbox) {
		t.Helper()
		if x, y := encodeWorkerMsgs(t, a), encodeWorkerMsgs(t, b); !bytes.Equal(x, y) {
			t.Fatalf("%s: the reused messages encode differently:\n%q\n%q", what, x, y)
		}
	}
	first := map[*protocol.Map]bool{}
	a, b := fresh.submit("c1", rootTasks("x", 16)), reused.submit("c1", rootTasks("x", 16))
	same("first graph", a, b)
	for _, p := range b.Workers {
		for _, m := range msgsOp(p.Msgs, "compute-task") {
			first[m] = true
		}
	}
	eq(t, len(first), 16, "compute-tasks of the first graph")
	for i := range 16 {
		key := fmt.Sprintf("x-%d", i)
		w := "a"
		if fresh.Task(k(key)).processingOn.Address == addr("b") {
			w = "b"
		}
		same("finish "+key, fresh.finish(w, key), reused.finish(w, key))
	}
	reused.MessagesWritten()

	second := append(rootTasks("y", 8), task("z", "x-0", "x-9"))
	a, b = fresh.submit("c1", second), reused.submit("c1", second)
	same("second graph", a, b)
	if n := countCompute(b); n != 9 {
		t.Fatalf("the second graph sent %d compute-tasks at once, want 9", n)
	}
	rebuilt := 0
	for _, p := range b.Workers {
		for _, m := range msgsOp(p.Msgs, "compute-task") {
			if first[m] {
				rebuilt++
			}
		}
	}
	// z has dependencies: its message is of the other kind, never the
	// roots' (computeTaskWithDeps)
	eq(t, rebuilt, 8, "compute-tasks built in the first graph's messages")

	// free-keys: releasing x-1..x-4 frees them one message each; once
	// written, releasing x-5..x-8 builds its free-keys in those
	release := func(from, to int) (Outbox, Outbox) {
		var ks []protocol.Key
		for i := from; i <= to; i++ {
			ks = append(ks, k(fmt.Sprintf("x-%d", i)))
		}
		st := &ClientReleasesKeys{Client: "c1", Keys: ks}
		st2 := *st
		return fresh.handle(st), reused.handle(&st2)
	}
	a, b = release(1, 4)
	same("release x-1..x-4", a, b)
	freed := map[*protocol.Map]bool{}
	for _, p := range b.Workers {
		for _, m := range msgsOp(p.Msgs, "free-keys") {
			freed[m] = true
		}
	}
	eq(t, len(freed), 4, "free-keys of the first release")
	reused.MessagesWritten()
	a, b = release(5, 8)
	same("release x-5..x-8", a, b)
	rebuilt = 0
	for _, p := range b.Workers {
		for _, m := range msgsOp(p.Msgs, "free-keys") {
			if freed[m] {
				rebuilt++
			}
		}
	}
	eq(t, rebuilt, 4, "free-keys built in the first release's messages")
}

// TestComputeTasksAreNotReusedBeforeWritten: without MessagesWritten every
// compute-task is a new object, whatever was sent before.
func TestComputeTasksAreNotReusedBeforeWritten(t *testing.T) {
	s := newTestState(t, withWorkers("a:4"))
	seen := map[*protocol.Map]bool{}
	check := func(out Outbox) {
		t.Helper()
		for _, m := range msgsOp(out.Workers.Of(addr("a")), "compute-task") {
			if seen[m] {
				t.Fatalf("compute-task for %s reuses a message handed out before", msgKey(m))
			}
			seen[m] = true
		}
	}
	check(s.submit("c1", rootTasks("x", 4)))
	for i := range 4 {
		check(s.finish("a", fmt.Sprintf("x-%d", i)))
	}
	check(s.submit("c1", rootTasks("y", 4)))
	eq(t, len(seen), 8, "compute-tasks")
}
