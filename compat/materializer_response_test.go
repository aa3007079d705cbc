package compat

import (
	"bytes"
	"io"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// These tests feed handleResponse hand-made answers (no helper process):
// nonsense is logged and dropped or turned into an error result, never a
// panic, and chunks accumulate until done.

func fakeMaterializer(t *testing.T, jobs ...*job) (*Materializer, *incarnation) {
	cfg := Config{Log: testLogger(t)}
	cfg.setDefaults()
	m := &Materializer{
		cfg: cfg, log: cfg.Log, results: make(chan scheduler.Stimulus, 16),
		done: make(chan struct{}),
	}
	inc := &incarnation{proc: &proc{spec: &procSpec{What: "materializer helper", Log: cfg.Log}}, pending: map[int64]*job{}}
	for _, j := range jobs {
		inc.pending[j.wireID] = j
	}
	return m, inc
}

func pickledRunSpec() *protocol.Blob {
	frames, err := protocol.Encode(protocol.NewMap("x", protocol.NewPickled([]byte("\x80\x05N."))), nil)
	if err != nil {
		panic(err)
	}
	v, err := protocol.Decode(frames)
	if err != nil {
		panic(err)
	}
	return v.(*protocol.Map).Get("x").(*protocol.Blob)
}

// goodTask is a helper_wire task record.
func goodTask(key string) []any {
	rec := make([]any, taskFields)
	rec[taskKey] = key
	rec[taskDeps] = []any{"a", []any{"b", int64(1)}}
	rec[taskKind] = "Task"
	rec[taskDataProducer] = false
	rec[taskAnnotations] = protocol.NewMap("retries", int64(2))
	rec[taskSpec] = []byte("\x80\x05N.")
	rec[taskOrder] = int64(3)
	rec[taskMemoBase] = int64(0)
	return rec
}

// chunk is a graph chunk answer; a done one says the helper ordered and
// culled, so these tests see the records' own orders.
func chunk(id int64, done bool, tasks ...any) *protocol.Map {
	m := protocol.NewMap("id", id, "status", "OK", "done", done, "objects", []any{}, "tasks", tasks)
	if done {
		m.Set("culled", true)
		m.Set("ordered", true)
		m.Set("explicit_culling", false)
		m.Set("check_order", nil)
	}
	return m
}

func materializeJob(wireID, reqID int64, client string) *job {
	return &job{wireID: wireID, req: scheduler.HelperRequest{ID: reqID, Client: client,
		Msg: protocol.NewMap("op", "update-graph", "keys", []any{})}}
}

func next(t *testing.T, m *Materializer) *scheduler.GraphMaterialized {
	t.Helper()
	select {
	case st := <-m.results:
		return st.(*scheduler.GraphMaterialized)
	case <-time.After(10 * time.Second):
		t.Fatal("no result")
	}
	return nil
}

func TestResponseChunksAccumulate(t *testing.T) {
	j := materializeJob(5, 50, "c")
	m, inc := fakeMaterializer(t, j)
	read := answerForms(t)["read in place"]
	m.handleResponse(inc, read(chunk(5, false, goodTask("x"))))
	m.handleResponse(inc, read(chunk(5, true, goodTask("y"))))
	res := next(t, m)
	if res.Err != nil || res.RequestID != 50 || res.Client != "c" || len(res.Tasks) != 2 {
		t.Fatalf("got %+v", res)
	}
	x := res.Tasks[0]
	if x.Key != protocol.StrKey("x") || x.Order != 3 || x.Kind != "Task" || len(x.Deps) != 2 ||
		x.Annotations == nil || !x.Annotations.HasRetries || x.Annotations.Retries != 2 || !x.RunSpec.Payload().Pickled {
		t.Fatalf("task converted as %+v", x)
	}
	if want, _ := protocol.KeyOf([]any{"b", int64(1)}); x.Deps[1] != want {
		t.Fatalf("tuple dep converted as %s", x.Deps[1])
	}
	if len(inc.pending) != 0 {
		t.Fatal("finished job still pending")
	}
}

func TestResponseNonsenseNeverPanics(t *testing.T) {
	j := materializeJob(1, 10, "")
	m, inc := fakeMaterializer(t, j)
	for _, v := range []any{
		nil, "garbage", []any{int64(1)}, protocol.NewMap("id", "one"),
		protocol.NewMap("id", int64(99), "status", "OK", "done", true),
		protocol.NewMap("id", nil, "status", "error"),
	} {
		m.handleResponse(inc, v)
	}
	select {
	case st := <-m.results:
		t.Fatalf("nonsense produced a result: %+v", st)
	default:
	}
	if inc.pending[1] != j {
		t.Fatal("nonsense for other ids touched request 1")
	}
}

func TestResponseMalformedTaskFailsTheRequest(t *testing.T) {
	bad := []struct {
		name string
		task any
		want string
	}{
		{"not a list", "task", "not a list of 8 fields"},
		{"short record", []any{"x"}, "not a list of 8 fields"},
		{"bytes key", withField(goodTask("x"), taskKey, []byte("k")), "key"},
		{"bad deps", withField(goodTask("x"), taskDeps, "x"), "deps of x"},
		{"float order", withField(goodTask("x"), taskOrder, 1.5), "order of x"},
		{"no memo base", withField(goodTask("x"), taskMemoBase, nil), "memo_base of x"},
		{"memo base in the table's range", withField(goodTask("x"), taskMemoBase, int64(1<<30)), "spec of x: malformed task pickle: memo base"},
		{"no kind", withField(goodTask("x"), taskKind, nil), "kind of x"},
		{"producer str", withField(goodTask("x"), taskDataProducer, "yes"), "data_producer of x"},
		{"annotations list", withField(goodTask("x"), taskAnnotations, []any{}), "annotations of x"},
		{"spec not bytes", withField(goodTask("x"), taskSpec, "pickle"), "spec of x"},
		{"spec not a pickle", withField(goodTask("x"), taskSpec, []byte("pickle")), "spec of x: malformed task pickle"},
		{"persistent id past the table", withField(goodTask("x"), taskSpec, []byte("\x80\x05K\x00Q.")),
			"persistent id 0, the graph has 0 objects"},
	}
	for form, read := range answerForms(t) {
		for i, tc := range bad {
			j := materializeJob(int64(i+1), int64(i+1), "")
			m, inc := fakeMaterializer(t, j)
			m.handleResponse(inc, read(chunk(j.wireID, false, tc.task)))
			m.handleResponse(inc, read(chunk(j.wireID, true, goodTask("z"))))
			res := next(t, m)
			if res.Err == nil || len(res.Tasks) != 0 {
				t.Fatalf("%s, %s: got %d tasks, err %v", form, tc.name, len(res.Tasks), res.Err)
			}
			if !strings.Contains(res.Err.ExceptionText, "malformed graph") || !strings.Contains(res.Err.ExceptionText, tc.want) {
				t.Errorf("%s, %s: error text %q lacks %q", form, tc.name, res.Err.ExceptionText, tc.want)
			}
		}
	}
}

// answerForms are the two ways an answer reaches handleResponse: decoded
// whole, and as readLoop reads it (protocol.DecodeKeepingRaw, the task
// records left for parseWireTasks to read in place).
func answerForms(t *testing.T) map[string]func(*protocol.Map) any {
	return map[string]func(*protocol.Map) any{
		"decoded": func(m *protocol.Map) any { return m },
		"read in place": func(m *protocol.Map) any {
			frames, err := protocol.Encode(m, nil)
			if err != nil {
				t.Fatal(err)
			}
			v, err := protocol.DecodeKeepingRaw(frames, "tasks")
			if err != nil {
				t.Fatal(err)
			}
			if _, raw := v.(*protocol.Map).Get("tasks").(protocol.Raw); !raw {
				t.Fatalf("tasks were decoded: %s", protocol.String(v))
			}
			return v
		},
	}
}

// Task records read in place are the records parseWireTask reads from the
// decoded list, for every field's variants.
func TestWireTasksReadInPlaceMatchDecoded(t *testing.T) {
	tasks := []any{
		goodTask("x"),
		withField(goodTask("tuple"), taskKey, []any{"t", int64(4), 2.5}),
		withField(goodTask("long"), taskKey, strings.Repeat("k", 300)),
		withField(goodTask("nil annotations"), taskAnnotations, nil),
		withField(goodTask("no order"), taskOrder, nil),
		withField(goodTask("no deps"), taskDeps, []any{}),
		withField(goodTask("deps None"), taskDeps, nil),
		withField(goodTask("producer"), taskDataProducer, true),
		withField(goodTask("alias"), taskKind, "Alias"),
		withField(goodTask("big order"), taskOrder, int64(1)<<40),
	}
	frames, err := protocol.Encode(tasks, nil)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := protocol.Decode(frames)
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseWireTasks(decoded)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseWireTasks(protocol.Raw(frames[0]))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d tasks, decoded %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("task %d read as %+v, decoded as %+v", i, got[i], want[i])
		}
	}
	if _, ok := readWireTasks(frames[0]); !ok {
		t.Error("the fast reader declined stock records")
	}
}

func TestResponseErrorPassesErrorMessageThrough(t *testing.T) {
	j := materializeJob(3, 30, "")
	m, inc := fakeMaterializer(t, j)
	exc := pickledRunSpec() // any blob: it is relayed untouched
	m.handleResponse(inc, protocol.NewMap("id", int64(3), "status", "error", "done", true,
		"exception", exc, "traceback", nil, "exception_text", "ValueError('x')", "traceback_text", "tb"))
	res := next(t, m)
	if res.Err == nil || res.Err.Exception != exc || res.Err.Traceback != nil ||
		res.Err.ExceptionText != "ValueError('x')" || res.Err.TracebackText != "tb" {
		t.Fatalf("error relayed as %+v", res.Err)
	}
}

func withField(rec []any, field int, v any) []any {
	rec[field] = v
	return rec
}

// TestGarbageStreamKillsHelper: bytes that are not a framed message mean the
// stream is lost; the helper process is killed and what it owed fails with
// the reason (here the "helper" is a sleep process fed garbage on "stdout").
func TestGarbageStreamKillsHelper(t *testing.T) {
	j := &job{wireID: 1, req: scheduler.HelperRequest{ID: 77}}
	m, inc := fakeMaterializer(t, j)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	inc.cmd, inc.pid, inc.stderr = cmd, cmd.Process.Pid, &stderrLog{log: m.log}
	garbage := append(make([]byte, 8), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	inc.stdout = io.NopCloser(bytes.NewReader(garbage))
	m.readLoop(inc)
	status := inc.wait()
	m.failPending(inc, status)
	res := next(t, m)
	if res.RequestID != 77 || res.Err == nil {
		t.Fatalf("got %+v", res)
	}
	for _, want := range []string{"signal: killed", "unreadable response", "frame count"} {
		if !strings.Contains(res.Err.ExceptionText, want) {
			t.Errorf("error %q lacks %q", res.Err.ExceptionText, want)
		}
	}
}

// closeRecorder is a stdin that records Close.
type closeRecorder struct{ closed bool }

func (c *closeRecorder) Write(p []byte) (int, error) { return len(p), nil }
func (c *closeRecorder) Close() error                { c.closed = true; return nil }

// TestRecyclePolicy: a helper whose RSS after a graph stays more than
// RecycleAbove over its start takes no new request and has its stdin
// closed (so it exits) once its last answer is in; below the limit, or
// with recycling off, nothing happens.
func TestRecyclePolicy(t *testing.T) {
	j := materializeJob(1, 10, "")
	m, inc := fakeMaterializer(t, j)
	m.cfg.RecycleAbove = 10 << 20
	stdin := &closeRecorder{}
	inc.stdin, inc.startRSS = stdin, 100<<20

	m.noteHelperRSS(inc, 105<<20)
	if inc.retiring || m.Recycled() != 0 {
		t.Fatal("retired below the limit")
	}
	m.noteHelperRSS(inc, 200<<20)
	if !inc.retiring || m.Recycled() != 1 {
		t.Fatal("not retiring above the limit")
	}
	if stdin.closed || inc.isRetired() {
		t.Fatal("stdin closed while a request was still owed")
	}
	m.mu.Lock()
	m.queue = append(m.queue, materializeJob(2, 20, ""))
	m.mu.Unlock()
	if got := m.take(inc, make(chan struct{})); got != nil {
		t.Fatal("a retiring helper took a new request")
	}
	m.finish(inc, j)
	if !stdin.closed || !inc.isRetired() {
		t.Fatal("stdin still open after the last answer")
	}

	m2, inc2 := fakeMaterializer(t)
	m2.cfg.RecycleAbove = -1
	inc2.stdin, inc2.startRSS = &closeRecorder{}, 1
	m2.noteHelperRSS(inc2, 1<<40)
	if inc2.retiring {
		t.Fatal("recycled with RecycleAbove < 0")
	}
}

// TestIdleRecyclePolicy: a helper left above IdleRecycleAbove (but below
// RecycleAbove) is retired only once idle: not while a request is in
// flight or queued, not if another answer came since; then it is.
func TestIdleRecyclePolicy(t *testing.T) {
	m, inc := fakeMaterializer(t)
	m.cfg.RecycleAbove, m.cfg.IdleRecycleAbove, m.cfg.IdleRecycleAfter = 100<<20, 10<<20, time.Hour
	stdin := &closeRecorder{}
	inc.stdin, inc.startRSS = stdin, 100<<20
	m.mu.Lock()
	m.cur = inc
	m.mu.Unlock()

	m.noteHelperRSS(inc, 105<<20)
	if m.idleTimer != nil {
		t.Fatal("armed below IdleRecycleAbove")
	}
	m.noteHelperRSS(inc, 120<<20)
	if inc.retiring || m.idleTimer == nil {
		t.Fatal("want armed, not retiring, between the two limits")
	}
	gen := m.answers
	m.retireIfIdle(inc, gen-1, 120<<20)
	if inc.retiring {
		t.Fatal("retired although an answer came after the timer was armed")
	}
	m.mu.Lock()
	m.queue = append(m.queue, materializeJob(2, 20, ""))
	m.mu.Unlock()
	m.retireIfIdle(inc, gen, 120<<20)
	if inc.retiring {
		t.Fatal("retired with a request queued")
	}
	m.mu.Lock()
	m.queue = nil
	m.mu.Unlock()
	m.retireIfIdle(inc, gen, 120<<20)
	if !inc.retiring || !stdin.closed || m.Recycled() != 1 {
		t.Fatal("an idle helper above IdleRecycleAbove was not retired")
	}
	m.idleTimer.Stop()
}
