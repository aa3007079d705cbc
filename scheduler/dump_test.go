package scheduler

import (
	"testing"

	"daskgo/protocol"
)

func refKeys(refs []Ref) []protocol.Key {
	out := make([]protocol.Key, len(refs))
	for i, r := range refs {
		out[i] = r.Key
	}
	return out
}

func dumpedTask(d *ClusterDump, key string) *TaskDump {
	for i := range d.Tasks {
		if d.Tasks[i].Key == k(key) {
			return &d.Tasks[i]
		}
	}
	return nil
}

// The dump's copy holds what _to_dict writes: tasks with their references
// by key, workers by address, clients, groups and the transition log.
func TestDumpStateCopiesTheEngine(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"))
	s.submit("c1", []GraphTask{task("a"), task("b"), task("c", "a", "b")}, "c")
	s.finish("w1", "a")
	d := s.DumpState()
	eq(t, len(d.Tasks), 3, "tasks")
	a, c := dumpedTask(d, "a"), dumpedTask(d, "c")
	eq(t, a.State, StatusMemory, "a")
	eqSlice(t, d.NamesIn(a.WhoHas), []string{addr("w1")}, "a's holder")
	eqSlice(t, refKeys(d.RefsIn(a.Dependents)), keys("c"), "a's dependents")
	eqSlice(t, d.RefsIn(c.Dependencies), []Ref{{k("a"), StatusMemory}, {k("b"), StatusProcessing}}, "c's dependencies, with their states")
	eqSlice(t, refKeys(d.RefsIn(c.WaitingOn)), keys("b"), "c waits on b")
	eqSlice(t, d.NamesIn(c.WhoWants), []string{"c1"}, "c's client")
	eq(t, dumpedTask(d, "b").ProcessingOn, int32(0), "b processing on the first worker")
	eq(t, len(d.Workers), 1, "workers")
	eqSlice(t, refKeys(d.RefsIn(d.Workers[0].HasWhat)), keys("a"), "w1 holds a")
	eq(t, d.Groups[c.Group].Name, "c", "c's group")
	eq(t, c.Rare, int32(-1), "nothing rare")
	eq(t, len(d.Log) > 0, true, "transition log")
	eq(t, d.TransitionCounter, s.log.total, "counter")
	var ids []string
	for _, c := range d.Clients {
		ids = append(ids, c.ID)
	}
	eqSlice(t, ids, []string{"fire-and-forget", "c1"}, "clients")
}

// The copy aliases nothing the engine goes on to change.
func TestDumpStateIsACopy(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("a"), task("b", "a")}, "b")
	d := s.DumpState()
	refs := append([]Ref(nil), d.Refs...)
	names := append([]string(nil), d.Names...)
	logLen := len(d.Log)
	s.finish("w1", "a")
	s.finish("w1", "b")
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("b")})
	eq(t, dumpedTask(d, "a").State, StatusProcessing, "a as it was")
	eqSlice(t, d.Refs, refs, "refs unchanged")
	eqSlice(t, d.Names, names, "names unchanged")
	eq(t, len(d.Log), logLen, "log unchanged")
}
