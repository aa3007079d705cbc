package compat

import (
	"fmt"
	"testing"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// BenchmarkGraphApply is the Go side of a materialized graph's arrival,
// without the helper: the builder's finish (index, dask.order) and the
// engine applying the graph, on a binary tree reduction of 199,999 tasks
// (the shape of the graph-path benchmark's tree-200k). Results:
// scripts/bench/results/graph-keys/.
//
//	go test ./compat -run XX -bench GraphApply -benchtime 5x
func BenchmarkGraphApply(b *testing.B) {
	const leaves = 100_000
	spec := &TaskSpec{spec: []byte{0x80}}
	template := make([]scheduler.GraphTask, 0, 2*leaves)
	level := make([]protocol.Key, leaves)
	for i := range level {
		level[i] = protocol.StrKey(fmt.Sprintf("leaf-%x-%d", 0xabcdef, i))
		template = append(template, scheduler.GraphTask{Key: level[i], Kind: "Task", RunSpec: spec})
	}
	for depth := 0; len(level) > 1; depth++ {
		next := make([]protocol.Key, 0, (len(level)+1)/2)
		for i := 0; i < len(level); i += 2 {
			deps := level[i:min(i+2, len(level))]
			k := protocol.StrKey(fmt.Sprintf("sum-%d-%x-%d", depth, 0xabcdef, i/2))
			template = append(template, scheduler.GraphTask{Key: k, Deps: append([]protocol.Key(nil), deps...), Kind: "Task", RunSpec: spec})
			next = append(next, k)
		}
		level = next
	}
	root := []protocol.Key{level[0]}
	at := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		tasks := make([]scheduler.GraphTask, len(template))
		for i := range template {
			tasks[i] = template[i]
			tasks[i].Deps = append([]protocol.Key(nil), template[i].Deps...)
		}
		gb := newGraphBuilder(0)
		gb.tasks = tasks
		gb.final = &graphFinal{}
		s := scheduler.New(scheduler.Config{WorkerSaturation: 1.1})
		s.Handle(&scheduler.AddClient{Base: scheduler.Base{ID: "ac", At: at}, Client: "c"})
		out := s.Handle(&scheduler.UpdateGraph{Base: scheduler.Base{ID: "ug", At: at}, Client: "c", Keys: root})
		b.StartTimer()
		got, keys, _, err := gb.finish(root)
		if err != nil {
			b.Fatal(err)
		}
		s.Handle(&scheduler.GraphMaterialized{Base: scheduler.Base{ID: "gm", At: at}, RequestID: out.Helper[0].ID, Client: "c", Tasks: got, Keys: keys})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(template)), "ns/task")
}
