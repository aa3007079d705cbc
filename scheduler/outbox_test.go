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
