package scheduler

import (
	"testing"

	"daskgo/protocol"
)

// The run index finds a processing task by run id and key, misses on a
// wrong key or a forgotten task, and its window moves past finished runs
// but not past the oldest one still in flight.
func TestRunIndex(t *testing.T) {
	var r runIndex
	tasks := make([]*TaskState, 5)
	for i := range tasks {
		tasks[i] = &TaskState{Key: protocol.StrKey("t-" + string(rune('a'+i))), state: StatusProcessing, runID: int64(10 + i)}
		r.add(tasks[i].runID, tasks[i])
	}
	if got := r.find(12, tasks[2].Key); got != tasks[2] {
		t.Fatalf("find(12) = %v, want t-c", got)
	}
	if got := r.find(12, tasks[3].Key); got != nil {
		t.Errorf("find with another task's key = %v, want nil", got.Key)
	}
	if got := r.find(99, tasks[0].Key); got != nil {
		t.Errorf("find of an id never sent = %v", got.Key)
	}
	// finishing runs behind the oldest in flight keeps the window's start
	tasks[1].state = StatusMemory
	r.drop(11)
	if r.base != 10 || len(r.items) != 5 {
		t.Errorf("window %d+%d after dropping a middle run, want 10+5", r.base, len(r.items))
	}
	// finishing the oldest moves it past every finished run
	tasks[0].state = StatusMemory
	r.drop(10)
	if r.base != 12 || len(r.items) != 3 {
		t.Errorf("window %d+%d after dropping the front, want 12+3", r.base, len(r.items))
	}
	tasks[2].state = StatusForgotten
	if got := r.find(12, tasks[2].Key); got != nil {
		t.Errorf("find of a forgotten task = %v", got.Key)
	}
	for _, id := range []int64{12, 13, 14} {
		r.drop(id)
	}
	if len(r.items) != 0 {
		t.Errorf("%d entries left after every run ended", len(r.items))
	}
	r.add(20, tasks[4])
	if r.base != 20 || r.find(20, tasks[4].Key) != tasks[4] {
		t.Errorf("an empty index restarts at the next id: base %d", r.base)
	}
}
