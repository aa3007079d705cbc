package server

import (
	"fmt"
	"testing"
	"time"

	"daskgo/scheduler"
)

// A tick builds the dashboard's snapshot only when the last one was read:
// nobody watching costs nothing per tick.
func TestSnapshotBuiltOnTickOnlyAfterARead(t *testing.T) {
	st := scheduler.New(scheduler.Config{})
	var p snapshots
	t0 := time.Unix(1000, 0)

	p.onTick(st, t0)
	first := p.cur.Load()
	if first == nil {
		t.Fatal("the first tick built no snapshot")
	}
	p.onTick(st, t0.Add(time.Second))
	if p.cur.Load() != first {
		t.Fatal("a tick rebuilt a snapshot nobody read")
	}
	if got := p.builtAt.Load(); got != t0.UnixNano() {
		t.Fatalf("builtAt moved without a build: %d", got)
	}
	p.read.Store(true)
	p.onTick(st, t0.Add(2*time.Second))
	if p.cur.Load() == first {
		t.Fatal("a tick after a read did not rebuild")
	}
	if p.read.Load() {
		t.Fatal("the build did not clear the read mark")
	}
}

// The snapshot's cost at 1,000 workers: what a tick paid twice a second
// before snapshots were built only when read.
func BenchmarkSnapshot1000Workers(b *testing.B) {
	st := scheduler.New(scheduler.Config{})
	at := time.Unix(1000, 0)
	for i := range 1000 {
		addr := fmt.Sprintf("tcp://127.0.0.1:%d", 10000+i)
		st.Handle(&scheduler.AddWorker{Base: scheduler.Base{ID: "add", At: at}, Address: addr, Name: addr,
			NameValue: addr, NThreads: 1, MemoryLimit: 1 << 30, Status: "running"})
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(st.Snapshot().Workers) != 1000 {
			b.Fatal("workers missing from the snapshot")
		}
	}
}
