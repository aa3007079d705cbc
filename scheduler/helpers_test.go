package scheduler

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"daskgo/protocol"
)

// tstate drives a State with a logical clock and Validate on.
type tstate struct {
	*State
	t     *testing.T
	clock time.Time
	n     int
}

type option func(*Config, *[]string)

func withWorkers(specs ...string) option {
	return func(_ *Config, w *[]string) { *w = append(*w, specs...) }
}

func withSaturation(f float64) option {
	return func(c *Config, _ *[]string) { c.WorkerSaturation = f }
}

// withAllowedFailures sets dask's allowed-failures: n, with 0 as Off.
func withAllowedFailures(n int) option {
	return func(c *Config, _ *[]string) {
		c.AllowedFailures = n
		if n == 0 {
			c.AllowedFailures = Off
		}
	}
}

// newTestState builds an engine with invariant checks on, registers the
// "name:nthreads" workers as running and a client "c1".
func newTestState(t *testing.T, opts ...option) *tstate {
	t.Helper()
	cfg := Config{ValidateInvariants: true}
	var workers []string
	for _, o := range opts {
		o(&cfg, &workers)
	}
	s := &tstate{State: New(cfg), t: t, clock: time.Unix(1_700_000_000, 0)}
	for _, w := range workers {
		name, threads, _ := strings.Cut(w, ":")
		n, err := strconv.Atoi(threads)
		if err != nil {
			t.Fatalf("bad worker spec %q", w)
		}
		s.addWorker(name, n)
	}
	s.handle(&AddClient{Client: "c1"})
	return s
}

func addr(name string) string { return "tcp://" + name + ":8000" }

func (s *tstate) handle(st Stimulus) Outbox {
	s.t.Helper()
	s.n++
	s.clock = s.clock.Add(time.Millisecond)
	b := st.base()
	if b.At.IsZero() {
		b.At = s.clock
	}
	if b.ID == "" {
		b.ID = fmt.Sprintf("stim-%d", s.n)
	}
	return s.Handle(st)
}

func (s *tstate) addWorker(name string, nthreads int, mut ...func(*AddWorker)) Outbox {
	aw := &AddWorker{Address: addr(name), Name: name, NThreads: nthreads, MemoryLimit: 1 << 30, Status: "running"}
	for _, m := range mut {
		m(aw)
	}
	return s.handle(aw)
}

func blob(key string) *protocol.Blob {
	return &protocol.Blob{Pickled: true, Header: []byte{0x80}, Frames: [][]byte{[]byte("spec:" + key)}}
}

func k(s string) protocol.Key { return protocol.StrKey(s) }

func keys(ss ...string) []protocol.Key {
	out := make([]protocol.Key, len(ss))
	for i, s := range ss {
		out[i] = k(s)
	}
	return out
}

// task builds a GraphTask; order defaults to its position via graph().
func task(key string, deps ...string) GraphTask {
	return GraphTask{Key: k(key), Deps: keys(deps...), Kind: "Task", RunSpec: BlobSpec{blob(key)}}
}

// annotated gives gt the annotations kv (name, value pairs), decoded as
// compat decodes the helper's (compat/annotations.go; the engine's tests
// cannot import compat).
func annotated(gt GraphTask, kv ...any) GraphTask {
	m := protocol.NewMap(kv...)
	a := Annotations{Verbatim: m}
	for _, e := range m.Entries {
		switch e.Key {
		case "priority":
			a.Priority, a.HasPriority = float64(e.Value.(int64)), true
		case "workers":
			switch w := e.Value.(type) {
			case string:
				a.Workers = []string{w}
			case []any:
				for _, x := range w {
					a.Workers = append(a.Workers, x.(string))
				}
			}
		case "allow_other_workers":
			a.LooseRestrictions = e.Value.(bool)
		case "resources":
			a.Resources, a.ResourcesVerbatim = map[string]float64{}, e.Value
			for _, r := range e.Value.(*protocol.Map).Entries {
				a.Resources[r.Key.(string)] = float64(r.Value.(int64))
			}
		case "retries":
			a.Retries, a.HasRetries = int(e.Value.(int64)), true
		}
	}
	gt.Annotations = &a
	return gt
}

func rootTasks(prefix string, n int) []GraphTask {
	out := make([]GraphTask, n)
	for i := range out {
		out[i] = task(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// submit sends update-graph for wanted (all tasks when empty) and answers
// the helper request; it returns the GraphMaterialized outbox.
func (s *tstate) submit(client string, tasks []GraphTask, wanted ...string) Outbox {
	s.t.Helper()
	for i := range tasks {
		if tasks[i].Order == 0 {
			tasks[i].Order = int64(i)
		}
	}
	if len(wanted) == 0 {
		for _, gt := range tasks {
			wanted = append(wanted, gt.Key.String())
		}
	}
	out := s.handle(updateGraph(client, wanted...))
	if len(out.Helper) != 1 {
		s.t.Fatalf("update-graph gave %d helper requests", len(out.Helper))
	}
	return s.handle(&GraphMaterialized{RequestID: out.Helper[0].ID, Client: client, Tasks: tasks})
}

func updateGraph(client string, wanted ...string) *UpdateGraph {
	return &UpdateGraph{Client: client, Keys: keys(wanted...), FifoTimeout: 100 * time.Millisecond}
}

func (s *tstate) finish(worker, key string) Outbox {
	s.t.Helper()
	ts := s.Task(k(key))
	if ts == nil {
		s.t.Fatalf("finish: unknown task %s", key)
	}
	return s.handle(&TaskFinished{Worker: addr(worker), Key: k(key), RunID: ts.runID, NBytes: 8,
		Type: []byte("pickled-int"), TypeName: "int",
		StartStops: []StartStop{{Action: "compute", Start: 1, Stop: 1.5}}})
}

func (s *tstate) fail(worker, key string) Outbox {
	s.t.Helper()
	ts := s.Task(k(key))
	return s.handle(&TaskErred{Worker: addr(worker), Key: k(key), RunID: ts.runID,
		Exception: []byte("exc"), Traceback: []byte("tb"), ExceptionText: "ValueError()"})
}

func (s *tstate) status(key string) string {
	st, ok := s.TaskStatus(k(key))
	if !ok {
		return "forgotten"
	}
	return st.String()
}

func (s *tstate) wantStatus(key, want string) {
	s.t.Helper()
	if got := s.status(key); got != want {
		s.t.Fatalf("task %s is %s, want %s\n%s", key, got, want, s.storyString(k(key)))
	}
}

// ---- outbox inspection -----------------------------------------------------

func msgsOp(msgs []*protocol.Map, op string) []*protocol.Map {
	var out []*protocol.Map
	for _, m := range msgs {
		if m.Get("op") == op {
			out = append(out, m)
		}
	}
	return out
}

func computeTasksTo(out Outbox, worker string) []*protocol.Map {
	return msgsOp(out.Workers.Of(addr(worker)), "compute-task")
}

func allComputeTasks(out Outbox) map[string][]string {
	res := map[string][]string{}
	for _, p := range out.Workers {
		for _, m := range msgsOp(p.Msgs, "compute-task") {
			res[p.Peer] = append(res[p.Peer], m.Get("key").(protocol.Key).String())
		}
	}
	return res
}

func countCompute(out Outbox) int {
	n := 0
	for _, ks := range allComputeTasks(out) {
		n += len(ks)
	}
	return n
}

func msgKey(m *protocol.Map) string { return m.Get("key").(protocol.Key).String() }

func keyStrings(v any) []string {
	var out []string
	switch x := v.(type) {
	case []protocol.Key:
		for _, k := range x {
			out = append(out, k.String())
		}
	case protocol.Set:
		for _, e := range x {
			out = append(out, e.(protocol.Key).String())
		}
	}
	return out
}

func fieldNames(m *protocol.Map) []string {
	var out []string
	for _, e := range m.Entries {
		out = append(out, e.Key.(string))
	}
	return out
}

func eq[T comparable](t *testing.T, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func eqSlice[T comparable](t *testing.T, got, want []T, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}

var inf = math.Inf(1)

const time5s = 5 * time.Second

// xorshift returns a deterministic pseudo-random source (no global rand):
// next(n) is in [0, n).
func xorshift(seed uint64) func(n int) int {
	rng := seed
	return func(n int) int {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return int(rng % uint64(n))
	}
}
