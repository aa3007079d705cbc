package scheduler

import (
	"fmt"
	"reflect"
	"testing"

	"daskgo/protocol"
)

// A recycled outbox map that held many peers is dropped, not reused: a Go
// map never shrinks, and every later Recycle would range over (and clear)
// its whole size to hand back a peer or two.
func TestRecycleDropsAnOutboxMapThatHeldManyPeers(t *testing.T) {
	s := New(Config{})
	outbox := func(peers int) Outbox {
		m := map[string][]*protocol.Map{}
		for i := range peers {
			m[fmt.Sprintf("tcp://w%d", i)] = []*protocol.Map{msgClose("x")}
		}
		return Outbox{Workers: m}
	}
	same := func(a, b map[string][]*protocol.Map) bool {
		return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
	}

	big := outbox(spareMapMax + 1)
	bigMap := big.Workers
	s.Recycle(&big)
	if s.pool.workers != nil && same(s.pool.workers, bigMap) {
		t.Fatalf("a map of %d peers was kept for reuse", spareMapMax+1)
	}

	small := outbox(2)
	smallMap := small.Workers
	s.Recycle(&small)
	if !same(s.pool.workers, smallMap) || len(s.pool.workers) != 0 {
		t.Fatalf("a map of 2 peers was not kept, emptied, for reuse")
	}
	if got := takeMap(&s.pool.workers); !same(got, smallMap) {
		t.Fatalf("the next outbox does not reuse the kept map")
	}
}

// A recycled Outbox.Hooks is reused emptied: the next Handle's events are
// its own only, in the array handed back, and a burst's big array is not
// kept.
func TestRecycleReusesHookEventsEmptied(t *testing.T) {
	s := New(Config{})
	s.setHooks(AllHooks)
	emit := func(n int) Outbox {
		var out Outbox
		s.begin(&Base{ID: fmt.Sprintf("s-%d", n)}, &out)
		for i := range n {
			s.hook(HookEvent{Hook: HookAddWorker, Worker: fmt.Sprintf("tcp://w%d", i)})
		}
		s.out = nil
		return out
	}
	first := emit(3)
	arr := &first.Hooks[:1][0]
	s.Recycle(&first)
	second := emit(2)
	if len(second.Hooks) != 2 || second.Hooks[0].StimulusID != "s-2" || second.Hooks[1].Worker != "tcp://w1" {
		t.Fatalf("second outbox's hooks %+v, want its own two", second.Hooks)
	}
	if &second.Hooks[0] != arr {
		t.Fatalf("the recycled hooks array was not reused")
	}
	if stale := second.Hooks[:3][2]; stale.Worker != "" {
		t.Fatalf("a recycled event was left in the array: %+v", stale)
	}
	s.Recycle(&second)
	burst := emit(spareHooksMax + 1)
	s.Recycle(&burst)
	if s.pool.hooks != nil {
		t.Fatalf("a burst's array of %d events was kept", cap(burst.Hooks))
	}
}
