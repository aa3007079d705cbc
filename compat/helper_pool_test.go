package compat

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"daskgo/compat/venv"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// stallGraph writes an update-graph whose expression, when the helper
// unpickles it, waits until release exists (then materializing fails: the
// expression is None). It is what a graph argument that takes long to load
// does to a helper.
func stallGraph(t *testing.T, dir, release string) *protocol.Map {
	t.Helper()
	out := filepath.Join(dir, "stall.bin")
	code := `
import struct, sys
from distributed.protocol import dumps
from distributed.protocol.serialize import Serialized, serialize
release, out = sys.argv[1], sys.argv[2]
class Stall:
    def __reduce__(self):
        return (exec, ("import os, time\nwhile not os.path.exists(%r): time.sleep(0.01)" % release,))
header, frames = serialize(Stall(), serializers=("pickle",))
frames = dumps({"op": "update-graph", "expr_ser": Serialized(header, frames), "keys": {"stall"}})
lengths = [memoryview(f).nbytes for f in frames]
with open(out, "wb") as f:
    f.write(struct.pack(f"<QQ{len(frames)}Q", 8 * (1 + len(frames)) + sum(lengths), len(frames), *lengths))
    for fr in frames:
        f.write(fr)
`
	if b, err := exec.Command(venv.Python(t), "-c", code, release, out).CombinedOutput(); err != nil {
		t.Fatalf("make the stall graph: %v\n%s", err, b)
	}
	msg, ok := readFramed(t, out).(*protocol.Map)
	if !ok {
		t.Fatal("stall graph is not a dict")
	}
	return msg
}

func startPool(t *testing.T, cfg Config) *HelperPool {
	t.Helper()
	cfg.Python = venv.Python(t)
	cfg.Log = testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := StartPool(ctx, cfg)
	if err != nil {
		t.Fatalf("start helper pool: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func awaitPool(t *testing.T, p *HelperPool, within time.Duration) *scheduler.GraphMaterialized {
	t.Helper()
	select {
	case st := <-p.Results():
		g, ok := st.(*scheduler.GraphMaterialized)
		if !ok {
			t.Fatalf("answer %T, want a GraphMaterialized", st)
		}
		return g
	case <-time.After(within):
		t.Fatalf("no answer within %v", within)
		return nil
	}
}

// A helper stalled on one client's graph does not hold another client's
// graph behind it: a spare helper starts and answers it while the first is
// still stalled; the stalled graph is answered once it moves; the spare
// is closed after it has been idle.
func TestPoolSpareHelperServesWhileOneStalls(t *testing.T) {
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	stall := stallGraph(t, dir, release)
	p := startPool(t, Config{SpareAfter: 50 * time.Millisecond, SpareIdle: 300 * time.Millisecond})
	if err := p.Submit(helperRequest(t, 1, "Client-stalling", stall)); err != nil {
		t.Fatal(err)
	}
	if err := p.Submit(helperRequest(t, 2, "Client-small", updateGraph(t, "submit_inc"))); err != nil {
		t.Fatal(err)
	}
	small := awaitPool(t, p, 2*time.Minute)
	if _, err := os.Stat(release); err == nil {
		t.Fatal("bug in the test: released before the small graph was answered")
	}
	if small.RequestID != 2 || small.Err != nil || len(small.Tasks) != 1 {
		t.Fatalf("the small graph's answer: request %d, err %+v, %d tasks", small.RequestID, small.Err, len(small.Tasks))
	}
	if n := len(p.PIDs()); n != 2 {
		t.Fatalf("%d helpers running while one stalls, want 2 (the spare)", n)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stalled := awaitPool(t, p, time.Minute)
	if stalled.RequestID != 1 || stalled.Err == nil {
		t.Fatalf("the stalled graph's answer: request %d, err %+v; want request 1 failing (its expression is None)",
			stalled.RequestID, stalled.Err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(p.PIDs()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the idle spare was not closed: %d helpers", len(p.PIDs()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Graphs submitted while the only helper is free never start a spare, and
// every graph gets exactly one answer, in order for one helper.
func TestPoolOneHelperWhenNothingWaits(t *testing.T) {
	p := startPool(t, Config{SpareAfter: time.Hour})
	for id := int64(1); id <= 5; id++ {
		if err := p.Submit(helperRequest(t, id, "Client-test", updateGraph(t, "submit_inc"))); err != nil {
			t.Fatal(err)
		}
	}
	for id := int64(1); id <= 5; id++ {
		if g := awaitPool(t, p, time.Minute); g.RequestID != id || g.Err != nil {
			t.Fatalf("answer %d: request %d err %+v", id, g.RequestID, g.Err)
		}
	}
	if n := len(p.PIDs()); n != 1 {
		t.Fatalf("%d helpers, want 1", n)
	}
}

// A dispatched job leaves nothing behind in the queue's backing array,
// which a one-job queue keeps after the pop: its update-graph message
// would stay alive until the next graph.
func TestPoolPopClearsTheSlot(t *testing.T) {
	req := scheduler.HelperRequest{ID: 1, Client: "Client-test", Msg: protocol.NewMap("op", "update-graph")}
	p := &HelperPool{queue: []poolJob{{graph: &req}}}
	backing := p.queue[:1:1]
	if j := p.popLocked(); j.graph != &req {
		t.Fatalf("popped %+v", j)
	}
	if backing[0].graph != nil || len(p.queue) != 0 {
		t.Fatalf("the slot still holds %+v (queue %d)", backing[0], len(p.queue))
	}
}
