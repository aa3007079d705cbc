package sim

import (
	"fmt"
	"strconv"
	"strings"

	"daskgo/protocol"
)

// Synthetic builds a graph without Python, for scale tests and the
// 1,000,000-task run:
//
//	tree:N   N roots (0.1 s, 10 MiB each) feeding a binary tree reduction
//	         (0.05 s per node, outputs 10 MiB), in post-order like
//	         dask.order numbers a reduction: 2N-1 tasks.
//	indep:N  N independent tasks (1 s, 1 MiB each) and one sum of them.
//
// Keys are tuples ("x", i), ("sum-<level>", i) so task groups and prefixes
// split as dask's would.
func Synthetic(spec string) (*Graph, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("synthetic graph %q: want tree:N or indep:N with N >= 1", spec)
	}
	g := &Graph{Workload: spec, Scale: "synthetic"}
	switch kind {
	case "tree":
		g.Tasks = make([]Task, 0, 2*n)
		g.tree(0, 0, n)
	case "indep":
		g.Tasks = make([]Task, 0, n+1)
		deps := make([]int32, n)
		for i := range n {
			deps[i] = g.add(tupleKey("job", i), nil, 1, 1<<20, 0)
		}
		g.add(protocol.StrKey("total"), deps, 0.01, 8, 0)
	default:
		return nil, fmt.Errorf("synthetic graph %q: unknown kind %q", spec, kind)
	}
	g.DataBytes = int64(len(g.Tasks)) << 20
	return g, nil
}

func (g *Graph) tree(level, lo, hi int) int32 {
	if hi-lo == 1 {
		return g.add(tupleKey("x", lo), nil, 0.1, 10<<20, 10<<20)
	}
	mid := lo + (hi-lo+1)/2
	l, r := g.tree(level+1, lo, mid), g.tree(level+1, mid, hi)
	return g.add(tupleKey("sum-"+strconv.Itoa(level), lo), []int32{l, r}, 0.05, 10<<20, 0)
}

func (g *Graph) add(k protocol.Key, deps []int32, dur float64, nbytes, transient int64) int32 {
	i := int32(len(g.Tasks))
	g.Tasks = append(g.Tasks, Task{Key: k, Order: int64(i), Deps: deps, Duration: dur, NBytes: nbytes, Transient: transient})
	return i
}

func tupleKey(name string, i int) protocol.Key {
	k, err := protocol.KeyOf([]any{name, int64(i)})
	if err != nil {
		panic(err) // a string and an int are always a valid key
	}
	return k
}
