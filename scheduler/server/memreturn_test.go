package server

import (
	"testing"
	"time"

	"daskgo/scheduler"
)

// Only a graph of bigGraphTasks or more kicks the returner, and kicks
// while one is pending fold into it.
func TestMemoryReturnerKicksOnBigGraphsOnly(t *testing.T) {
	m := newMemoryReturner(wallClock{})
	m.noteStimulus(&scheduler.GraphMaterialized{Tasks: make([]scheduler.GraphTask, bigGraphTasks-1)}, bigGraphTasks-1)
	m.noteStimulus(&scheduler.AddClient{Client: "c"}, bigGraphTasks-1)
	if len(m.kick) != 0 {
		t.Fatal("a small graph or another stimulus kicked the memory returner")
	}
	big := &scheduler.GraphMaterialized{Tasks: make([]scheduler.GraphTask, bigGraphTasks)}
	m.noteStimulus(big, 2*bigGraphTasks)
	m.noteStimulus(big, 3*bigGraphTasks)
	if len(m.kick) != 1 {
		t.Fatalf("two big graphs left %d kicks pending, want 1", len(m.kick))
	}
}

// Forgetting bigGraphTasks tasks from the high-water mark kicks it, once;
// forgetting fewer does not.
func TestMemoryReturnerKicksAfterBigReleases(t *testing.T) {
	m := newMemoryReturner(wallClock{})
	other := &scheduler.AddClient{Client: "c"}
	m.noteStimulus(other, 3*bigGraphTasks)
	m.noteStimulus(other, 2*bigGraphTasks+1)
	if len(m.kick) != 0 {
		t.Fatal("forgetting fewer than bigGraphTasks tasks kicked the memory returner")
	}
	m.noteStimulus(other, 2*bigGraphTasks)
	if len(m.kick) != 1 {
		t.Fatal("forgetting bigGraphTasks tasks did not kick the memory returner")
	}
	<-m.kick
	m.noteStimulus(other, 2*bigGraphTasks-10)
	if len(m.kick) != 0 {
		t.Fatal("the high-water mark was not reset after the kick")
	}
}

// An idle return is due idleReturn after the last stimulus that was not
// the clock or a heartbeat, and only if one came since the last return.
func TestMemoryReturnerIdleReturn(t *testing.T) {
	m := newMemoryReturner(wallClock{})
	m.noteStimulus(&scheduler.Tick{}, 0)
	m.noteStimulus(&scheduler.WorkerHeartbeat{}, 0)
	if m.idleDue(time.Now().Add(time.Hour)) {
		t.Fatal("clock and heartbeats alone made an idle return due")
	}
	m.noteStimulus(&scheduler.AddClient{Client: "c"}, 0)
	now := time.Now()
	if m.idleDue(now.Add(idleReturn / 2)) {
		t.Fatal("due before idleReturn")
	}
	if !m.idleDue(now.Add(idleReturn + time.Second)) {
		t.Fatal("not due after idleReturn")
	}
	m.busy.Store(false) // what run does when it returns memory
	if m.idleDue(now.Add(time.Hour)) {
		t.Fatal("due again with nothing since the last return")
	}
}
