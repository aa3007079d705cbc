package order

import (
	"testing"

	"daskgo/protocol"
)

func tupleKey(tb testing.TB, parts ...any) protocol.Key {
	k, err := protocol.KeyOf(parts)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// reductionTree is a binary reduction tree with 2**levels-1 nodes, in dask
// array's layer order: leaves ("x", i), then ("sum", level, i) per level.
// testdata/bench_python.py builds the same graph for dask.order.
func reductionTree(tb testing.TB, levels int) *Graph {
	g := &Graph{}
	width := 1 << (levels - 1)
	prev := make([]int32, width)
	for i := 0; i < width; i++ {
		prev[i] = int32(len(g.Keys))
		g.Keys = append(g.Keys, tupleKey(tb, "x", int64(i)))
		g.Deps = append(g.Deps, nil)
	}
	for level := 1; len(prev) > 1; level++ {
		next := make([]int32, len(prev)/2)
		for i := range next {
			next[i] = int32(len(g.Keys))
			g.Keys = append(g.Keys, tupleKey(tb, "sum", int64(level), int64(i)))
			g.Deps = append(g.Deps, []int32{prev[2*i], prev[2*i+1]})
		}
		prev = next
	}
	g.NumNodes = len(g.Keys)
	g.IsTask = make([]bool, g.NumNodes)
	for i := range g.IsTask {
		g.IsTask[i] = true
	}
	return g
}

// independentTasks is client.map over n inputs: ("inc", i), no edges.
func independentTasks(tb testing.TB, n int) *Graph {
	g := &Graph{NumNodes: n, Deps: make([][]int32, n), IsTask: make([]bool, n)}
	for i := 0; i < n; i++ {
		g.Keys = append(g.Keys, tupleKey(tb, "inc", int64(i)))
		g.IsTask[i] = true
	}
	return g
}

func benchmarkOrder(b *testing.B, g *Graph) {
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Order(g); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(g.NumNodes), "ns/task")
}

func BenchmarkOrderReductionTree1M(b *testing.B) { benchmarkOrder(b, reductionTree(b, 20)) }

func BenchmarkOrderIndependent200k(b *testing.B) { benchmarkOrder(b, independentTasks(b, 200_000)) }

func BenchmarkOrderReductionTree64k(b *testing.B) { benchmarkOrder(b, reductionTree(b, 16)) }

// BenchmarkOrderReductionTree8 is a small computation's graph: what the
// order costs per update-graph when only a few tasks come (fixed costs).
func BenchmarkOrderReductionTree8(b *testing.B) { benchmarkOrder(b, reductionTree(b, 3)) }
