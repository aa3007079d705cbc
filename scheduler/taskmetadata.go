package scheduler

import (
	"fmt"

	"daskgo/protocol"
	"daskgo/scheduler/coord"
)

// get_task_metadata's collections (distributed.scheduler.
// CollectTaskMetaDataPlugin, added by start_task_metadata and removed by
// stop_task_metadata): each collects the keys of the graphs submitted
// while it runs, and records a key's final state (memory or erred) and its
// metadata (what the worker's task-finished carried) when the task first
// reaches one of them. Nothing is kept while no collection runs: the
// transition hook is one length check.
//
// A collection has no owner in distributed (its name is a uuid the client
// made); the outer ring frees one whose starting connection closed
// (StopTaskMetadata.CallerGone), so a client that vanished without
// stopping it leaves nothing behind.

type taskMetaCollection struct {
	gen   int64                     // tells apart collections of one name
	keys  map[protocol.Key]struct{} // submitted, not yet final
	index map[protocol.Key]int      // position in done
	done  []taskMetaRecord          // in the order they became final
}

type taskMetaRecord struct {
	key      protocol.Key
	state    Status
	metadata any // the worker's, opaque; nil for None
}

// startTaskMetadata mirrors Scheduler.start_task_metadata: a plugin of the
// same name is replaced, as add_plugin replaces it. The reply is the
// collection's generation, for StopTaskMetadata.CallerGone.
func (s *State) startTaskMetadata(x *StartTaskMetadata) {
	if s.taskMeta == nil {
		s.taskMeta = map[string]*taskMetaCollection{}
	}
	s.taskMetaGen++
	s.taskMeta[x.Name] = &taskMetaCollection{gen: s.taskMetaGen, keys: map[protocol.Key]struct{}{}, index: map[protocol.Key]int{}}
	s.reply(x.ReplyTo, s.taskMetaGen)
}

// TaskMetadataRuns reports whether the collection of that name and
// generation still runs.
func (s *State) TaskMetadataRuns(name string, gen int64) bool {
	c := s.taskMeta[name]
	return c != nil && c.gen == gen
}

// stopTaskMetadata mirrors Scheduler.stop_task_metadata.
func (s *State) stopTaskMetadata(x *StopTaskMetadata) {
	c := s.taskMeta[x.Name]
	if x.CallerGone && (c == nil || c.gen != x.Gen) {
		return // stopped already, or another caller's collection now
	}
	if c == nil {
		s.reply(x.ReplyTo, &coord.RemoteException{Module: "builtins", Class: "ValueError",
			Text: fmt.Sprintf("Expected to find exactly one CollectTaskMetaDataPlugin with name %s but found 0.", x.Name)})
		return
	}
	delete(s.taskMeta, x.Name)
	if len(s.taskMeta) == 0 {
		s.taskMeta = nil
	}
	if x.CallerGone {
		return
	}
	metadata := &protocol.Map{Entries: make([]protocol.Entry, 0, len(c.done))}
	state := &protocol.Map{Entries: make([]protocol.Entry, 0, len(c.done))}
	for _, r := range c.done {
		metadata.Entries = append(metadata.Entries, protocol.Entry{Key: r.key, Value: r.metadata})
		state.Entries = append(state.Entries, protocol.Entry{Key: r.key, Value: r.state.String()})
	}
	s.reply(x.ReplyTo, protocol.NewMap("metadata", metadata, "state", state))
}

// taskMetaGraph is CollectTaskMetaDataPlugin.update_graph: a graph's keys
// join every running collection.
func (s *State) taskMetaGraph(keys []protocol.Key) {
	for _, c := range s.taskMeta {
		for _, k := range keys {
			c.keys[k] = struct{}{}
		}
	}
}

// taskMetaTransition is CollectTaskMetaDataPlugin.transition: a collected
// key that reached memory or erred is recorded (once: it leaves keys).
func (s *State) taskMetaTransition(ts *TaskState) {
	if ts.state != StatusMemory && ts.state != StatusErred {
		return
	}
	for _, c := range s.taskMeta {
		if _, ok := c.keys[ts.Key]; !ok {
			continue
		}
		delete(c.keys, ts.Key)
		r := taskMetaRecord{key: ts.Key, state: ts.state, metadata: ts.x().metadata}
		if i, seen := c.index[ts.Key]; seen {
			c.done[i] = r // a dict update keeps the key's place
			continue
		}
		c.index[ts.Key] = len(c.done)
		c.done = append(c.done, r)
	}
}

// TaskMetadataCollections is the number of collections running.
func (s *State) TaskMetadataCollections() int { return len(s.taskMeta) }
