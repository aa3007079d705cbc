package scheduler

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"daskgo/protocol"
)

// scenario runs a mixed workload and returns every outbox encoded.
func scenario(t *testing.T) [][]byte {
	s := newTestState(t, withWorkers("w1:2", "w2:1", "w3:3"), withSaturation(1.1))
	var outs []Outbox
	tasks := rootTasks("x", 30)
	tasks = append(tasks, task("sum", "x-0", "x-1", "x-2"))
	outs = append(outs, s.submit("c1", tasks))
	for i := 0; i < 6; i++ {
		for _, ws := range s.workerOrder.Snapshot() {
			for _, key := range s.Processing([]string{ws.Address})[ws.Address] {
				outs = append(outs, s.finish(strings.TrimSuffix(strings.TrimPrefix(ws.Address, "tcp://"), ":8000"), key.String()))
				break
			}
		}
	}
	outs = append(outs, s.handle(&RemoveWorker{Worker: addr("w2")}))
	outs = append(outs, s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("x-5", "x-6")}))
	return encodeOutboxes(t, outs)
}

// encodeOutboxes encodes every message of outs, each prefixed with its
// peer, workers then clients in address order.
func encodeOutboxes(t *testing.T, outs []Outbox) [][]byte {
	t.Helper()
	var enc [][]byte
	for _, o := range outs {
		for _, w := range sortedAddrs(t, o.Workers) {
			for _, m := range o.Workers.Of(w) {
				frames, err := protocol.Encode(m, nil)
				if err != nil {
					t.Fatalf("encode %v: %v", protocol.String(m), err)
				}
				enc = append(enc, append([]byte(w), bytes.Join(frames, nil)...))
			}
		}
		for _, c := range sortedAddrs(t, o.Clients) {
			for _, m := range o.Clients.Of(c) {
				frames, err := protocol.Encode(m, nil)
				if err != nil {
					t.Fatalf("encode %v: %v", protocol.String(m), err)
				}
				enc = append(enc, append([]byte(c), bytes.Join(frames, nil)...))
			}
		}
	}
	return enc
}

// sortedAddrs lists the peers of l in address order, failing t when one
// is listed twice (an Outbox holds each peer once).
func sortedAddrs(t *testing.T, l Peers) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	for _, p := range l {
		if seen[p.Peer] {
			t.Fatalf("peer %s listed twice in one outbox", p.Peer)
		}
		seen[p.Peer] = true
		out = append(out, p.Peer)
	}
	slices.Sort(out)
	return out
}

func TestSameStimuliSameOutboxes(t *testing.T) {
	a, b := scenario(t), scenario(t)
	if len(a) != len(b) || len(a) < 40 {
		t.Fatalf("runs differ in length: %d vs %d", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("message %d differs between identical runs", i)
		}
	}
}

func TestBrokenInvariantPanicsWithStory(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("a")})
	s.Task(k("a")).processingOn = nil // corrupt the state
	defer func() {
		r := recover()
		msg, _ := r.(string)
		if !strings.Contains(msg, "invariant broken") || !strings.Contains(msg, "story of") {
			t.Fatalf("panic %v lacks the invariant and story", r)
		}
	}()
	s.handle(&HeartbeatClient{Client: "c1"})
	t.Fatal("broken state went unnoticed")
}

func TestFinishedAgainAddsReplica(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.submit("c1", []GraphTask{task("a")})
	runID := s.Task(k("a")).runID
	holder := s.Task(k("a")).processingOn.Address
	s.handle(&TaskFinished{Worker: holder, Key: k("a"), RunID: runID, NBytes: 1})
	other := addr("w1")
	if other == holder {
		other = addr("w2")
	}
	s.handle(&TaskFinished{Worker: other, Key: k("a"), RunID: runID, NBytes: 1})
	eq(t, len(s.WhoHas(keys("a"))[k("a")]), 2, "second copy tracked")
	eq(t, len(s.HasWhat([]string{other})[other]), 1, "has_what")
}
