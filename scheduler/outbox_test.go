package scheduler

import (
	"fmt"
	"testing"

	"daskgo/protocol"
)

// A recycled peer list that held many peers is dropped, not reused (nor
// its slices, which went to many peers once); a short one is kept, emptied,
// and the next Handle's messages go into it.
func TestRecycleKeepsOnlyShortPeerLists(t *testing.T) {
	s := New(Config{})
	outbox := func(peers int) Outbox {
		var l Peers
		for i := range peers {
			l = append(l, PeerMsgs{Peer: fmt.Sprintf("tcp://w%d", i), Msgs: []*protocol.Map{msgClose("x")}})
		}
		return Outbox{Workers: l}
	}
	big := outbox(spareListMax + 1)
	s.Recycle(&big)
	if s.pool.workers != nil {
		t.Fatalf("a list of %d peers was kept for reuse", spareListMax+1)
	}
	small := outbox(2)
	arr := &small.Workers[0]
	s.Recycle(&small)
	if len(s.pool.workers) != 0 || cap(s.pool.workers) < 2 || &s.pool.workers[:1][0] != arr {
		t.Fatalf("a list of 2 peers was not kept, emptied, for reuse")
	}
	if e := s.pool.workers[:2]; e[0].Peer != "" || e[1].Msgs != nil {
		t.Fatalf("the kept list still names its peers: %+v", e)
	}
	var out Outbox
	s.begin(&Base{ID: "next"}, &out)
	s.toWorkerAddr("tcp://x", msgClose("y"))
	s.out = nil
	if len(out.Workers) != 1 || &out.Workers[0] != arr {
		t.Fatalf("the next outbox does not reuse the kept list")
	}
}

// A Handle's messages to one peer stay in one entry, in the order written,
// whichever way each was addressed (the worker, or only its address) and
// however many peers the Handle writes to: past peerScanMax the list is
// found through a map.
func TestOutboxHoldsEachPeerOnceInOrder(t *testing.T) {
	for _, peers := range []int{3, peerScanMax + 5} {
		var specs []string
		for i := range peers {
			specs = append(specs, fmt.Sprintf("p%d:1", i))
		}
		s := newTestState(t, withWorkers(specs...))
		var ws []*WorkerState
		for i := range peers {
			ws = append(ws, s.Worker(addr(fmt.Sprintf("p%d", i))))
		}
		var out Outbox
		s.begin(&Base{ID: "many"}, &out)
		for round := range 3 {
			for i, w := range ws {
				m := protocol.NewMap("round", int64(round), "i", int64(i))
				if (round+i)%2 == 0 {
					s.toWorker(w, m)
				} else {
					s.toWorkerAddr(w.Address, m)
				}
			}
			s.toClientID("c", protocol.NewMap("round", int64(round)))
		}
		s.out = nil
		if len(out.Workers) != peers || len(out.Clients) != 1 {
			t.Fatalf("%d peers: %d worker entries, %d client entries", peers, len(out.Workers), len(out.Clients))
		}
		for i, p := range out.Workers {
			if p.Peer != ws[i].Address || len(p.Msgs) != 3 {
				t.Fatalf("%d peers: entry %d is %s with %d messages", peers, i, p.Peer, len(p.Msgs))
			}
			for round, m := range p.Msgs {
				if m.Get("round") != any(int64(round)) || m.Get("i") != any(int64(i)) {
					t.Fatalf("%d peers: message %d to %s is %s", peers, round, p.Peer, protocol.String(m))
				}
			}
		}
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
