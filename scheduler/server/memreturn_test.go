package server

import (
	"testing"

	"daskgo/scheduler"
)

// Only a graph of bigGraphTasks or more kicks the returner, and kicks
// while one is pending fold into it.
func TestMemoryReturnerKicksOnBigGraphsOnly(t *testing.T) {
	m := newMemoryReturner()
	m.noteStimulus(&scheduler.GraphMaterialized{Tasks: make([]scheduler.GraphTask, bigGraphTasks-1)})
	m.noteStimulus(&scheduler.AddClient{Client: "c"})
	if len(m.kick) != 0 {
		t.Fatal("a small graph or another stimulus kicked the memory returner")
	}
	big := &scheduler.GraphMaterialized{Tasks: make([]scheduler.GraphTask, bigGraphTasks)}
	m.noteStimulus(big)
	m.noteStimulus(big)
	if len(m.kick) != 1 {
		t.Fatalf("two big graphs left %d kicks pending, want 1", len(m.kick))
	}
}
