package compat

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"daskgo/compat/venv"
	"daskgo/protocol"
	"daskgo/protocol/pickle"
)

// TestRunSpecRoundTrip: for graphs covering every kind of run_spec content
// (testdata/runspec_roundtrip.py), the payloads Go assembles from the
// helper's pickles (their references to the object table as persistent ids
// or as gets of a pre-populated memo) and its object table load, in a stock
// Python, to the very GraphNodes Scheduler.update_graph makes of the same
// messages (same type, equal, same dependencies, same shared objects) and
// run to the same results. The shared helper sends every spec through the
// table (DASKGO_MATERIALIZER_PLAIN_BELOW=0); a helper that sends graphs
// under 100 tasks whole sends every spec of these graphs whole but the
// bulky ones, and what reaches the worker loads the same.
func TestRunSpecRoundTrip(t *testing.T) {
	t.Run("object-table", func(t *testing.T) {
		tasks, spliced, forms := runSpecRoundTrip(t, sharedMaterializer(t))
		// the memo form for the callables; persistent ids for the bulky
		// values the memo form cannot catch
		if forms.memoGets == 0 || forms.persistentIDs == 0 {
			t.Fatalf("%d tasks, %d spliced, %+v: want references in both forms", tasks, spliced, forms)
		}
		t.Logf("%d tasks, %d spliced, %+v", tasks, spliced, forms)
	})
	t.Run("memo-table-of-2", func(t *testing.T) {
		// legacy's third distinct callable fills the memo: the rest of
		// that graph goes with persistent ids, after specs in the memo form
		m := startMaterializer(t, Config{ChunkTasks: 25, HashSeed: sharedHashSeed,
			Env: []string{"DASKGO_MATERIALIZER_PLAIN_BELOW=0", "DASKGO_MATERIALIZER_MEMO_TABLE_MAX=2"}})
		tasks, spliced, forms := runSpecRoundTrip(t, m)
		if forms.mixedGraphs == 0 {
			t.Fatalf("%d tasks, %d spliced, %+v: no graph sent both forms", tasks, spliced, forms)
		}
		t.Logf("%d tasks, %d spliced, %+v", tasks, spliced, forms)
	})
	t.Run("plain-below-100", func(t *testing.T) {
		m := startMaterializer(t, Config{ChunkTasks: 25, HashSeed: sharedHashSeed,
			Env: []string{"DASKGO_MATERIALIZER_PLAIN_BELOW=100"}})
		tasks, spliced, _ := runSpecRoundTrip(t, m)
		// bulky's 53 specs too big to send whole: the 51 holding the
		// shared 64 KiB blob, the shared array's and the one with its own
		// 8 KiB; every other task of the five graphs is sent whole
		if spliced != 53 || tasks <= spliced {
			t.Fatalf("%d tasks, %d spliced: want bulky's 53 through the table and the rest whole", tasks, spliced)
		}
		t.Logf("%d tasks, %d spliced", tasks, spliced)
	})
}

// refForms counts the specs' references to the object table by form
// (pickle.References), and the graphs whose specs used both.
type refForms struct {
	persistentIDs, memoGets, mixedGraphs int
}

// runSpecRoundTrip materializes the test graphs on m and has a stock
// Python check the payloads; it returns how many tasks there were, how
// many of them referred to the object table, and in which forms.
func runSpecRoundTrip(t *testing.T, m *Materializer) (tasks, spliced int, forms refForms) {
	dir := t.TempDir()
	if keep := os.Getenv("DASKGO_KEEP_RUNSPEC_DIR"); keep != "" { // for debugging a failure
		dir = filepath.Join(keep, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := mustAbs(t, "testdata/runspec_roundtrip.py")
	py := func(args ...string) string {
		cmd := exec.Command(venv.Python(t), append([]string{script}, args...)...)
		cmd.Dir = dir // the client's __main__ must not be importable by the helper
		// the shared helper runs with PYTHONHASHSEED=sharedHashSeed, and
		// materializing is hash-dependent (GraphNode.fuse sorts external
		// keys by hash): the stock reference must see the same hashes
		cmd.Env = append(os.Environ(), "PYTHONHASHSEED="+strconv.FormatUint(sharedHashSeed, 10))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("runspec_roundtrip.py %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Log(py("make", dir))
	for i, name := range []string{"legacy", "new_style", "bulky", "array", "annotated"} {
		msg, ok := readFramed(t, filepath.Join(dir, name+".bin")).(*protocol.Map)
		if !ok {
			t.Fatalf("%s.bin is not an update-graph dict", name)
		}
		submit(t, m, int64(200+i), msg)
		res := awaitResult(t, m)
		if res.Err != nil {
			t.Fatalf("%s: materialize failed: %s\n%s", name, res.Err.ExceptionText, res.Err.TracebackText)
		}
		var specs []any
		own := 0 // spec bytes held per task, the shared table apart
		var graph refForms
		for _, task := range res.Tasks {
			tasks++
			ts := task.RunSpec.(*TaskSpec)
			own += ts.Size()
			if ts.table != nil {
				spliced++
			}
			pids, gets := pickle.References(ts.spec)
			graph.persistentIDs += pids
			graph.memoGets += gets
			p, err := task.RunSpec.Payload().PickledObj()
			if err != nil {
				t.Fatalf("%s %s: %v", name, task.Key, err)
			}
			if refs, err := pickle.Scan(p, 0); err != nil || refs != 0 {
				t.Fatalf("%s %s: payload is not self-contained: %d persistent ids, %v", name, task.Key, refs, err)
			}
			specs = append(specs, []any{task.Key.Value(), p})
		}
		forms.persistentIDs += graph.persistentIDs
		forms.memoGets += graph.memoGets
		if graph.persistentIDs > 0 && graph.memoGets > 0 {
			forms.mixedGraphs++
		}
		if name == "bulky" && own > 64<<10 {
			// 51 tasks share a 64 KiB bytes object: pickled per task they
			// would hold 3.3 MB; in the table they hold it once, apart
			t.Errorf("bulky: the tasks' own specs are %d bytes: the shared bytes were pickled into each task", own)
		}
		frames, err := protocol.Encode(protocol.NewMap("specs", specs), nil)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := protocol.WriteFrames(&buf, frames); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".specs.bin"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Log(py("check", dir))
	return tasks, spliced, forms
}

// TestHelperMemoryReturnsAfterAGraph: after answering a 100k-task graph
// (a tree of __main__ functions, as client.get sends it) the helper frees
// it and hands the memory back (release_memory): its RSS ends within
// 24 MiB of what it was before the graph, while the graph took it 32 MiB
// or more above that (the graph streams through: it is never held whole).
func TestHelperMemoryReturnsAfterAGraph(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(venv.Python(t), mustAbs(t, "testdata/runspec_roundtrip.py"), "make", dir, "big")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make big graph: %v\n%s", err, out)
	}
	msg, ok := readFramed(t, filepath.Join(dir, "big.bin")).(*protocol.Map)
	if !ok {
		t.Fatal("big.bin is not an update-graph dict")
	}
	m := startMaterializer(t, Config{RecycleAbove: -1})
	pid := m.PID()
	before := processRSS(pid)
	submit(t, m, 1, msg)
	res := awaitResult(t, m)
	if res.Err != nil || len(res.Tasks) < 100_000 {
		t.Fatalf("materialize: %d tasks, err %+v", len(res.Tasks), res.Err)
	}
	after := processRSS(pid)
	peak := peakRSS(pid)
	t.Logf("helper RSS: %d MiB before, peak %d MiB, %d MiB after", before>>20, peak>>20, after>>20)
	if before == 0 || after == 0 {
		t.Fatal("cannot read the helper's RSS from /proc")
	}
	if after-before > 24<<20 {
		t.Errorf("helper kept %d MiB after the graph (before %d MiB, peak %d MiB)", (after-before)>>20, before>>20, peak>>20)
	}
	if peak-before < 32<<20 {
		t.Errorf("peak %d MiB vs %d MiB before: the graph did not load the helper, the test proves nothing", peak>>20, before>>20)
	}
}

// peakRSS is VmHWM from /proc/PID/status, bytes.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
