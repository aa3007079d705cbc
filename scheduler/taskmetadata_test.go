package scheduler

import (
	"testing"

	"daskgo/protocol"
)

func (s *tstate) stopMetadata(name string, id int64) (metadata, state *protocol.Map) {
	s.t.Helper()
	v, ok := replyOf(s.handle(&StopTaskMetadata{Name: name, ReplyTo: id}), id)
	if !ok {
		s.t.Fatalf("no reply to stop_task_metadata %s", name)
	}
	m := v.(*protocol.Map)
	return m.Get("metadata").(*protocol.Map), m.Get("state").(*protocol.Map)
}

// A collection records the keys of the graphs submitted while it runs,
// each once, when it reaches memory or erred, with the metadata the
// worker's task-finished carried; graphs from before it started are not
// its business.
func TestTaskMetadataCollectsFinalStates(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"))
	s.submit("c1", []GraphTask{task("before")})
	s.handle(&StartTaskMetadata{Name: "m", ReplyTo: 1})
	eq(t, s.TaskMetadataCollections(), 1, "running")
	s.submit("c1", []GraphTask{task("x"), task("y")}, "x", "y")
	s.finish("w1", "before")
	ts := s.Task(k("x"))
	s.handle(&TaskFinished{Worker: addr("w1"), Key: k("x"), RunID: ts.runID, NBytes: 8,
		StartStops: []StartStop{{Action: "compute", Start: 1, Stop: 2}}, Metadata: protocol.Raw{0x81, 0xa1, 'a', 0x01}})
	s.fail("w1", "y")
	metadata, state := s.stopMetadata("m", 2)
	eq(t, state.Len(), 2, "two keys")
	eq(t, state.Entries[0].Key.(protocol.Key), k("x"), "first final")
	eq(t, state.Entries[0].Value.(string), "memory", "x")
	eq(t, state.Entries[1].Value.(string), "erred", "y")
	eq(t, string(metadata.Entries[0].Value.(protocol.Raw)), string([]byte{0x81, 0xa1, 'a', 0x01}), "the worker's metadata")
	eq(t, metadata.Entries[1].Value, any(nil), "none for y")
	eq(t, s.TaskMetadataCollections(), 0, "nothing kept once stopped")
	s.wantReply(s.handle(&StopTaskMetadata{Name: "m", ReplyTo: 3}), 3, "ValueError")
}

// The collection of a caller that left is freed by its generation; a
// newer collection of the same name is left alone.
func TestTaskMetadataFreedWhenItsCallerLeaves(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	gen1, _ := replyOf(s.handle(&StartTaskMetadata{Name: "m", ReplyTo: 1}), 1)
	gen2, _ := replyOf(s.handle(&StartTaskMetadata{Name: "m", ReplyTo: 2}), 2) // replaces it, as add_plugin does
	eq(t, s.TaskMetadataRuns("m", gen1.(int64)), false, "replaced")
	s.handle(&StopTaskMetadata{Name: "m", CallerGone: true, Gen: gen1.(int64)})
	eq(t, s.TaskMetadataRuns("m", gen2.(int64)), true, "the newer one stays")
	out := s.handle(&StopTaskMetadata{Name: "m", CallerGone: true, Gen: gen2.(int64)})
	eq(t, len(out.Replies), 0, "no reply for a caller that left")
	eq(t, s.TaskMetadataCollections(), 0, "freed")
}
