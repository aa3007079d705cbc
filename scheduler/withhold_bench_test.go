package scheduler

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"daskgo/protocol"
)

// BenchmarkWithholding1M drives the engine with a million-task graph:
// 500,000 root tasks feeding a binary tree reduction (999,999 tasks) on
// 100 simulated 2-thread workers, in the three modes. Every compute-task is
// answered with task-finished, most recent first per worker, until the
// final sum is in memory; the client then releases it. Reported per
// transition (the engine's own count) and per task. Run it alone:
//
//	go test -run '^$' -bench Withholding1M -benchtime 1x ./scheduler/
func BenchmarkWithholding1M(b *testing.B) {
	for _, m := range []struct {
		name string
		sat  float64
		co   bool
	}{{"off", math.Inf(1), false}, {"withholding", 1.0, false}, {"coassign", 1.0, true}} {
		b.Run(m.name, func(b *testing.B) { benchWithholding(b, m.sat, m.co, benchRoots, 100) })
	}
}

// binaryReduction returns n roots and their pairwise reduction in
// post-order (dask.order's numbering), and the final key.
func binaryReduction(n int) ([]GraphTask, protocol.Key) {
	spec := BlobSpec{&protocol.Blob{Pickled: true, Header: []byte{0x80}, Frames: [][]byte{[]byte("spec")}}}
	out := make([]GraphTask, 0, 2*n)
	var build func(level, lo, hi int) protocol.Key
	build = func(level, lo, hi int) protocol.Key {
		if hi-lo == 1 {
			k := protocol.StrKey("x-" + strconv.Itoa(lo))
			out = append(out, GraphTask{Key: k, Order: int64(len(out)), Kind: "Task", RunSpec: spec})
			return k
		}
		mid := lo + (hi-lo+1)/2
		l, r := build(level+1, lo, mid), build(level+1, mid, hi)
		k := protocol.StrKey("sum" + strconv.Itoa(level) + "-" + strconv.Itoa(lo))
		out = append(out, GraphTask{Key: k, Deps: []protocol.Key{l, r}, Order: int64(len(out)), Kind: "Task", RunSpec: spec})
		return k
	}
	return out, build(0, 0, n)
}

type pendingTask struct {
	key   protocol.Key
	runID int64
}

func benchWithholding(b *testing.B, sat float64, co bool, roots, nworkers int) {
	tasks, final := binaryReduction(roots)
	at := time.Unix(1_700_000_000, 0)
	var transitions uint64
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		s := New(Config{WorkerSaturation: sat, RootTaskCoAssignment: co, TransitionLogSize: 1024})
		workers := make([]string, nworkers)
		for i := range workers {
			workers[i] = fmt.Sprintf("tcp://10.0.%d.%d:8000", i/250, i%250)
			s.Handle(&AddWorker{Base: Base{ID: "aw", At: at}, Address: workers[i], Name: strconv.Itoa(i), NThreads: 2, Status: "running"})
		}
		s.Handle(&AddClient{Base: Base{ID: "ac", At: at}, Client: "c"})
		out := s.Handle(&UpdateGraph{Base: Base{ID: "ug", At: at}, Client: "c",
			Keys: []protocol.Key{final}, FifoTimeout: 100 * time.Millisecond})
		out = s.Handle(&GraphMaterialized{Base: Base{ID: "gm", At: at}, RequestID: out.Helper[0].ID, Client: "c", Tasks: tasks})
		// per worker LIFO stacks of compute-tasks, served round-robin
		stacks := make(map[string][]pendingTask, nworkers)
		collect := func(o Outbox) {
			for _, p := range o.Workers {
				for _, m := range p.Msgs {
					if m.Get("op") == "compute-task" {
						stacks[p.Peer] = append(stacks[p.Peer], pendingTask{m.Get("key").(protocol.Key), m.Get("run_id").(int64)})
					}
				}
			}
			s.Recycle(&o) // as the outer ring does once the outbox is sent
		}
		collect(out)
		finished := &TaskFinished{}
		done := 0
		for progress := true; progress; {
			progress = false
			for _, w := range workers {
				st := stacks[w]
				if len(st) == 0 {
					continue
				}
				p := st[len(st)-1]
				stacks[w] = st[:len(st)-1]
				*finished = TaskFinished{Base: Base{ID: "tf", At: at}, Worker: w, Key: p.key, RunID: p.runID,
					NBytes: 28, TypeName: "int", StartStops: []StartStop{{Action: "compute", Start: 1, Stop: 1.001}}}
				collect(s.Handle(finished))
				done++
				progress = true
			}
		}
		if done != len(tasks) {
			b.Fatalf("finished %d of %d tasks", done, len(tasks))
		}
		s.Handle(&ClientReleasesKeys{Base: Base{ID: "cr", At: at}, Client: "c", Keys: []protocol.Key{final}})
		if s.NumTasks() != 0 {
			b.Fatalf("%d tasks left", s.NumTasks())
		}
		transitions += s.log.total
	}
	b.StopTimer()
	ns := float64(b.Elapsed().Nanoseconds())
	b.ReportMetric(ns/float64(transitions), "ns/transition")
	b.ReportMetric(float64(transitions)/float64(b.N*len(tasks)), "transitions/task")
	b.ReportMetric(ns/float64(b.N*len(tasks)), "ns/task")
	// CPU time (user+sys, GC included): wall time on a shared 2-core
	// machine mostly measures the neighbours (see BenchmarkSubmitFinish).
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(transitions), "cpu-ns/transition")
}

// benchRoots is the million-task graph's 500,000 roots; DASKGO_BENCH_ROOTS
// lowers it for a quick look (profiles, scaling checks).
var benchRoots = func() int {
	if n, err := strconv.Atoi(os.Getenv("DASKGO_BENCH_ROOTS")); err == nil && n > 0 {
		return n
	}
	return 500_000
}()
