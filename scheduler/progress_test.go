package scheduler

import (
	"testing"

	"daskgo/protocol"
)

// sumGraph is x-0..x-3 and sum-0, which needs them all.
func sumGraph() []GraphTask {
	return append(rootTasks("x", 4), task("sum-0", "x-0", "x-1", "x-2", "x-3"))
}

func (s *tstate) startProgress(x *StartProgress) *ProgressStarted {
	s.t.Helper()
	x.ReplyTo = 99
	v, ok := replyOf(s.handle(x), 99)
	if !ok {
		s.t.Fatal("no reply to StartProgress")
	}
	return v.(*ProgressStarted)
}

func (s *tstate) report(id int64) (*protocol.Map, bool) {
	s.t.Helper()
	m, final, ok := s.ProgressReport(id)
	if !ok {
		s.t.Fatalf("watch %d is gone", id)
	}
	return m, final
}

func count(t *testing.T, m *protocol.Map, field string) int64 {
	t.Helper()
	n, ok := m.Get(field).(int64)
	if !ok {
		t.Fatalf("%s is %s, not an int", field, protocol.String(m.Get(field)))
	}
	return n
}

// Progress over a graph: the keys and their dependencies are tracked,
// each processing -> memory counts once, and the watch finishes with the
// last; it answers {"all", "remaining", "status"} as ProgressBar's
// function does.
func TestProgressCountsToFinished(t *testing.T) {
	s := newTestState(t, withWorkers("w1:8"))
	s.submit("c1", sumGraph(), "sum-0")
	p := s.startProgress(&StartProgress{Keys: keys("sum-0"), Complete: true})
	eq(t, p.Missing, false, "all keys known")
	m, final := s.report(p.ID)
	eq(t, count(t, m, "all"), 5, "all")
	eq(t, count(t, m, "remaining"), 5, "remaining")
	eq(t, m.Get("status"), any(nil), "status None while running")
	eq(t, final, false, "not final")
	for _, key := range []string{"x-0", "x-1", "x-2", "x-3"} {
		s.finish("w1", key)
	}
	m, _ = s.report(p.ID)
	eq(t, count(t, m, "remaining"), 1, "remaining after the roots")
	s.finish("w1", "sum-0")
	m, final = s.report(p.ID)
	eq(t, count(t, m, "remaining"), 0, "remaining at the end")
	eq(t, m.Get("status"), any("finished"), "status")
	eq(t, final, true, "final")
	_, has := m.Lookup("exception")
	eq(t, has, false, "no exception when finished")
	s.handle(&StopProgress{ID: p.ID})
	eq(t, s.ProgressWatches(), 0, "dropped")
}

// complete=False leaves out what is already in memory; keys the client
// has not submitted yet make setup wait (Missing).
func TestProgressIncompleteAndMissing(t *testing.T) {
	s := newTestState(t, withWorkers("w1:8"))
	eq(t, s.startProgress(&StartProgress{Keys: keys("sum-0")}).Missing, true, "unknown key")
	eq(t, s.ProgressWatches(), 0, "no watch for a missing key")
	s.submit("c1", sumGraph(), "sum-0")
	s.finish("w1", "x-0")
	s.finish("w1", "x-1")
	p := s.startProgress(&StartProgress{Keys: keys("sum-0")})
	m, _ := s.report(p.ID)
	eq(t, count(t, m, "all"), 3, "all leaves out the computed")
	eq(t, count(t, m, "remaining"), 3, "remaining")
	full := s.startProgress(&StartProgress{Keys: keys("sum-0"), Complete: true})
	m, _ = s.report(full.ID)
	eq(t, count(t, m, "all"), 5, "complete counts all")
	eq(t, count(t, m, "remaining"), 3, "complete's remaining")
}

// An erred task stops the watch with its exception and key; a dependent
// erring after it changes nothing.
func TestProgressErred(t *testing.T) {
	s := newTestState(t, withWorkers("w1:8"))
	s.submit("c1", sumGraph(), "sum-0")
	p := s.startProgress(&StartProgress{Keys: keys("sum-0"), Complete: true})
	s.finish("w1", "x-0")
	s.fail("w1", "x-1")
	m, final := s.report(p.ID)
	eq(t, m.Get("status"), any("error"), "status")
	eq(t, final, true, "final")
	eq(t, m.Get("key").(protocol.Key), k("x-1"), "key")
	eq(t, string(m.Get("exception").([]byte)), "exc", "the worker's exception")
	eq(t, count(t, m, "remaining"), 4, "remaining frozen at the error")

	// a watch set up after the error starts erred, as setup's
	// transition(k, None, "erred") makes it
	late := s.startProgress(&StartProgress{Keys: keys("sum-0"), Complete: true})
	m, _ = s.report(late.ID)
	eq(t, m.Get("status"), any("error"), "late status")
	eq(t, m.Get("key").(protocol.Key), k("x-1"), "late key")
}

// MultiProgress groups by key_split, counts per group, and answers
// {"all": {group: n}, "remaining": {group: n}, "status"}.
func TestMultiProgressByPrefix(t *testing.T) {
	s := newTestState(t, withWorkers("w1:8"))
	s.submit("c1", sumGraph(), "sum-0")
	p := s.startProgress(&StartProgress{Keys: keys("sum-0"), Complete: true, Multi: true})
	s.finish("w1", "x-0")
	m, _ := s.report(p.ID)
	all, rem := m.Get("all").(*protocol.Map), m.Get("remaining").(*protocol.Map)
	eq(t, all.Get("x"), any(int64(4)), "all x")
	eq(t, all.Get("sum"), any(int64(1)), "all sum")
	eq(t, rem.Get("x"), any(int64(3)), "remaining x")
	eq(t, rem.Get("sum"), any(int64(1)), "remaining sum")
	for _, key := range []string{"x-1", "x-2", "x-3", "sum-0"} {
		s.finish("w1", key)
	}
	m, final := s.report(p.ID)
	eq(t, m.Get("status"), any("finished"), "status")
	eq(t, final, true, "final")
}

// A custom group_by: StartProgress lists the keys, SetProgressGroups names
// their groups (what the helper computed), and the counts follow.
func TestMultiProgressCustomGroups(t *testing.T) {
	s := newTestState(t, withWorkers("w1:8"))
	s.submit("c1", sumGraph(), "sum-0")
	p := s.startProgress(&StartProgress{Keys: keys("sum-0"), Complete: true, Multi: true, Grouping: GroupByCustom})
	eq(t, len(p.AllKeys), 5, "keys to group")
	s.finish("w1", "x-0") // before the groups arrive: still counted
	groups := make([]any, len(p.AllKeys))
	for i, key := range p.AllKeys {
		groups[i] = "odd"
		if key == k("x-0") || key == k("x-2") || key == k("sum-0") {
			groups[i] = []any{"even", int64(0)}
		}
	}
	s.handle(&SetProgressGroups{ID: p.ID, Groups: groups})
	m, _ := s.report(p.ID)
	all, rem := m.Get("all").(*protocol.Map), m.Get("remaining").(*protocol.Map)
	eq(t, all.Len(), 2, "two groups")
	eq(t, all.Get("odd"), any(int64(2)), "all odd")
	eq(t, rem.Get("odd"), any(int64(2)), "remaining odd")
	for _, e := range all.Entries {
		if e.Key != "odd" {
			eq(t, e.Value, any(int64(3)), "all even")
		}
	}
	for _, e := range rem.Entries {
		if e.Key != "odd" {
			eq(t, e.Value, any(int64(2)), "remaining even")
		}
	}
}

// A remaining key forgotten (the client cancelled it) stops a Progress
// with an error naming it.
func TestProgressForgotten(t *testing.T) {
	s := newTestState(t, withWorkers("w1:8"))
	s.submit("c1", sumGraph(), "sum-0")
	p := s.startProgress(&StartProgress{Keys: keys("sum-0"), Complete: true})
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("sum-0")})
	m, final := s.report(p.ID)
	eq(t, m.Get("status"), any("error"), "status")
	eq(t, final, true, "final")
	_, has := m.Lookup("key")
	eq(t, has, true, "names the key")
}

// group_by="spans": each key's group's span, named (", ".join(name), id);
// keys outside any span in ("default", "default").
func TestMultiProgressBySpans(t *testing.T) {
	s := newTestState(t, withWorkers("w1:8"))
	tasks := sumGraph()
	for i := range 4 {
		tasks[i].Annotations = &Annotations{Verbatim: protocol.NewMap("span", "x"),
			Span: &SpanAnnotation{Name: []string{"outer", "prep"}, IDs: []string{"o", "p"}}}
	}
	s.submit("c1", tasks, "sum-0")
	p := s.startProgress(&StartProgress{Keys: keys("sum-0"), Complete: true, Multi: true, Grouping: GroupBySpans})
	m, _ := s.report(p.ID)
	all := m.Get("all").(*protocol.Map)
	eq(t, all.Len(), 2, "two groups")
	for _, e := range all.Entries {
		g := e.Key.([]any)
		switch g[1] {
		case "p":
			eq(t, g[0], any("outer, prep"), "span name")
			eq(t, e.Value, any(int64(4)), "x-* in the span")
		case "default":
			eq(t, e.Value, any(int64(1)), "sum-0 outside")
		default:
			t.Fatalf("group %v", g)
		}
	}
}
