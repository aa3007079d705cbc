package server

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// The engine builds later compute-tasks in the objects of messages the
// loop has told it are written (loop.messagesWrittenMaybe,
// State.MessagesWritten). While a stream still holds messages, it must
// not be told: here a worker's stream is held across two graphs, so the
// first graph's compute-tasks wait in its buffer while the engine builds
// the second's. The worker must receive every task's compute-task intact,
// each key once.
func TestAHeldStreamsComputeTasksAreNotRebuilt(t *testing.T) {
	s := newLoopServer(t, false)
	s.loop.state = scheduler.New(scheduler.Config{ValidateInvariants: true, WorkerSaturation: math.Inf(1)})
	ours, peer := peerPair(t)
	const w = "tcp://127.0.0.1:40002"
	b := comm.NewBatchedSend(ours, 0, nil)
	s.workers[w] = b
	l := s.loop
	l.mu.Lock()
	l.handle(&scheduler.AddWorker{Base: stim("add-worker"), Address: w, Name: w, NThreads: 4,
		MemoryLimit: 1 << 30, Resources: map[string]float64{}, Status: "running"})
	l.handle(&scheduler.AddClient{Base: stim("add-client"), Client: "c1"})
	l.flush()
	b.Hold()
	var want []string
	for g, prefix := range []string{"x", "y"} {
		tasks := make([]scheduler.GraphTask, 8)
		keys := make([]protocol.Key, 8)
		for i := range tasks {
			key := fmt.Sprintf("%s-%d", prefix, i)
			keys[i] = protocol.StrKey(key)
			tasks[i] = scheduler.GraphTask{Key: keys[i], Kind: "Task", Order: int64(i),
				RunSpec: scheduler.BlobSpec{Blob: protocol.NewPickled([]byte("spec:" + key))}}
			want = append(want, key)
		}
		// the helper's round trip, done here: the test server has none
		out := l.state.Handle(&scheduler.UpdateGraph{Base: stim(fmt.Sprintf("update-graph-%d", g)), Client: "c1",
			Keys: keys, FifoTimeout: 100 * time.Millisecond})
		if len(out.Helper) != 1 {
			l.mu.Unlock()
			t.Fatalf("update-graph gave %d helper requests", len(out.Helper))
		}
		l.handle(&scheduler.GraphMaterialized{Base: stim(fmt.Sprintf("graph-%d", g)), RequestID: out.Helper[0].ID,
			Client: "c1", Tasks: tasks})
		l.flush()
		if b.Drained() {
			l.mu.Unlock()
			t.Fatal("the held stream reports drained with the graph's compute-tasks in its buffer")
		}
	}
	l.mu.Unlock()
	b.Release()

	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		_ = peer.SetReadDeadline(deadline)
		v, err := peer.Read()
		if err != nil {
			t.Fatalf("reading the worker's stream: %v (compute-tasks so far: %v)", err, got)
		}
		batch, _ := v.([]any)
		for _, item := range batch {
			m, _ := item.(*protocol.Map)
			if m == nil || m.Get("op") != "compute-task" {
				continue
			}
			k, _ := m.Get("key").(string)
			spec, _ := m.Get("run_spec").(*protocol.Blob)
			var pickle []byte
			if spec != nil {
				pickle, _ = spec.PickledObj()
			}
			if string(pickle) != "spec:"+k {
				t.Fatalf("the compute-task for %s carries another task's run_spec: %s", k, protocol.String(m))
			}
			got = append(got, k)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the worker received compute-tasks for\n%v\nwant each of\n%v\nonce", got, want)
	}
}
