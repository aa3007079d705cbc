package compat

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"daskgo/compat/venv"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// TestMaterializeMatchesPythonScheduler compares, task by task, the helper's
// answer with the TaskStates a stock Python scheduler created from the same
// recorded update-graph message. Priorities are compared with
// dask.order.order run in the helper on the graph Go received (CheckOrder),
// not with the recording: dask.order iterates sets, so its result depends on
// the hash seed and on how each dependency frozenset was built; the
// recording's frozensets were built by dask's own code paths, Go's port
// builds them from the dependency lists (compat/order/doc.go).
func TestMaterializeMatchesPythonScheduler(t *testing.T) {
	m := sharedMaterializer(t)
	for i, name := range []string{
		"submit_inc", "submit_annotated", "map10", "array_sum",
		"from_array", "annotate_retries", "depends_on_future",
	} {
		t.Run(name, func(t *testing.T) {
			msg := updateGraph(t, name)
			submit(t, m, int64(100+i), msg)
			res := awaitResult(t, m)
			if res.Err != nil {
				t.Fatalf("materialize failed: %s\n%s", res.Err.ExceptionText, res.Err.TracebackText)
			}
			if res.RequestID != int64(100+i) || res.Client != "Client-test" {
				t.Fatalf("result for request %d of %q, want %d of Client-test", res.RequestID, res.Client, 100+i)
			}
			_, _, before := m.OrderChecks()
			compareWithScheduler(t, res.Tasks, expectedTasks(t, name))
			checkRequestedKeys(t, msg, res.Tasks)
			if graphs, tasks, mismatched := m.OrderChecks(); mismatched != before {
				t.Errorf("Go's dask.order differs from dask.order.order in the helper (%d of %d graphs, %d tasks checked)",
					mismatched, graphs, tasks)
			}
		})
	}
}

func compareWithScheduler(t *testing.T, got []scheduler.GraphTask, want map[protocol.Key]expectedTask) {
	t.Helper()
	gotKeys := make([]protocol.Key, 0, len(got))
	for _, task := range got {
		gotKeys = append(gotKeys, task.Key)
	}
	wantKeys := make([]protocol.Key, 0, len(want))
	for k := range want {
		wantKeys = append(wantKeys, k)
	}
	if g, w := keySet(gotKeys), keySet(wantKeys); !slices.Equal(g, w) {
		t.Fatalf("task keys differ:\n got  %v\n want %v", g, w)
	}
	for _, task := range got {
		w := want[task.Key]
		if g, e := keySet(task.Deps), keySet(w.deps); !slices.Equal(g, e) {
			t.Errorf("%s: deps %v, scheduler had %v", task.Key, g, e)
		}
		if task.Kind != w.kind {
			t.Errorf("%s: kind %s, scheduler had %s", task.Key, task.Kind, w.kind)
		}
		if task.DataProducer != w.dataProducer {
			t.Errorf("%s: data_producer %v, scheduler had %v", task.Key, task.DataProducer, w.dataProducer)
		}
		if g, e := canonical(verbatim(task.Annotations)), canonical(w.annotations); g != e {
			t.Errorf("%s: annotations %s, scheduler had %s", task.Key, g, e)
		}
		checkRunSpec(t, task)
	}
}

func checkRunSpec(t *testing.T, task scheduler.GraphTask) {
	t.Helper()
	if task.RunSpec == nil || !task.RunSpec.Payload().Pickled {
		t.Fatalf("%s: run_spec %v is not a __Pickled__ blob", task.Key, task.RunSpec)
	}
	p, err := task.RunSpec.Payload().PickledObj()
	if err != nil || len(p) < 2 || p[0] != 0x80 {
		t.Fatalf("%s: run_spec pickled-obj is not a pickle (err %v)", task.Key, err)
	}
}

// checkRequestedKeys: every key the client asked for is a task of the
// answer, as Python's culling keeps them.
func checkRequestedKeys(t *testing.T, msg *protocol.Map, tasks []scheduler.GraphTask) {
	t.Helper()
	keys, err := protocol.KeysOf(msg.Get("keys"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !slices.ContainsFunc(tasks, func(task scheduler.GraphTask) bool { return task.Key == k }) {
			t.Errorf("requested key %s missing from the answer", k)
		}
	}
}

// TestMaterializeSpecifics pins facts the fixtures were built to show, so a
// regenerated fixture that loses them fails loudly.
func TestMaterializeSpecifics(t *testing.T) {
	m := sharedMaterializer(t)
	get := func(name string) map[string]scheduler.GraphTask {
		submit(t, m, 1, updateGraph(t, name))
		res := awaitResult(t, m)
		if res.Err != nil {
			t.Fatalf("%s: %s", name, res.Err.ExceptionText)
		}
		out := map[string]scheduler.GraphTask{}
		for _, task := range res.Tasks {
			out[task.Key.String()] = task
		}
		return out
	}
	annotated := get("submit_annotated")["inc-2"]
	raw := verbatim(annotated.Annotations)
	for name, want := range map[string]string{
		"priority": "5", "retries": "3", "allow_other_workers": "true",
		"workers": `["tcp://127.0.0.1:1"]`, "resources": `["GPU": 1]`,
	} {
		v, ok := raw.Lookup(name)
		if !ok {
			t.Errorf("submit_annotated: annotation %q missing: %s", name, protocol.String(raw))
			continue
		}
		if got := canonical(v); got != want {
			t.Errorf("annotation %s = %s, want %s", name, got, want)
		}
	}
	if _, isList := raw.Get("workers").([]any); !isList {
		t.Errorf("workers annotation is %T, want a msgpack list", raw.Get("workers"))
	}
	// and decoded for the engine (annotations.go)
	a := annotated.Annotations
	if a == nil {
		t.Fatal("annotated task has no decoded annotations")
	}
	if !a.HasPriority || a.Priority != 5 || !a.HasRetries || a.Retries != 3 || !a.LooseRestrictions ||
		len(a.Workers) != 1 || a.Workers[0] != "tcp://127.0.0.1:1" || a.Resources["GPU"] != 1 {
		t.Errorf("decoded annotations %+v", a)
	}
	dep := get("depends_on_future")
	add, ok := dep["add-10"]
	if !ok || len(dep) != 1 {
		t.Fatalf("depends_on_future: want the one task add-10, got %v", dep)
	}
	if len(add.Deps) != 1 || add.Deps[0] != protocol.StrKey("inc-1") {
		t.Errorf("add-10 deps %v, want [inc-1] (a future outside the graph)", keySet(add.Deps))
	}
	producers, carrying := 0, 0
	for _, task := range get("from_array") {
		if task.DataProducer {
			producers++
			// each chunk's data (25x25 int64) travels in its run_spec
			if p, _ := task.RunSpec.Payload().PickledObj(); len(p) > 25*25*8 {
				carrying++
			}
		}
	}
	if producers == 0 || carrying != producers {
		t.Errorf("from_array: %d data producers, %d with their chunk in the run_spec; want all, > 0", producers, carrying)
	}
}

// TestRunSpecLoadsInPython proves the run_spec blobs survive Go's re-encoding:
// a Python process loads them from a Go-encoded message and runs the tasks.
func TestRunSpecLoadsInPython(t *testing.T) {
	m := sharedMaterializer(t)
	var specs []any
	for _, name := range []string{"submit_inc", "from_array"} {
		submit(t, m, 7, updateGraph(t, name))
		res := awaitResult(t, m)
		if res.Err != nil {
			t.Fatalf("%s: %s", name, res.Err.ExceptionText)
		}
		for _, task := range res.Tasks {
			if len(task.Deps) == 0 {
				specs = append(specs, task.RunSpec.Payload())
			}
		}
	}
	out := runPython(t, specs, `
for node in msg:
    r = node({})
    print(type(node).__name__, float(r.sum()) if hasattr(r, "sum") else r)
`)
	lines := strings.Split(out, "\n")
	// inc(1) = 2; the four from_array chunks are 25x25 slices of arange(2500).
	if len(lines) != 5 || lines[0] != "Task 2" {
		t.Fatalf("python ran the run_specs as:\n%s", out)
	}
	var sum float64
	for _, l := range lines[1:] {
		var x float64
		if _, err := fmt.Sscan(strings.TrimPrefix(l, "Task "), &x); err != nil {
			t.Fatalf("chunk result %q: %v", l, err)
		}
		sum += x
	}
	if want := float64(2499 * 2500 / 2); sum != want {
		t.Fatalf("chunk sums add to %v, want %v", sum, want)
	}
}

// TestMaterializeErrors: failures come back as distributed's error_message
// fields, with Python's texts, and the helper keeps serving.
func TestMaterializeErrors(t *testing.T) {
	m := sharedMaterializer(t)
	cases := []struct {
		name string
		msg  *protocol.Map
		want []string
	}{
		{"unimportable_module", updateGraph(t, "unimportable_module"), []string{
			"RuntimeError", "Error during deserialization of the task graph. This frequently\\noccurs if the Scheduler and Client have different environments.",
		}},
		{"boom_materialize", updateGraph(t, "boom_materialize"), []string{"ValueError", "boom while materializing the graph"}},
		{"no_expr", protocol.NewMap("op", "update-graph", "keys", protocol.Set{"x"}), []string{"KeyError", "expr_ser"}},
	}
	for i, tc := range cases {
		submit(t, m, int64(i+1), tc.msg)
	}
	for i, tc := range cases {
		res := awaitResult(t, m)
		if res.RequestID != int64(i+1) {
			t.Fatalf("result for request %d arrived in place of %d (%s)", res.RequestID, i+1, tc.name)
		}
		if res.Err == nil {
			t.Fatalf("%s: materialized %d tasks, want an error", tc.name, len(res.Tasks))
		}
		for _, w := range tc.want {
			if !strings.Contains(res.Err.ExceptionText, w) {
				t.Errorf("%s: exception text %q lacks %q", tc.name, res.Err.ExceptionText, w)
			}
		}
		if b, ok := res.Err.Exception.(*protocol.Blob); !ok || b.Pickled {
			t.Errorf("%s: exception is %s, want a __Serialized__ blob", tc.name, protocol.String(res.Err.Exception))
		}
		if res.Err.TracebackText == "" {
			t.Errorf("%s: empty traceback text", tc.name)
		}
	}
	submit(t, m, 9, updateGraph(t, "submit_inc"))
	if res := awaitResult(t, m); res.Err != nil || len(res.Tasks) != 1 {
		t.Fatalf("helper broken after errors: %+v", res)
	}
}

func TestVersions(t *testing.T) {
	m := sharedMaterializer(t)
	v, err := m.Versions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pkgs, _ := v.Get("packages").(*protocol.Map)
	host, _ := v.Get("host").(*protocol.Map)
	for _, p := range []string{"dask", "distributed", "cloudpickle", "python"} {
		if s, _ := pkgs.Get(p).(string); s == "" {
			t.Errorf("versions lack packages.%s: %s", p, protocol.String(v))
		}
	}
	if py, _ := host.Get("python").(string); py != pkgs.Get("python") {
		t.Errorf("host.python %q differs from packages.python %q", py, pkgs.Get("python"))
	}
}

// TestHelperCrashFailsInFlightAndRestarts kills the helper while it
// unpickles a graph: the request gets an error naming the crash, and the
// restarted helper serves the next one.
func TestHelperCrashFailsInFlightAndRestarts(t *testing.T) {
	m := startMaterializer(t, Config{StopGrace: 100 * time.Millisecond})
	submit(t, m, 41, updateGraph(t, "slow_unpickle"))
	waitInflight(t, m, 1)
	pid := m.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill helper %d: %v", pid, err)
	}
	res := awaitResult(t, m)
	if res.RequestID != 41 || res.Err == nil {
		t.Fatalf("want an error for request 41, got request %d err %v", res.RequestID, res.Err)
	}
	const want = "materializer helper exited (signal: killed) while materializing this graph"
	if !strings.Contains(res.Err.ExceptionText, want) {
		t.Errorf("exception text %q lacks %q", res.Err.ExceptionText, want)
	}
	if p, ok := res.Err.Exception.([]byte); !ok || !bytes.Contains(p, []byte("RuntimeError")) {
		t.Errorf("exception is %s, want a pickled RuntimeError", protocol.String(res.Err.Exception))
	}
	submit(t, m, 42, updateGraph(t, "submit_inc"))
	if res := awaitResult(t, m); res.RequestID != 42 || res.Err != nil || len(res.Tasks) != 1 {
		t.Fatalf("restarted helper: request %d err %+v tasks %d", res.RequestID, res.Err, len(res.Tasks))
	}
	if m.PID() == pid || m.PID() == 0 {
		t.Errorf("helper pid %d after restart, killed one was %d", m.PID(), pid)
	}
	// Close while the new helper is busy: it is killed, Close returns.
	submit(t, m, 43, updateGraph(t, "slow_unpickle"))
	waitInflight(t, m, 1)
	busy := m.PID()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(busy, 0); err == nil {
		t.Errorf("helper %d still alive after Close", busy)
	}
	if err := m.Submit(scheduler.HelperRequest{ID: 44}); err != ErrClosed {
		t.Errorf("Submit after Close: %v, want ErrClosed", err)
	}
}

// waitInflight polls until n requests have been handed to the helper.
func waitInflight(t *testing.T, m *Materializer, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for m.inflight() < n {
		if time.Now().After(deadline) {
			t.Fatalf("request never reached the helper")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStartFailsClearly(t *testing.T) {
	_, err := Start(context.Background(), Config{Python: "/nonexistent/python3"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Fatalf("missing interpreter: %v", err)
	}
	// An interpreter without distributed: the error carries its stderr.
	_, err = Start(context.Background(), Config{Python: venv.Python(t), Env: []string{"PYTHONPATH=" + mustAbs(t, "testdata/broken_env")}})
	if err == nil || !strings.Contains(err.Error(), "did not start") || !strings.Contains(err.Error(), "broken environment for the test") {
		t.Fatalf("broken environment: %v", err)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPythonOrderingMatchesRecording: with ordering=python (the fallback
// switch) the helper culls and runs dask.order.order as update_graph does,
// so under the recording's hash seed every priority equals the stock
// scheduler's, and Go keeps them.
func TestPythonOrderingMatchesRecording(t *testing.T) {
	m := startMaterializer(t, Config{Ordering: OrderingPython, HashSeed: 0})
	for i, name := range []string{"array_sum", "map10", "depends_on_future"} {
		submit(t, m, int64(300+i), updateGraph(t, name))
		res := awaitResult(t, m)
		if res.Err != nil {
			t.Fatalf("%s: %s", name, res.Err.ExceptionText)
		}
		want := expectedTasks(t, name)
		if len(res.Tasks) != len(want) {
			t.Fatalf("%s: %d tasks, scheduler had %d", name, len(res.Tasks), len(want))
		}
		for _, task := range res.Tasks {
			if task.Order != want[task.Key].order {
				t.Errorf("%s %s: order %d, scheduler had %d", name, task.Key, task.Order, want[task.Key].order)
			}
		}
	}
}

// TestRecycledHelperServesTheNextGraph: with a recycle limit of one byte a
// helper is replaced after every graph (its first dask.array graph imports
// modules, so it never shrinks back to its start): each answer still
// arrives, from a new process, and the replacement is not an error.
func TestRecycledHelperServesTheNextGraph(t *testing.T) {
	m := startMaterializer(t, Config{RecycleAbove: 1})
	first := m.PID()
	for i := int64(1); i <= 2; i++ {
		submit(t, m, i, updateGraph(t, "array_sum"))
		if r := awaitResult(t, m); r.Err != nil || len(r.Tasks) == 0 || r.RequestID != i {
			t.Fatalf("graph %d: %d tasks, err %+v", i, len(r.Tasks), r.Err)
		}
	}
	if m.Recycled() < 1 {
		t.Fatal("no helper was recycled")
	}
	deadline := time.Now().Add(time.Minute)
	for m.PID() == first || m.PID() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("helper %d never replaced", first)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// verbatim is the annotations dict a task carries to compute-task.
func verbatim(a *scheduler.Annotations) *protocol.Map {
	if a == nil {
		return nil
	}
	if m, ok := a.Verbatim.(*protocol.Map); ok {
		return m
	}
	return nil
}
