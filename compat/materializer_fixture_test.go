package compat

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"daskgo/compat/venv"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// The materializer tests run the real helper with the project's virtualenv
// (scripts/setup.sh creates it before go test runs in CI) against
// update-graph messages recorded from a stock Client by
// testdata/capture_update_graph.py, and compare its answers with what a stock
// Python scheduler made of the same messages (testdata/update_graph/*.expect.bin).

// testLogger writes to the test log, so helper stderr shows up on failure.
func testLogger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.ConsoleWriter{Out: testWriter{t}, NoColor: true}).Level(zerolog.DebugLevel)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func startMaterializer(t *testing.T, cfg Config) *Materializer {
	t.Helper()
	cfg.Python = venv.Python(t)
	cfg.Log = testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start materializer: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// readFramed reads one framed message from a fixture file.
func readFramed(t testing.TB, path string) any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("fixture %s (regenerate with go generate ./compat/): %v", path, err)
	}
	defer f.Close()
	frames, err := protocol.ReadFrames(f, protocol.DefaultLimits)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	v, err := protocol.Decode(frames)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return v
}

// updateGraph loads a recorded update-graph op.
func updateGraph(t testing.TB, name string) *protocol.Map {
	t.Helper()
	msg, ok := readFramed(t, filepath.Join("testdata", "update_graph", name+".bin")).(*protocol.Map)
	if !ok || msg.Get("op") != "update-graph" {
		t.Fatalf("fixture %s is not an update-graph op", name)
	}
	return msg
}

// expectedTask is what the stock scheduler recorded for one task.
type expectedTask struct {
	deps         []protocol.Key
	order        int64
	kind         string
	dataProducer bool
	annotations  *protocol.Map
}

func expectedTasks(t testing.TB, name string) map[protocol.Key]expectedTask {
	t.Helper()
	items, ok := readFramed(t, filepath.Join("testdata", "update_graph", name+".expect.bin")).([]any)
	if !ok {
		t.Fatalf("%s.expect.bin is not a list", name)
	}
	out := map[protocol.Key]expectedTask{}
	for _, it := range items {
		d := it.(*protocol.Map)
		key, err := protocol.KeyOf(d.Get("key"))
		if err != nil {
			t.Fatal(err)
		}
		deps, err := protocol.KeysOf(d.Get("deps"))
		if err != nil {
			t.Fatal(err)
		}
		ann, _ := d.Get("annotations").(*protocol.Map)
		out[key] = expectedTask{
			deps: deps, order: d.Get("order").(int64), kind: d.Get("kind").(string),
			dataProducer: d.Get("data_producer").(bool), annotations: ann,
		}
	}
	return out
}

// awaitResult reads the next result; a missing one fails (no hang).
func awaitResult(t testing.TB, m *Materializer) *scheduler.GraphMaterialized {
	t.Helper()
	return awaitResultOf[*scheduler.GraphMaterialized](t, m)
}

// awaitResultOf waits for the materializer's next result, which must be a T.
func awaitResultOf[T scheduler.Stimulus](t testing.TB, m *Materializer) T {
	t.Helper()
	var zero T
	select {
	case st, ok := <-m.Results():
		if !ok {
			t.Fatal("results channel closed")
		}
		res, ok := st.(T)
		if !ok {
			t.Fatalf("result is %T, not %T", st, zero)
		}
		return res
	case <-time.After(2 * time.Minute):
		t.Fatal("no materializer result within 2 minutes")
	}
	return zero
}

func submit(t testing.TB, m *Materializer, id int64, msg *protocol.Map) {
	t.Helper()
	if err := m.Submit(helperRequest(t, id, "Client-test", msg)); err != nil {
		t.Fatalf("submit: %v", err)
	}
}

// helperRequest is what the engine sends for an update-graph op: its keys,
// decoded, and the op as the payload.
func helperRequest(t testing.TB, id int64, client string, msg *protocol.Map) scheduler.HelperRequest {
	t.Helper()
	keys, err := protocol.KeysOf(msg.Get("keys"))
	if err != nil && msg.Get("keys") != nil {
		t.Fatalf("update-graph keys: %v", err)
	}
	return scheduler.HelperRequest{ID: id, Client: client, Keys: keys, Msg: msg}
}

// keySet renders keys as a sorted list of their str() forms, for diffs.
func keySet(keys []protocol.Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.String()
	}
	sort.Strings(out)
	return out
}

// canonical renders a value with lists/tuples/sets unified and map entries
// sorted, so helper output (lists) and the scheduler's TaskState annotations
// (tuples, sets) compare equal when Python would consider them so.
func canonical(v any) string {
	switch x := v.(type) {
	case protocol.Set:
		return canonical([]any(x))
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = canonical(e)
		}
		return fmt.Sprint(parts)
	case *protocol.Map:
		if x == nil { // no annotations: the helper sends none
			return canonical(&protocol.Map{})
		}
		parts := make([]string, len(x.Entries))
		for i, e := range x.Entries {
			parts[i] = canonical(e.Key) + ": " + canonical(e.Value)
		}
		sort.Strings(parts)
		return fmt.Sprint(parts)
	default:
		return protocol.String(v)
	}
}

var (
	sharedOnce sync.Once
	shared     *Materializer
	sharedErr  error
)

// sharedHashSeed is the shared helper's PYTHONHASHSEED.
const sharedHashSeed = 3141592653

// sharedMaterializer is one helper for the read-only tests (a start costs
// about a second of imports). Small chunks make every test exercise the
// chunked answers. TestMain closes it.
func sharedMaterializer(t *testing.T) *Materializer {
	t.Helper()
	py := venv.Python(t)
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// The check compares Go's dask.order with the helper's, both under
		// HashSeed: a seed other than 0, as a scheduler draws one.
		// Every spec through the object table, whatever the graph's size
		// (materializer.py's PLAIN_BELOW_TASKS), so that the tests of
		// small graphs cover the splice.
		shared, sharedErr = Start(ctx, Config{Python: py, ChunkTasks: 25, CheckOrder: true, HashSeed: sharedHashSeed,
			Env: []string{"DASKGO_MATERIALIZER_PLAIN_BELOW=0"}})
	})
	if sharedErr != nil {
		t.Fatalf("start shared materializer: %v", sharedErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		_ = shared.Close()
	}
	os.Exit(code)
}

// runPython feeds one framed message {"v": v} to a Python snippet that
// has it as msg (loaded by distributed.protocol.loads) and returns stdout.
func runPython(t *testing.T, v any, code string) string {
	t.Helper()
	frames, err := protocol.Encode(protocol.NewMap("v", v), nil)
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	if err := protocol.WriteFrames(&in, frames); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(venv.Python(t), "-c", `
import struct, sys
from distributed.protocol import loads
b = sys.stdin.buffer.read()
n = struct.unpack("<Q", b[8:16])[0]
lengths = struct.unpack(f"<{n}Q", b[16:16 + 8 * n])
frames, o = [], 16 + 8 * n
for l in lengths:
    frames.append(b[o:o + l]); o += l
msg = loads(frames)["v"]
`+code)
	cmd.Stdin = &in
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}
