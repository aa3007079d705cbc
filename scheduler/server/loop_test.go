package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// Tests of the engine's lock (doc.go, "The engine's lock"): the doors,
// the order, and that no holder waits for a peer. They run a loop and its
// engine with fake peers on loopback sockets, no helper, no Python.

// newLoopServer is a Server with a loop and an engine and nothing else:
// no listener, no helper. run says whether the loop goroutine runs (a test
// of the order leaves it out, so that only the doors it uses take the lock).
func newLoopServer(t *testing.T, run bool) *Server {
	t.Helper()
	clock := wallClock{}
	s := &Server{log: zerolog.Nop(), clock: clock, cfg: Config{TickEvery: time.Second},
		workers: map[string]*comm.BatchedSend{}, clients: map[string]*comm.BatchedSend{},
		memory: newMemoryReturner(clock), drain: streamDrain}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.loop = newLoop(s, scheduler.New(scheduler.Config{ValidateInvariants: true}))
	if run {
		s.goRun(s.loop.run)
	}
	t.Cleanup(func() { s.cancel(); s.wg.Wait() })
	return s
}

// peerPair is a handshaken connection over loopback TCP: ours, and the
// fake peer's end.
func peerPair(t *testing.T) (ours, peer *comm.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := lis.Accept()
		accepted <- c
	}()
	pc, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := <-accepted
	if sc == nil {
		t.Fatal("accept failed")
	}
	ours, peer = comm.NewConn(sc, nil), comm.NewConn(pc, nil)
	t.Cleanup(func() { ours.Close(); peer.Close() })
	var wg sync.WaitGroup
	var errA, errB error
	wg.Add(2)
	go func() { defer wg.Done(); errA = ours.Handshake(context.Background()) }()
	go func() { defer wg.Done(); errB = peer.Handshake(context.Background()) }()
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("handshake: %v / %v", errA, errB)
	}
	return ours, peer
}

func stim(prefix string) scheduler.Base {
	return stimulusBase("", prefix, time.Now())
}

// A worker that stopped reading (SIGSTOP, a GC pause, a partition) is
// removed with close while its socket is full. Closing its stream must not
// hold the engine's lock: another caller's query gets through while the
// stream is still draining, and the removal itself returns at once.
func TestEngineGoesOnWhileAStoppedWorkersStreamCloses(t *testing.T) {
	s := newLoopServer(t, true)
	s.drain = time.Hour // the stream drains until the peer reads, or this
	ours, peer := peerPair(t)
	const w = "tcp://127.0.0.1:40001"
	b := comm.NewBatchedSend(ours, 0, nil)
	s.workers[w] = b
	s.loop.handleBatch([]scheduler.Stimulus{&scheduler.AddWorker{Base: stim("add-worker"), Address: w, Name: w,
		NThreads: 1, MemoryLimit: 1 << 30, Resources: map[string]float64{}}})

	// fill the peer's socket: it never reads
	chunk := protocol.NewMap("op", "filler", "data", strings.Repeat("x", 1<<20))
	for range 64 {
		if err := b.Send(chunk); err != nil {
			t.Fatalf("filling the stream: %v", err)
		}
	}

	removed := make(chan struct{})
	go func() {
		s.loop.handleBatch([]scheduler.Stimulus{&scheduler.RemoveWorker{Base: stim("remove-worker"), Worker: w,
			Close: true, Reason: "test"}})
		close(removed)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case <-removed:
	case <-ctx.Done():
		t.Fatal("removing a worker whose socket is full did not return within 30 s: its stream's close held the engine's lock")
	}
	var workers int
	if err := s.loop.query(ctx, func(st *scheduler.State) { workers = st.NumWorkers() }); err != nil {
		t.Fatalf("a query got no turn at the engine within 30 s while a stopped worker's stream closed (%v)", err)
	}
	select {
	case <-b.Done():
		t.Fatal("the stream had finished closing before the engine went on: its close waited for the peer under the engine's lock")
	default:
	}
	if workers != 0 {
		t.Fatalf("the query saw %d workers after the removal, want 0", workers)
	}
	if s.workerStream(w) != nil {
		t.Fatal("the removed worker's stream is still registered")
	}
	peer.Close() // the peer goes: the writer's stuck write fails and it stops
	select {
	case <-b.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the dropped stream's writer did not stop within 30 s of its peer closing")
	}
	if !ours.Closed() {
		t.Fatal("the dropped stream's connection was left open")
	}
}

// eventMessages is the topic's messages in the order the engine applied
// them, read under the lock.
func eventMessages(s *Server, topic string) []string {
	s.loop.mu.Lock()
	defer s.loop.mu.Unlock()
	var out []string
	for _, e := range s.loop.state.Events(topic) {
		pair, _ := e.([]any)
		if len(pair) == 2 {
			out = append(out, fmt.Sprint(pair[1]))
		}
	}
	return out
}

// An RPC's stimulus queued before a stream's reader (or an RPC goroutine
// answering in place) takes the engine's lock applies before that door's
// own stimuli: a stream message never overtakes it. The loop goroutine is
// not running, so only the door under test can apply the queued event.
func TestQueuedRPCAppliesBeforeAStreamBatchOrAnInPlaceCall(t *testing.T) {
	s := newLoopServer(t, false)
	logEvent := func(msg, worker string) scheduler.Stimulus {
		return &scheduler.LogEvent{Base: stim("log-event"), Topics: []string{"order"}, Msg: msg, Worker: worker}
	}
	s.loop.submit(logEvent("rpc-1", ""))
	s.loop.handleBatch([]scheduler.Stimulus{logEvent("stream-1", "tcp://w"), logEvent("stream-2", "tcp://w")})
	s.loop.submit(logEvent("rpc-2", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.loop.callNow(ctx, func(id int64) scheduler.Stimulus {
		return &scheduler.UpdateData{Base: stim("update-data"), WhoHas: map[protocol.Key][]string{}, NBytes: map[protocol.Key]int64{}, ReplyTo: id}
	}); err != nil {
		t.Fatalf("callNow: %v", err)
	}
	s.loop.handleBatch([]scheduler.Stimulus{logEvent("stream-3", "tcp://w")})
	got := eventMessages(s, "order")
	want := []string{"rpc-1", "stream-1", "stream-2", "rpc-2", "stream-3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the engine applied %v, want %v: a stream message overtook an RPC queued before it, or a door did not apply the queue first", got, want)
	}
}
