package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"daskgo/comm"
	"daskgo/scheduler"
)

// fakeWorker serves shuffle_inputs_done like ShuffleWorkerPlugin does and
// records the calls; fail makes it answer with an error.
type fakeWorker struct {
	mu    sync.Mutex
	calls []string
	fail  bool
}

func (w *fakeWorker) start(t *testing.T) string {
	t.Helper()
	srv := &comm.Server{Handlers: map[string]comm.Handler{
		"shuffle_inputs_done": func(_ context.Context, req *comm.Request) (any, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.calls = append(w.calls, fmt.Sprintf("%v[%v] close=%v reply=%v", req.Args.Get("shuffle_id"),
				req.Args.Get("run_id"), req.Close, req.Reply))
			if w.fail {
				return nil, errors.New("ShuffleClosedError")
			}
			return nil, nil
		},
	}, Logger: zerolog.Nop()}
	lis, err := comm.Listen(context.Background(), "tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return comm.ContactAddress(lis.Addr())
}

func (w *fakeWorker) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...)
}

// barrierServer is just enough of a Server for inputsDone: a pool and an
// engine loop that knows the given workers.
func barrierServer(t *testing.T, known ...string) *Server {
	t.Helper()
	s := newLoopServer(t, true)
	s.pool = comm.NewPool(comm.PoolConfig{})
	t.Cleanup(func() { _ = s.pool.Close() })
	var adds []scheduler.Stimulus
	for _, a := range known {
		adds = append(adds, &scheduler.AddWorker{Base: scheduler.Base{ID: "add", At: time.Unix(1_700_000_000, 0)}, Address: a, Name: a, NThreads: 1, Status: "running"})
	}
	s.loop.handleBatch(adds)
	return s
}

func TestBarrierCallsInputsDoneOnEveryParticipant(t *testing.T) {
	w1, w2 := &fakeWorker{}, &fakeWorker{}
	a1, a2 := w1.start(t), w2.start(t)
	s := barrierServer(t, a1, a2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.inputsDone(ctx, "abc", 3, []string{a1, a2}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*fakeWorker{w1, w2} {
		if got := strings.Join(w.seen(), ";"); got != "abc[3] close=false reply=true" {
			t.Fatalf("worker saw %q", got)
		}
	}
}

func TestBarrierFailsOnWorkerErrorOrDeparture(t *testing.T) {
	bad := &fakeWorker{fail: true}
	ok := &fakeWorker{}
	aBad, aOK := bad.start(t), ok.start(t)
	lis, err := comm.Listen(context.Background(), "tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	gone := comm.ContactAddress(lis.Addr())
	_ = lis.Close() // nobody listens there any more
	s := barrierServer(t, aBad, aOK)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	err = s.inputsDone(ctx, "abc", 1, []string{aOK, aBad})
	if err == nil || !strings.Contains(err.Error(), "unexpected error encountered during P2P barrier") {
		t.Fatalf("a worker's error reply: got %v", err)
	}
	err = s.inputsDone(ctx, "abc", 1, []string{aOK, gone})
	if err == nil || !strings.Contains(err.Error(), "left during shuffle abc[1]") {
		t.Fatalf("an unreachable worker the scheduler does not know: got %v", err)
	}
	if len(ok.seen()) != 2 {
		t.Fatalf("the healthy worker was called %d times, want once per barrier", len(ok.seen()))
	}
}
