package scheduler

import (
	"fmt"
	"math"
	"syscall"
	"testing"
	"time"

	"daskgo/protocol"
)

// BenchmarkSubmitFinish drives n independent tasks through
// update-graph -> compute-task -> task-finished -> key-in-memory ->
// client-releases-keys, the hot path of a big map, with queuing on
// (saturation 1.1) or off (inf). Reported per task.
func BenchmarkSubmitFinish(b *testing.B) {
	for _, sat := range []float64{1.1, math.Inf(1)} {
		b.Run(fmt.Sprintf("sat=%v", sat), func(b *testing.B) { benchSubmitFinish(b, sat, 100_000, false) })
	}
}

// BenchmarkSubmitFinishProgress is BenchmarkSubmitFinish with a progress
// bar's watch open on every key: what the transition hook and the setup
// (dependent_keys) add per task.
func BenchmarkSubmitFinishProgress(b *testing.B) {
	b.Run("sat=1.1", func(b *testing.B) { benchSubmitFinish(b, 1.1, 100_000, true) })
}

func benchSubmitFinish(b *testing.B, sat float64, n int, progress bool) {
	tasks := make([]GraphTask, n)
	allKeys := make([]protocol.Key, n)
	spec := BlobSpec{&protocol.Blob{Pickled: true, Header: []byte{0x80}, Frames: [][]byte{[]byte("spec")}}}
	for i := range tasks {
		key := fmt.Sprintf("inc-%d", i)
		tasks[i] = GraphTask{Key: protocol.StrKey(key), Order: int64(i), Kind: "Task", RunSpec: spec}
		allKeys[i] = tasks[i].Key
	}
	workers := make([]string, 8)
	for i := range workers {
		workers[i] = fmt.Sprintf("tcp://10.0.0.%d:8000", i)
	}
	at := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		s := New(Config{WorkerSaturation: sat})
		for i, w := range workers {
			s.Handle(&AddWorker{Base: Base{ID: "aw", At: at}, Address: w, Name: fmt.Sprint(i), NThreads: 4, Status: "running"})
		}
		s.Handle(&AddClient{Base: Base{ID: "ac", At: at}, Client: "c"})
		out := s.Handle(&UpdateGraph{Base: Base{ID: "ug", At: at}, Client: "c",
			Keys: allKeys, FifoTimeout: 100 * time.Millisecond})
		out = s.Handle(&GraphMaterialized{Base: Base{ID: "gm", At: at}, RequestID: out.Helper[0].ID, Client: "c", Tasks: tasks})
		if progress {
			s.Handle(&StartProgress{Base: Base{ID: "sp", At: at}, Keys: allKeys, Complete: true, ReplyTo: 1})
		}
		pending := make([]*protocol.Map, 0, 64)
		pendingTo := make([]string, 0, 64)
		collect := func(o Outbox) {
			for _, p := range o.Workers {
				for _, m := range p.Msgs {
					if m.Get("op") == "compute-task" {
						pending = append(pending, m)
						pendingTo = append(pendingTo, p.Peer)
					}
				}
			}
			s.Recycle(&o) // as the outer ring does once the outbox is sent
		}
		collect(out)
		done := 0
		finished := &TaskFinished{}
		for len(pending) > 0 {
			m, w := pending[len(pending)-1], pendingTo[len(pendingTo)-1]
			pending, pendingTo = pending[:len(pending)-1], pendingTo[:len(pendingTo)-1]
			*finished = TaskFinished{Base: Base{ID: "tf", At: at}, Worker: w, Key: m.Get("key").(protocol.Key),
				RunID: m.Get("run_id").(int64), NBytes: 28, Type: []byte("int"), TypeName: "int",
				StartStops: []StartStop{{Action: "compute", Start: 1, Stop: 1.001}}}
			collect(s.Handle(finished))
			done++
		}
		if done != n {
			b.Fatalf("finished %d of %d tasks", done, n)
		}
		if _, final, _ := s.ProgressReport(1); progress && !final {
			b.Fatal("the progress watch did not finish")
		}
		s.Handle(&ClientReleasesKeys{Base: Base{ID: "cr", At: at}, Client: "c", Keys: allKeys})
		if s.NumTasks() != 0 {
			b.Fatalf("%d tasks left", s.NumTasks())
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/task")
	// CPU time (user+sys, GC included) is what the engine costs; wall time
	// on a shared 2-core machine mostly measures the neighbours.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/task")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
