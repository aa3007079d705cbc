package compat

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"daskgo/compat/venv"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// barrierScript pickles a P2PBarrierTask the way dask.array's P2P rechunk
// builds it (8 output partitions: new chunks 4 x 2) and writes it framed
// as {"barrier": ToPickle(node), "plain": ToPickle(a Task)}.
const barrierScript = `
import struct, sys
from dask._task_spec import Task
from distributed.protocol import dumps
from distributed.protocol.serialize import ToPickle
from distributed.shuffle._core import P2PBarrierTask, p2p_barrier
from distributed.shuffle._rechunk import ArrayRechunkSpec
spec = ArrayRechunkSpec(id="abc", new=((1, 1, 1, 1), (2, 2)), old=((4,), (4,)), disk=False)
node = P2PBarrierTask("shuffle-barrier-abc", p2p_barrier, "abc", spec=spec)
frames = dumps({"barrier": ToPickle(node), "plain": ToPickle(Task("x", len, "abc"))})
lengths = [memoryview(f).nbytes for f in frames]
out = sys.stdout.buffer
out.write(struct.pack(f"<QQ{len(frames)}Q", 8 * (1 + len(frames)) + sum(lengths), len(frames), *lengths))
for f in frames:
    out.write(f)
`

func pickledBarrier(t *testing.T) (barrier, plain *protocol.Blob) {
	t.Helper()
	cmd := exec.Command(venv.Python(t), "-c", barrierScript)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("pickle a barrier: %v\n%s", err, stderr.String())
	}
	frames, err := protocol.ReadFrames(bytes.NewReader(raw), protocol.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	v, err := protocol.Decode(frames)
	if err != nil {
		t.Fatal(err)
	}
	m := v.(*protocol.Map)
	return m.Get("barrier").(*protocol.Blob), m.Get("plain").(*protocol.Blob)
}

func awaitShuffleRun(t *testing.T, m *Materializer) *scheduler.ShuffleRunCreated {
	t.Helper()
	return awaitResultOf[*scheduler.ShuffleRunCreated](t, m)
}

// TestShuffleRun: the helper picks workers for every output partition,
// keeps the partitions an aligned shuffle placed, and pickles a
// ShuffleRunSpec with the scheduler's run id that a worker can load.
func TestShuffleRun(t *testing.T) {
	m := sharedMaterializer(t)
	barrier, _ := pickledBarrier(t)
	workers := []string{"tcp://a:1", "tcp://b:2"}
	err := m.SubmitShuffleRun(scheduler.ShuffleRunRequest{ShuffleID: "abc", RunID: 7, Barrier: barrier,
		Workers: workers, Existing: []any{[]any{[]any{int64(0), int64(0)}, "tcp://elsewhere:3"}}})
	if err != nil {
		t.Fatal(err)
	}
	res := awaitShuffleRun(t, m)
	if res.Err != nil {
		t.Fatalf("shuffle_run failed: %s\n%s", res.Err.ExceptionText, res.Err.TracebackText)
	}
	if res.ShuffleID != "abc" || res.RunID != 7 {
		t.Fatalf("answer for %s[%d]", res.ShuffleID, res.RunID)
	}
	if len(res.WorkerFor) != 8 {
		t.Fatalf("worker_for has %d partitions, want 8: %s", len(res.WorkerFor), protocol.String(res.WorkerFor))
	}
	if got := protocol.String(res.WorkerFor[0]); got != `((0, 0), "tcp://elsewhere:3")` {
		t.Errorf("partition (0, 0) placed as %s, want where the aligned shuffle put it", got)
	}
	if got := strings.Join(res.Workers, " "); got != "tcp://a:1 tcp://b:2 tcp://elsewhere:3" {
		t.Errorf("distinct workers %q", got)
	}
	out := runPython(t, res.RunSpec, `
print(type(msg).__name__, msg.run_id, msg.id, len(msg.worker_for), msg.worker_for[(0, 0)], msg.worker_for[(3, 1)])
`)
	if out != "ShuffleRunSpec 7 abc 8 tcp://elsewhere:3 tcp://b:2" {
		t.Fatalf("run_spec loads in Python as %q", out)
	}
}

// TestShuffleRunErrors: a run_spec that is no P2P barrier, or no pickle at
// all, is an error answer carrying the Python exception; the helper goes on.
func TestShuffleRunErrors(t *testing.T) {
	m := sharedMaterializer(t)
	barrier, plain := pickledBarrier(t)
	cases := []struct {
		blob *protocol.Blob
		want string
	}{
		{plain, "not a P2PBarrierTask"},
		{protocol.NewPickled([]byte("not a pickle")), ""},
		{barrier, "asked for 'other'"},
	}
	for i, c := range cases {
		id := "abc"
		if i == 2 {
			id = "other"
		}
		if err := m.SubmitShuffleRun(scheduler.ShuffleRunRequest{ShuffleID: id, RunID: int64(i + 1),
			Barrier: c.blob, Workers: []string{"tcp://a:1"}}); err != nil {
			t.Fatal(err)
		}
		res := awaitShuffleRun(t, m)
		if res.Err == nil {
			t.Fatalf("case %d: shuffle_run succeeded, want an error", i)
		}
		if !strings.Contains(res.Err.ExceptionText, c.want) {
			t.Errorf("case %d: exception %q lacks %q", i, res.Err.ExceptionText, c.want)
		}
	}
	if err := m.SubmitShuffleRun(scheduler.ShuffleRunRequest{ShuffleID: "abc", RunID: 9,
		Barrier: barrier, Workers: []string{"tcp://a:1"}}); err != nil {
		t.Fatal(err)
	}
	if res := awaitShuffleRun(t, m); res.Err != nil || res.RunID != 9 {
		t.Fatalf("helper broken after errors: %+v", res)
	}
}

// TestWorkerPlugins: the register-worker plugins are a ShuffleWorkerPlugin
// pickle that a stock worker's plugin_add accepts.
func TestWorkerPlugins(t *testing.T) {
	m := sharedMaterializer(t)
	plugins := m.WorkerPlugins()
	if plugins.Len() != 1 {
		t.Fatalf("worker plugins %s, want just shuffle", protocol.String(plugins))
	}
	out := runPython(t, plugins.Get("shuffle"), `
import pickle
from distributed.diagnostics.plugin import WorkerPlugin
p = pickle.loads(msg)
print(type(p).__module__, type(p).__name__, isinstance(p, WorkerPlugin))
`)
	if out != "distributed.shuffle._worker_plugin ShuffleWorkerPlugin True" {
		t.Fatalf("shuffle plugin loads as %q", out)
	}
}
