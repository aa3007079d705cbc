package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"daskgo/protocol"
	"daskgo/scheduler"
)

func hookEvents(n int) []scheduler.HookEvent {
	evs := make([]scheduler.HookEvent, n)
	for i := range evs {
		evs[i] = scheduler.HookEvent{Hook: scheduler.HookTransition, Key: protocol.StrKey("k"), Start: scheduler.StatusWaiting, Finish: scheduler.StatusProcessing}
	}
	return evs
}

// TestHookQueueBoundedDropsAndCounts: past its bound the queue keeps what it
// holds, drops the newest and counts them; taking frees room again.
func TestHookQueueBoundedDropsAndCounts(t *testing.T) {
	q := newHookQueue(10)
	now := time.Unix(100, 0)
	q.push(hookEvents(7), now)
	q.push(hookEvents(7), now.Add(time.Second))
	batch, backlog, lag, dropped := q.take(4, now.Add(3*time.Second))
	if len(batch) != 4 || backlog != 6 || dropped != 4 || lag != 3*time.Second {
		t.Fatalf("batch %d backlog %d dropped %d lag %v", len(batch), backlog, dropped, lag)
	}
	q.push(hookEvents(5), now)
	if _, backlog, _, dropped = q.take(100, now); backlog != 0 || dropped != 5 {
		t.Fatalf("backlog %d dropped %d", backlog, dropped)
	}
	if n := q.reset(); n != 0 {
		t.Fatalf("reset of an empty queue dropped %d", n)
	}
}

// stuckHost answers no batch until release is closed, recording the sizes.
type stuckHost struct {
	mu      sync.Mutex
	batches []int
	release chan struct{}
}

func (h *stuckHost) Call(ctx context.Context, op string, body *protocol.Map) (*protocol.Map, error) {
	<-h.release
	h.mu.Lock()
	h.batches = append(h.batches, len(body.Get("events").([]any)))
	h.mu.Unlock()
	return protocol.NewMap("status", "OK"), nil
}

func (h *stuckHost) PID() int { return 1 }

func (h *stuckHost) total() (n, calls int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.batches {
		n += b
	}
	return n, len(h.batches)
}

// TestHookPumpNeverBlocksPush: while the host answers nothing, pushes (the
// engine's side) still return, the events wait in the queue, and once the
// host answers they all arrive, batched.
func TestHookPumpNeverBlocksPush(t *testing.T) {
	q := newHookQueue(hookQueueMax)
	h := &stuckHost{release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { pumpHooks(ctx, q, h, wallClock{}, zerolog.Nop()); close(done) }()
	pushed := make(chan struct{})
	go func() {
		for range 100 {
			q.push(hookEvents(100), time.Now())
			time.Sleep(100 * time.Microsecond) // let the pump take a first batch and get stuck
		}
		close(pushed)
	}()
	select {
	case <-pushed:
	case <-time.After(30 * time.Second):
		t.Fatal("pushes blocked behind a host that does not answer")
	}
	if queued, _ := q.stats(); queued == 0 {
		t.Error("nothing waits in the queue while the host is stuck")
	}
	close(h.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, calls := h.total()
		if n == 10000 {
			if calls > 20 {
				t.Errorf("%d calls for 10,000 events: the backlog was not batched", calls)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 10000 events delivered", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	q.push(hookEvents(1), time.Now()) // wake it
	<-done
}

// BenchmarkHookEventsWire: the pump's cost per event, a finished task's
// processing->memory (with its kwargs) and two bare transitions, encoded
// as the host call's body.
func BenchmarkHookEventsWire(b *testing.B) {
	evs := make([]scheduler.HookEvent, 0, 3*1000)
	for i := range 1000 {
		k := protocol.StrKey("inc-" + string(rune('a'+i%26)))
		evs = append(evs,
			scheduler.HookEvent{Hook: scheduler.HookTransition, StimulusID: "task-finished-1", Key: k, Start: scheduler.StatusProcessing, Finish: scheduler.StatusMemory,
				Kwargs: &scheduler.TransitionKwargs{Finished: true, Worker: "tcp://127.0.0.1:40000", NBytes: 28, Type: []byte("\x80\x04\x95int"), TypeName: "int",
					StartStops: []scheduler.StartStop{{Action: "compute", Start: 1, Stop: 2}}, Thread: int64(1234)}},
			scheduler.HookEvent{Hook: scheduler.HookTransition, StimulusID: "task-finished-1", Key: k, Start: scheduler.StatusQueued, Finish: scheduler.StatusProcessing},
			scheduler.HookEvent{Hook: scheduler.HookTransition, StimulusID: "task-finished-1", Key: k, Start: scheduler.StatusWaiting, Finish: scheduler.StatusQueued})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		body := protocol.NewMap("events", hookEventsWire(evs), "dropped", uint64(0))
		if _, err := protocol.Encode(body, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}
