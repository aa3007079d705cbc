package server

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// testDump is a hand-made engine copy: a tuple-keyed task in memory on a
// worker whose metrics have tuple keys (as the workers' metric digests
// do), and a plain task depending on it.
func testDump() *scheduler.ClusterDump {
	tk, _ := protocol.KeyOf([]any{"x", int64(0)})
	x, y := scheduler.Ref{Key: tk, State: scheduler.StatusMemory}, scheduler.Ref{Key: protocol.StrKey("y"), State: scheduler.StatusWaiting}
	d := &scheduler.ClusterDump{
		Identity: protocol.NewMap("type", "Scheduler", "id", "Scheduler-1", "workers", protocol.NewMap()),
		Refs:     []scheduler.Ref{y, x},
		Names:    []string{"tcp://w:1", "c1"},
		Log: []scheduler.Transition{{Key: tk, From: scheduler.StatusProcessing, To: scheduler.StatusMemory,
			StimulusID: "task-finished-1", At: time.Unix(1700000000, 0)}},
		Rare: []scheduler.TaskRare{{ExceptionText: "ValueError('x')", Blame: y, HasBlame: true, Retries: 2}},
	}
	d.Tasks = []scheduler.TaskDump{
		{Key: tk, State: scheduler.StatusMemory, Group: 0, NBytes: 28, HasPriority: true, ProcessingOn: -1, Rare: -1,
			Priority: [3]float64{0, 1, 0.5}, Dependents: scheduler.Span{Lo: 0, Hi: 1}, WhoHas: scheduler.Span{Lo: 0, Hi: 1},
			WhoWants: scheduler.Span{Lo: 1, Hi: 2}},
		{Key: protocol.StrKey("y"), State: scheduler.StatusWaiting, Group: 1, NBytes: -1, ProcessingOn: 0, Rare: 0,
			Dependencies: scheduler.Span{Lo: 1, Hi: 2}, WaitingOn: scheduler.Span{Lo: 1, Hi: 1}},
	}
	d.Groups = []scheduler.GroupDump{{Name: "x", Prefix: "x"}, {Name: "y", Prefix: "y"}}
	d.Groups[0].States[scheduler.StatusMemory] = 1
	d.Groups[1].States[scheduler.StatusWaiting] = 1
	metrics, _ := protocol.AppendValue(nil, protocol.NewMap("memory", int64(100),
		"digests_total_since_heartbeat", &protocol.Map{Entries: []protocol.Entry{{Key: []any{"execute", "inc"}, Value: 1.5}}}))
	d.Workers = []scheduler.WorkerDump{{Address: "tcp://w:1", Status: "running", NameValue: int64(0), NThreads: 1,
		HasWhat: scheduler.Span{Lo: 1, Hi: 2}, Metrics: protocol.Raw(metrics)}}
	d.Clients = []scheduler.ClientDump{{ID: "c1", WantsWhat: scheduler.Span{Lo: 1, Hi: 2}}}
	return d
}

func encodeDump(t *testing.T, exclude ...string) *protocol.Map {
	t.Helper()
	cs := &clusterState{sched: testDump(), exclude: map[string]bool{},
		workers:  []callResult{{worker: "tcp://w:1", reply: protocol.NewMap("id", "Worker-1", "tasks", protocol.NewMap())}, {worker: "tcp://gone:1", err: errPeerGone}},
		versions: protocol.NewMap("packages", protocol.NewMap())}
	for _, n := range exclude {
		cs.exclude[n] = true
	}
	var buf bytes.Buffer
	if err := cs.writeMsgpack(&buf); err != nil {
		t.Fatal(err)
	}
	v, err := protocol.Decode([][]byte{buf.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	return v.(*protocol.Map)
}

func path(t *testing.T, m *protocol.Map, names ...string) any {
	t.Helper()
	var v any = m
	for _, n := range names {
		mm, ok := v.(*protocol.Map)
		if !ok {
			t.Fatalf("%s: not a dict at %s", strings.Join(names, "."), n)
		}
		var found bool
		if v, found = mm.Lookup(n); !found {
			t.Fatalf("%s: no %q", strings.Join(names, "."), n)
		}
	}
	return v
}

// The dump has Scheduler._to_dict's layout: a tuple key named by str() of
// its list, references as reprs, the workers' answers (an error as text),
// the transition log's tuples; map keys are all strings, so that a strict
// msgpack reader (distributed.cluster_dump.load_cluster_dump) reads it.
func TestClusterDumpLayout(t *testing.T) {
	m := encodeDump(t)
	task := path(t, m, "scheduler", "tasks", "['x', 0]").(*protocol.Map)
	if task.Get("state") != "memory" || task.Get("nbytes") != int64(28) {
		t.Fatalf("task: %s", protocol.String(task))
	}
	if got := protocol.String(task.Get("dependents")); got != `("<TaskState 'y' waiting>")` {
		t.Errorf("dependents %s", got)
	}
	if got := protocol.String(task.Get("who_has")); !strings.Contains(got, "<WorkerState 'tcp://w:1', name: 0, status: running, memory: 1, processing: 0>") {
		t.Errorf("who_has %s", got)
	}
	if got := protocol.String(task.Get("priority")); got != "(0, 1, 0.5)" {
		t.Errorf("priority %s", got)
	}
	y := path(t, m, "scheduler", "tasks", "y").(*protocol.Map)
	if y.Get("waiting_on") != nil {
		t.Error("an empty waiting_on is None")
	}
	if y.Get("exception_blame") != "<TaskState 'y' waiting>" || y.Get("exception_text") != "ValueError('x')" ||
		y.Get("retries") != int64(2) || !strings.HasPrefix(y.Get("processing_on").(string), "<WorkerState 'tcp://w:1'") {
		t.Errorf("y's rare members: %s", protocol.String(y))
	}
	if task.Get("exception_blame") != nil || task.Get("retries") != int64(0) {
		t.Errorf("a task without rare members: %s", protocol.String(task))
	}
	if got := path(t, m, "scheduler", "task_groups", "x", "prefix"); got != "<x: memory: 1>" {
		t.Errorf("group prefix %v", got)
	}
	digests := path(t, m, "scheduler", "workers", "tcp://w:1", "metrics", "digests_total_since_heartbeat").(*protocol.Map)
	if digests.Entries[0].Key != "['execute', 'inc']" {
		t.Errorf("tuple metric key %s", protocol.String(digests.Entries[0].Key))
	}
	if got := path(t, m, "workers", "tcp://gone:1"); got != errPeerGone.Error() {
		t.Errorf("a failed worker's dump %v", got)
	}
	log := path(t, m, "scheduler", "transition_log").([]any)
	if len(log) != 1 || len(log[0].([]any)) != 6 {
		t.Errorf("transition log %s", protocol.String(log))
	}
	checkStringKeys(t, m, "dump")
}

func checkStringKeys(t *testing.T, v any, where string) {
	switch x := v.(type) {
	case *protocol.Map:
		for _, e := range x.Entries {
			if _, ok := e.Key.(string); !ok {
				t.Errorf("%s: key %s is not a str", where, protocol.String(e.Key))
			}
			checkStringKeys(t, e.Value, where+"."+protocol.String(e.Key))
		}
	case []any:
		for _, it := range x {
			checkStringKeys(t, it, where)
		}
	}
}

// exclude drops the names at every level, as recursive_to_dict does.
func TestClusterDumpExclude(t *testing.T) {
	m := encodeDump(t, "nbytes", "transition_log")
	if _, ok := path(t, m, "scheduler").(*protocol.Map).Lookup("transition_log"); ok {
		t.Error("transition_log kept")
	}
	for _, where := range [][]string{{"scheduler", "tasks", "y"}, {"scheduler", "workers", "tcp://w:1"}} {
		if _, ok := path(t, m, where...).(*protocol.Map).Lookup("nbytes"); ok {
			t.Errorf("%v: nbytes kept", where)
		}
	}
}

// The YAML form is the same document, keys sorted as PyYAML sorts them.
func TestClusterDumpYAML(t *testing.T) {
	cs := &clusterState{sched: testDump(), exclude: map[string]bool{}, versions: protocol.NewMap()}
	var doc, out bytes.Buffer
	if err := cs.writeMsgpack(&doc); err != nil {
		t.Fatal(err)
	}
	if err := msgpackToYAML(doc.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	y := out.String()
	for _, want := range []string{"scheduler:\n", "  tasks:\n", "    '[''x'', 0]':\n", "      state: memory\n"} {
		if !strings.Contains(y, want) {
			t.Errorf("yaml lacks %q:\n%s", want, y[:min(len(y), 2000)])
		}
	}
	if strings.Index(y, "scheduler:") > strings.Index(y, "versions:") {
		t.Error("top-level keys not sorted")
	}
}

// write_state's url: the suffix appended, file:// taken, any other fsspec
// filesystem or storage option refused with what to do instead.
func TestDumpPath(t *testing.T) {
	args := protocol.NewMap("url", "x", "format", "msgpack")
	for _, c := range []struct{ url, suffix, want string }{
		{"/tmp/d", ".msgpack.gz", "/tmp/d.msgpack.gz"},
		{"/tmp/d.msgpack.gz", ".msgpack.gz", "/tmp/d.msgpack.gz"},
		{"file:///tmp/d", ".yaml", "/tmp/d.yaml"},
	} {
		got, _, err := dumpPath(c.url, c.suffix, args)
		if err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.url, got, err, c.want)
		}
	}
	if _, _, err := dumpPath("s3://bucket/d", ".yaml", args); err == nil || !strings.Contains(err.Error(), "write_from_scheduler=False") {
		t.Errorf("s3: %v", err)
	}
	if _, _, err := dumpPath("/tmp/d", ".yaml", protocol.NewMap("anon", true)); err == nil || !strings.Contains(err.Error(), "anon") {
		t.Errorf("storage option: %v", err)
	}
	if _, mk, err := dumpPath("/tmp/d", ".yaml", protocol.NewMap("auto_mkdir", true)); err != nil || !mk {
		t.Errorf("auto_mkdir: %v %v", mk, err)
	}
}

// Heartbeat memory reads the same from the undecoded request and the
// decoded one; without spilled_bytes there is none.
func TestHeartbeatMemoryFastMatchesGeneric(t *testing.T) {
	metrics := protocol.NewMap("bandwidth", protocol.NewMap("total", 1e8), "memory", int64(123456),
		"spilled_bytes", protocol.NewMap("memory", int64(7), "disk", int64(9)))
	raw, _ := protocol.AppendValue(nil, metrics)
	total, ok, fast, err := readMetrics(raw)
	if err != nil || !ok || total != 1e8 {
		t.Fatalf("readMetrics: %v %v %v", total, ok, err)
	}
	generic := heartbeatMemory(metrics)
	if fast == nil || generic == nil || *fast != *generic || fast.Process != 123456 || fast.SpilledDisk != 9 {
		t.Fatalf("fast %+v, generic %+v", fast, generic)
	}
	metrics.Delete("spilled_bytes")
	raw, _ = protocol.AppendValue(nil, metrics)
	if _, _, fast, _ = readMetrics(raw); fast != nil || heartbeatMemory(metrics) != nil {
		t.Fatal("memory without spilled_bytes")
	}
}
