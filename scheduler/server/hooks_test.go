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
	batch, backlog, lag, dropped := q.take(nil, 4, now.Add(3*time.Second))
	if len(batch) != 4 || backlog != 6 || dropped != 4 || lag != 3*time.Second {
		t.Fatalf("batch %d backlog %d dropped %d lag %v", len(batch), backlog, dropped, lag)
	}
	q.push(hookEvents(5), now)
	if _, backlog, _, dropped = q.take(nil, 100, now); backlog != 0 || dropped != 5 {
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
	h.batches = append(h.batches, eventCount(body.Get("events")))
	h.mu.Unlock()
	return protocol.NewMap("status", "OK"), nil
}

func (h *stuckHost) PID() int { return 1 }

// eventCount is how many events a host call's "events" holds, as the host
// decodes them.
func eventCount(events any) int {
	frames, err := protocol.Encode(events, nil)
	if err != nil {
		panic(err)
	}
	v, err := protocol.Decode(frames)
	if err != nil {
		panic(err)
	}
	return len(v.([]any))
}

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

// mapEvents is what a client.map's task makes a counting plugin see: a
// finished task's processing->memory (with its kwargs) and two bare
// transitions, for n tasks.
func mapEvents(n int) []scheduler.HookEvent {
	evs := make([]scheduler.HookEvent, 0, 3*n)
	for i := range n {
		k := protocol.StrKey("inc-" + string(rune('a'+i%26)))
		evs = append(evs,
			scheduler.HookEvent{Hook: scheduler.HookTransition, StimulusID: "task-finished-1", Key: k, Start: scheduler.StatusProcessing, Finish: scheduler.StatusMemory,
				Kwargs: &scheduler.TransitionKwargs{Finished: true, Worker: "tcp://127.0.0.1:40000", NBytes: 28, Type: []byte("\x80\x04\x95int"), TypeName: "int",
					StartStops: []scheduler.StartStop{{Action: "compute", Start: 1, Stop: 2}}, Thread: int64(1234)}},
			scheduler.HookEvent{Hook: scheduler.HookTransition, StimulusID: "task-finished-1", Key: k, Start: scheduler.StatusQueued, Finish: scheduler.StatusProcessing},
			scheduler.HookEvent{Hook: scheduler.HookTransition, StimulusID: "task-finished-1", Key: k, Start: scheduler.StatusWaiting, Finish: scheduler.StatusQueued})
	}
	return evs
}

// TestAppendHookEventsEncodesAsTheValueTree: the pump's direct encoding
// is byte for byte the host call hookEventsWire's value makes, for every
// hook and kwargs shape; what holds serialized data is refused, so that
// the pump sends the value tree with its frames.
func TestAppendHookEventsEncodesAsTheValueTree(t *testing.T) {
	tupleKey, err := protocol.KeyOf([]any{"x", int64(3)})
	if err != nil {
		t.Fatal(err)
	}
	tr := func(k protocol.Key, from, to scheduler.Status, kw *scheduler.TransitionKwargs) scheduler.HookEvent {
		return scheduler.HookEvent{Hook: scheduler.HookTransition, StimulusID: "s-1", Key: k, Start: from, Finish: to, Kwargs: kw}
	}
	plain := append(mapEvents(3),
		tr(tupleKey, scheduler.StatusProcessing, scheduler.StatusMemory, &scheduler.TransitionKwargs{Finished: true, Worker: "tcp://a:1",
			StartStops: []scheduler.StartStop{{Action: "transfer", Start: 1.5, Stop: 2.25, Source: "tcp://b:2"}, {Action: "compute", Start: 3, Stop: 4}},
			Metadata:   protocol.NewMap("k", int64(1)), Thread: nil}), // no type, no thread
		tr(tupleKey, scheduler.StatusProcessing, scheduler.StatusMemory, &scheduler.TransitionKwargs{Finished: true}), // no worker
		tr(tupleKey, scheduler.StatusProcessing, scheduler.StatusErred, &scheduler.TransitionKwargs{Erred: true, Worker: "tcp://a:1",
			Cause: tupleKey, ExceptionText: "boom", TracebackText: "tb"}),
		scheduler.HookEvent{Hook: scheduler.HookUpdateGraph, StimulusID: "g-1", Client: "c-1", Graph: &scheduler.GraphHook{
			Keys: []protocol.Key{tupleKey}, Tasks: []protocol.Key{tupleKey}, Priorities: [][3]float64{{0, 1, 2.5}},
			Annotations: []scheduler.TaskAnnotations{{Key: tupleKey, Values: protocol.NewMap("retries", int64(2))}}}},
		scheduler.HookEvent{Hook: scheduler.HookAddWorker, StimulusID: "w-1", Worker: "tcp://a:1"},
		scheduler.HookEvent{Hook: scheduler.HookLogEvent, StimulusID: "l-1", Topic: "t", Msg: protocol.NewMap("n", 1.5)},
	)
	encode := func(events any) [][]byte {
		t.Helper()
		frames, err := protocol.Encode(protocol.NewMap("events", events, "dropped", uint64(7)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return frames
	}
	wire, ok := appendHookEvents([]byte("stale"), plain)
	if !ok {
		t.Fatal("plain events refused")
	}
	wire = wire[len("stale"):] // appended after what the buffer held
	want, got := encode(hookEventsWire(plain)), encode(protocol.Raw(wire))
	if len(want) != len(got) {
		t.Fatalf("%d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if string(want[i]) != string(got[i]) {
			t.Fatalf("frame %d differs:\n got %x\nwant %x", i, got[i], want[i])
		}
	}

	pickled := protocol.NewPickled([]byte("\x80\x05N."))
	for name, ev := range map[string]scheduler.HookEvent{
		"pickled exception": tr(tupleKey, scheduler.StatusProcessing, scheduler.StatusErred,
			&scheduler.TransitionKwargs{Erred: true, Exception: pickled, Traceback: pickled}),
		"log_event with frames": {Hook: scheduler.HookLogEvent, StimulusID: "l-2", Topic: "t", Msg: pickled},
	} {
		if _, ok := appendHookEvents(nil, []scheduler.HookEvent{mapEvents(1)[0], ev}); ok {
			t.Errorf("%s: accepted, but it needs frames of its own", name)
		}
	}
}

// BenchmarkHookEventsWire: the pump's cost per event, as the host call's
// body: built as a value tree (hookEventsWire, what an event with frames
// takes) and written directly (appendHookEvents, into a reused buffer).
func BenchmarkHookEventsWire(b *testing.B) {
	evs := mapEvents(1000)
	b.Run("tree", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			body := protocol.NewMap("events", hookEventsWire(evs), "dropped", uint64(0))
			if _, err := protocol.Encode(body, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	})
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		var wire []byte
		for range b.N {
			var ok bool
			if wire, ok = appendHookEvents(wire[:0], evs); !ok {
				b.Fatal("refused")
			}
			body := protocol.NewMap("events", protocol.Raw(wire), "dropped", uint64(0))
			if _, err := protocol.Encode(body, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	})
}

// TestHookPumpLingersLongerWhileEventsKeepComing: the pump's linger is
// hookLinger before its first call and after a quiet spell, and
// hookLingerBusy while its last call went out less than hookBusyGap ago,
// so a steady stream of events goes in fewer, bigger calls.
func TestHookPumpLingersLongerWhileEventsKeepComing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name     string
		lastCall time.Time
		now      time.Time
		want     time.Duration
	}{
		{"no call yet", time.Time{}, t0, hookLinger},
		{"right after a call", t0, t0, hookLingerBusy},
		{"within the gap", t0, t0.Add(hookBusyGap - time.Millisecond), hookLingerBusy},
		{"a quiet spell", t0, t0.Add(hookBusyGap), hookLinger},
		{"long quiet", t0, t0.Add(time.Hour), hookLinger},
	} {
		if got := lingerAfter(c.lastCall, c.now); got != c.want {
			t.Errorf("%s: linger %v, want %v", c.name, got, c.want)
		}
	}
	if hookLingerBusy <= hookLinger {
		t.Fatalf("the busy linger %v is not longer than %v", hookLingerBusy, hookLinger)
	}
}
