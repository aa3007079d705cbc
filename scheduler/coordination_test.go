package scheduler

import (
	"testing"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler/coord"
)

// Engine tests of the coordination extensions: parked RPCs, their wake-up
// and cancellation, lease expiry on Tick, and the futures that variables,
// queues, datasets and fire-and-forget keep alive. No sockets, no clocks:
// time moves with the stimuli.

// replyOf returns the answer to RPC id in out, and whether there is one.
func replyOf(out Outbox, id int64) (any, bool) {
	for _, r := range out.Replies {
		if r.To == id {
			return r.Value, true
		}
	}
	return nil, false
}

func (s *tstate) wantReply(out Outbox, id int64, want any) {
	s.t.Helper()
	got, ok := replyOf(out, id)
	if !ok {
		s.t.Fatalf("no reply to %d (parked: %v)", id, s.Parked(id))
	}
	if e, isErr := got.(*coord.RemoteException); isErr {
		got = e.Class
	}
	if got != want {
		s.t.Fatalf("reply to %d = %v, want %v", id, got, want)
	}
}

func (s *tstate) wantParked(out Outbox, id int64) {
	s.t.Helper()
	if v, ok := replyOf(out, id); ok || !s.Parked(id) {
		s.t.Fatalf("RPC %d answered %v, want it parked", id, v)
	}
}

// tickAt moves the test clock to at and sends a Tick there.
func (s *tstate) tickAt(at time.Time) Outbox {
	s.t.Helper()
	s.clock = at
	return s.handle(&Tick{Base: Base{At: at}})
}

func TestSemaphoreLeaseExpiresWithoutRefresh(t *testing.T) {
	s := newTestState(t, func(c *Config, _ *[]string) { c.LeaseValidationInterval = 500 * time.Millisecond })
	t0 := s.clock
	s.handle(&CoordOp{Op: &coord.SemaphoreRegister{Name: "lock", MaxLeases: 1, LeaseTimeout: 2 * time.Second}})
	s.wantReply(s.handle(&CoordOp{Op: &coord.SemaphoreAcquire{Call: coord.Call{ReplyTo: 1}, Name: "lock", LeaseID: "a"}}), 1, true)
	s.wantParked(s.handle(&CoordOp{Op: &coord.SemaphoreAcquire{Call: coord.Call{ReplyTo: 2}, Name: "lock", LeaseID: "b"}}), 2)
	s.wantReply(s.handle(&CoordOp{Op: &coord.SemaphoreAcquire{Call: coord.Call{ReplyTo: 3}, Name: "lock", LeaseID: "c", NoWait: true}}), 3, false)

	s.tickAt(t0.Add(time.Second))
	s.handle(&CoordOp{Base: Base{At: t0.Add(1500 * time.Millisecond)}, Op: &coord.SemaphoreRefreshLeases{Name: "lock", LeaseIDs: []string{"a"}}})
	out := s.tickAt(t0.Add(3 * time.Second)) // refreshed 1.5 s ago: kept
	if _, ok := replyOf(out, 2); ok || s.Coordination().SemaphoreLeases("lock") != 1 {
		t.Fatalf("lease a expired while refreshed")
	}
	out = s.tickAt(t0.Add(4 * time.Second)) // holder silent for 2.5 s: dead
	s.wantReply(out, 2, true)
	eq(t, s.Coordination().SemaphoreLeases("lock"), int64(1), "leases after expiry")
	eq(t, s.Coordination().NParked(), 0, "parked RPCs")

	// the timed-out holder's late release changes nothing
	s.handle(&CoordOp{Op: &coord.SemaphoreRelease{Name: "lock", LeaseID: "a"}})
	eq(t, s.Coordination().SemaphoreLeases("lock"), int64(1), "leases after a stale release")
}

func TestSemaphoreWaitersWakeInOrderAndTimeOut(t *testing.T) {
	s := newTestState(t)
	acquire := func(id int64, lease string) Outbox {
		return s.handle(&CoordOp{Op: &coord.SemaphoreAcquire{Call: coord.Call{ReplyTo: id}, Name: "s", LeaseID: lease}})
	}
	release := func(lease string) Outbox {
		return s.handle(&CoordOp{Op: &coord.SemaphoreRelease{Name: "s", LeaseID: lease}})
	}
	s.handle(&CoordOp{Op: &coord.SemaphoreRegister{Name: "s", MaxLeases: 2}})
	s.wantReply(acquire(1, "a"), 1, true)
	s.wantReply(acquire(2, "b"), 2, true)
	s.wantReply(acquire(20, "b"), 20, true) // idempotent
	// three waiters, oldest first: c (3), d (4), e (5)
	s.wantParked(acquire(3, "c"), 3)
	s.wantParked(acquire(4, "d"), 4)
	s.wantParked(acquire(5, "e"), 5)
	// the middle one gives up: its timeout answer is false
	s.wantReply(s.handle(&CoordOp{Op: &coord.CancelWait{ReplyTo: 4, Why: coord.WaitTimeout}}), 4, false)
	// a release wakes the oldest waiter, c, and only it
	out := release("a")
	s.wantReply(out, 3, true)
	if _, ok := replyOf(out, 5); ok {
		t.Fatal("a younger waiter woke with the oldest")
	}
	// the next release skips the timed-out d and wakes e
	out = release("b")
	s.wantReply(out, 5, true)
	if _, ok := replyOf(out, 4); ok {
		t.Fatal("the waiter that timed out was answered again")
	}
	if _, ok := replyOf(s.handle(&CoordOp{Op: &coord.CancelWait{ReplyTo: 5, Why: coord.WaitTimeout}}), 5); ok {
		t.Fatal("a granted acquire was answered twice")
	}
	eq(t, s.Coordination().SemaphoreLeases("s"), int64(2), "leases held: c and e")
	s.wantReply(s.handle(&CoordOp{Op: &coord.SemaphoreAcquire{Call: coord.Call{ReplyTo: 6}, Name: "nope", LeaseID: "x"}}), 6, "RuntimeError")
	s.wantReply(s.handle(&CoordOp{Op: &coord.SemaphoreRegister{Call: coord.Call{ReplyTo: 7}, Name: "s", MaxLeases: 3}}), 7, "ValueError")
}

func TestMultiLockHandsOverOnRelease(t *testing.T) {
	s := newTestState(t)
	s.wantReply(s.handle(&CoordOp{Op: &coord.MultiLockAcquire{Call: coord.Call{ReplyTo: 1}, Locks: []string{"a", "b"}, ID: "m1", NumLocks: 2}}), 1, true)
	s.wantParked(s.handle(&CoordOp{Op: &coord.MultiLockAcquire{Call: coord.Call{ReplyTo: 2}, Locks: []string{"b", "c"}, ID: "m2", NumLocks: 2}}), 2)
	// m2 queued on the free c first (least contended) and holds it; m3
	// needs one of c, d and takes the free d
	s.wantReply(s.handle(&CoordOp{Op: &coord.MultiLockAcquire{Call: coord.Call{ReplyTo: 3}, Locks: []string{"c", "d"}, ID: "m3", NumLocks: 1}}), 3, true)
	eq(t, s.Coordination().MultiLockHolders()["c"][0], "m2", "holder of c")
	s.wantParked(s.handle(&CoordOp{Op: &coord.MultiLockAcquire{Call: coord.Call{ReplyTo: 4}, Locks: []string{"a"}, ID: "m4", NumLocks: 1}}), 4)
	s.wantReply(s.handle(&CoordOp{Op: &coord.CancelWait{ReplyTo: 4, Why: coord.WaitTimeout}}), 4, false)
	s.wantReply(s.handle(&CoordOp{Op: &coord.MultiLockRelease{ID: "m1"}}), 2, true)
	s.handle(&CoordOp{Op: &coord.MultiLockRelease{ID: "m2"}})
	s.handle(&CoordOp{Op: &coord.MultiLockRelease{ID: "m3"}})
	eq(t, len(s.Coordination().MultiLockHolders()), 0, "locks left")
	s.wantReply(s.handle(&CoordOp{Op: &coord.MultiLockRelease{Call: coord.Call{ReplyTo: 5}, ID: "m2"}}), 5, "KeyError")
}

func TestEventWakesEveryWaiterAndForgetsWhenCleared(t *testing.T) {
	s := newTestState(t)
	s.wantParked(s.handle(&CoordOp{Op: &coord.EventWait{Call: coord.Call{ReplyTo: 1}, Name: "e"}}), 1)
	s.wantParked(s.handle(&CoordOp{Op: &coord.EventWait{Call: coord.Call{ReplyTo: 2}, Name: "e"}}), 2)
	s.wantParked(s.handle(&CoordOp{Op: &coord.EventWait{Call: coord.Call{ReplyTo: 3}, Name: "e"}}), 3)
	s.wantReply(s.handle(&CoordOp{Op: &coord.CancelWait{ReplyTo: 3, Why: coord.WaitTimeout}}), 3, false)
	out := s.handle(&CoordOp{Op: &coord.EventSet{Name: "e"}})
	s.wantReply(out, 1, true)
	s.wantReply(out, 2, true)
	s.wantReply(s.handle(&CoordOp{Op: &coord.EventWait{Call: coord.Call{ReplyTo: 4}, Name: "e"}}), 4, true)
	s.handle(&CoordOp{Op: &coord.EventClear{Name: "e"}})
	eq(t, s.Coordination().NEvents(), 0, "events remembered")
	s.wantReply(s.handle(&CoordOp{Op: &coord.EventWait{Call: coord.Call{ReplyTo: 5}, Name: "e", NoWait: true}}), 5, false)
	s.wantParked(s.handle(&CoordOp{Op: &coord.EventWait{Call: coord.Call{ReplyTo: 6}, Name: "e"}}), 6)
	s.handle(&CoordOp{Op: &coord.CancelWait{ReplyTo: 6, Why: coord.WaitGone}})
	eq(t, s.Coordination().NEvents(), 0, "events after the waiter left")
}

// memoryTask submits key for client c1 and finishes it on w1.
func memoryTask(s *tstate, key string) {
	s.submit("c1", []GraphTask{task(key)})
	s.finish("w1", key)
	s.wantStatus(key, "memory")
}

func TestVariableKeepsFutureUntilHandedOver(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	memoryTask(s, "x")
	s.wantParked(s.handle(&CoordOp{Op: &coord.VariableGet{Call: coord.Call{ReplyTo: 1}, Name: "v"}}), 1)
	out := s.handle(&CoordOp{Op: &coord.VariableSet{Name: "v", Future: true, Key: k("x")}})
	rec, _ := replyOf(out, 1)
	token := rec.(*protocol.Map).Get("token").(string)
	eq(t, rec.(*protocol.Map).Get("state").(string), "memory", "state in the record")

	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("x")}) // the setter drops it
	s.wantStatus("x", "memory")

	s.handle(&AddClient{Client: "c2"})
	s.handle(&CoordOp{Op: &coord.VariableSet{Name: "v", Data: "plain"}}) // replaced while a token is out
	s.wantStatus("x", "memory")
	s.handle(&CoordOp{Op: &coord.VariableFutureReceived{Client: "c2", Name: "v", Key: k("x"), Token: token}})
	s.wantStatus("x", "memory") // c2 holds it now
	s.handle(&ClientReleasesKeys{Client: "c2", Keys: keys("x")})
	s.wantStatus("x", "forgotten")
	rec, _ = replyOf(s.handle(&CoordOp{Op: &coord.VariableGet{Call: coord.Call{ReplyTo: 2}, Name: "v"}}), 2)
	eq(t, rec.(*protocol.Map).Get("value").(string), "plain", "the new value")
}

func TestVariableDeleteReleasesFuture(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	memoryTask(s, "x")
	s.handle(&CoordOp{Op: &coord.VariableSet{Name: "v", Future: true, Key: k("x")}})
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("x")})
	s.wantStatus("x", "memory")
	s.handle(&CoordOp{Op: &coord.VariableDelete{Name: "v"}})
	s.wantStatus("x", "forgotten")
	s.wantReply(s.handle(&CoordOp{Op: &coord.VariableGet{Call: coord.Call{ReplyTo: 1}, Name: "v", NoWait: true}}), 1, "TimeoutError")
}

func TestQueueRefcountsFutures(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	memoryTask(s, "x")
	s.handle(&CoordOp{Op: &coord.QueueCreate{Name: "q"}})
	s.handle(&CoordOp{Op: &coord.QueuePut{Name: "q", Future: true, Key: k("x")}})
	s.handle(&CoordOp{Op: &coord.QueuePut{Name: "q", Future: true, Key: k("x")}})
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("x")})
	eq(t, s.Coordination().QueueFutureRefs("q", k("x")), int64(2), "refs after two puts")

	s.handle(&AddClient{Client: "c2"})
	out := s.handle(&CoordOp{Op: &coord.QueueGet{Call: coord.Call{ReplyTo: 1}, Name: "q"}})
	rec, _ := replyOf(out, 1)
	eq(t, rec.(*protocol.Map).Get("type").(string), "Future", "record type")
	s.handle(&CoordOp{Op: &coord.QueueFutureRelease{Client: "c2", Name: "q", Key: k("x")}})
	eq(t, s.Coordination().QueueFutureRefs("q", k("x")), int64(1), "refs after one get")
	s.handle(&ClientReleasesKeys{Client: "c2", Keys: keys("x")})
	s.wantStatus("x", "memory") // the queue still holds a copy

	s.handle(&CoordOp{Op: &coord.QueueRelease{Name: "q"}}) // the last client closes the queue
	s.wantStatus("x", "forgotten")
}

func TestQueueParksGettersAndPutters(t *testing.T) {
	s := newTestState(t)
	s.handle(&CoordOp{Op: &coord.QueueCreate{Name: "q", MaxSize: 1}})
	s.wantParked(s.handle(&CoordOp{Op: &coord.QueueGet{Call: coord.Call{ReplyTo: 1}, Name: "q"}}), 1)
	s.wantReply(s.handle(&CoordOp{Op: &coord.QueueGet{Call: coord.Call{ReplyTo: 2}, Name: "q", NoWait: true}}), 2, "TimeoutError")
	out := s.handle(&CoordOp{Op: &coord.QueuePut{Call: coord.Call{ReplyTo: 3}, Name: "q", Data: int64(7)}})
	rec, _ := replyOf(out, 1)
	eq(t, rec.(*protocol.Map).Get("value").(int64), int64(7), "value handed to the waiting getter")
	s.handle(&CoordOp{Op: &coord.QueuePut{Call: coord.Call{ReplyTo: 4}, Name: "q", Data: int64(8)}})
	s.wantParked(s.handle(&CoordOp{Op: &coord.QueuePut{Call: coord.Call{ReplyTo: 5}, Name: "q", Data: int64(9)}}), 5) // full
	out = s.handle(&CoordOp{Op: &coord.QueueGet{Call: coord.Call{ReplyTo: 6}, Name: "q"}})
	s.wantReply(out, 5, nil) // room made: the parked put goes in
	s.wantReply(s.handle(&CoordOp{Op: &coord.QueueSize{Call: coord.Call{ReplyTo: 7}, Name: "q"}}), 7, int64(1))
	s.wantReply(s.handle(&CoordOp{Op: &coord.QueueSize{Call: coord.Call{ReplyTo: 8}, Name: "nope"}}), 8, "KeyError")
}

func TestPublishedDatasetOutlivesClient(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	memoryTask(s, "x")
	// the RPC may come before the client's flush on its stream
	s.wantParked(s.handle(&CoordOp{Op: &coord.PublishPut{Call: coord.Call{ReplyTo: 1}, Client: "c1", UID: "u1", Names: []any{"ds"},
		Keys: [][]protocol.Key{keys("x")}, Data: []any{"blob"}}}), 1)
	s.wantReply(s.handle(&CoordOp{Op: &coord.PublishFlush{Client: "c1", UID: "u1"}}), 1, nil)
	s.handle(&RemoveClient{Client: "c1"})
	s.wantStatus("x", "memory")
	eq(t, len(s.Coordination().PublishedNames()), 1, "datasets")

	s.handle(&CoordOp{Op: &coord.PublishFlush{Client: "c2", UID: "u2"}}) // flush first this time
	s.wantReply(s.handle(&CoordOp{Op: &coord.PublishPut{Call: coord.Call{ReplyTo: 2}, Client: "c2", UID: "u2", Names: []any{"ds"},
		Keys: [][]protocol.Key{keys("x")}, Data: []any{"blob"}}}), 2, "KeyError")
	s.handle(&CoordOp{Op: &coord.PublishFlush{Client: "c2", UID: "u3"}})
	s.handle(&CoordOp{Op: &coord.PublishDelete{Client: "c2", UID: "u3", Names: []any{"ds"}}})
	s.wantStatus("x", "forgotten")
}

// TestFireAndForgetWaitsForTheGraph: fire_and_forget's client-desires-keys
// comes on the submitting client's stream right after its update-graph; it
// must wait for that graph like the client's own ops, or the key is
// unknown, ignored, and the task never runs once the client lets go.
func TestFireAndForgetWaitsForTheGraph(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	out := s.handle(updateGraph("c1", "x"))
	s.handle(&ClientDesiresKeys{Client: fireAndForget, Stream: "c1", Keys: keys("x")})
	s.handle(&ClientReleasesKeys{Client: "c1", Stream: "c1", Keys: keys("x")})
	s.handle(&RemoveClient{Client: "c1"})
	s.handle(&GraphMaterialized{RequestID: out.Helper[0].ID, Client: "c1", Tasks: []GraphTask{task("x")}})
	s.wantStatus("x", "processing")
	s.finish("w1", "x")
	s.wantStatus("x", "forgotten") // done: fire-and-forget lets go
}

func TestMetadataNestedPaths(t *testing.T) {
	s := newTestState(t)
	s.handle(&CoordOp{Op: &coord.SetMetadata{Keys: []any{"a", "b"}, Value: int64(1)}})
	s.handle(&CoordOp{Op: &coord.SetMetadata{Keys: []any{"a", "c"}, Value: "x"}})
	got, ok := s.Coordination().Metadata([]any{"a"})
	eq(t, ok, true, "a exists")
	eq(t, got.(*protocol.Map).Get("c").(string), "x", "a.c")
	s.wantReply(s.handle(&CoordOp{Op: &coord.GetMetadata{Call: coord.Call{ReplyTo: 1}, Keys: []any{"a", "b"}}}), 1, int64(1))
	s.wantReply(s.handle(&CoordOp{Op: &coord.GetMetadata{Call: coord.Call{ReplyTo: 2}, Keys: []any{"z"}}}), 2, "KeyError")
	s.wantReply(s.handle(&CoordOp{Op: &coord.GetMetadata{Call: coord.Call{ReplyTo: 3}, Keys: []any{"z"}, Default: "d", HasDefault: true}}), 3, "d")
}
