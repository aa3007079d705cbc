package compat

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"daskgo/compat/order"
	"daskgo/protocol"
	"daskgo/protocol/pickle"
	"daskgo/scheduler"
)

// graphBuilder assembles one materialize answer: it converts each chunk as
// it arrives (the helper is already making the next one), and once the last
// chunk is in, does what update_graph does between materialization and
// creating task states: _cull for an LLGExpr, then dask.order.order, both in
// Go unless the helper already did them (ordering=python, or the client
// sent internal_priority).
type graphBuilder struct {
	table *objectTable
	tasks []scheduler.GraphTask
	// specBytes counts the run_spec bytes the engine will hold for this
	// graph: every spec, plus the object table once
	specBytes int64
	kinds     map[string]string // interned kind names: one string per kind, not per task
	final     *graphFinal
	hashSeed  uint32   // the PYTHONHASHSEED dask.order is reproduced under
	warnings  []string // malformed annotations, ignored (at most maxWarnings)
}

// maxWarnings bounds the annotation warnings logged per graph.
const maxWarnings = 10

// maxPresize caps the helper's size hint.
const maxPresize = 1 << 24

func newGraphBuilder(hashSeed uint32) *graphBuilder {
	return &graphBuilder{table: &objectTable{}, kinds: map[string]string{}, hashSeed: hashSeed}
}

// add converts one chunk. Specs are checked (and their memo renumbered)
// here, once, so that sending a task later cannot fail.
func (b *graphBuilder) add(c graphChunk) error {
	if b.tasks == nil && c.expected > int64(len(c.tasks)) {
		// one allocation for the whole graph instead of a copy per doubling
		// (1.3 s of 12 on a 1M-task graph); the bound keeps a bad hint harmless
		b.tasks = make([]scheduler.GraphTask, 0, min(c.expected, maxPresize))
	}
	b.table.objs = append(b.table.objs, c.objects...)
	for _, o := range c.objects {
		b.table.size += len(o)
	}
	for _, o := range c.objects {
		b.specBytes += int64(len(o))
	}
	specs := make([]TaskSpec, len(c.tasks)) // one allocation per chunk
	for i := range c.tasks {
		wt := &c.tasks[i]
		refs, err := pickle.Prepare(wt.spec, len(b.table.objs), int(wt.memoBase))
		if err != nil {
			return fmt.Errorf("spec of %s: %w", wt.key, err)
		}
		specs[i].spec = wt.spec
		b.specBytes += int64(len(wt.spec))
		if refs > 0 {
			specs[i].table = b.table
		}
		kind, ok := b.kinds[wt.kind]
		if !ok {
			kind = strings.Clone(wt.kind)
			b.kinds[kind] = kind
		}
		ann, warns := decodeAnnotations(wt.key, wt.annotations)
		if n := min(len(warns), maxWarnings-len(b.warnings)); n > 0 {
			b.warnings = append(b.warnings, warns[:n]...)
		}
		b.tasks = append(b.tasks, scheduler.GraphTask{
			Key: wt.key, Deps: wt.deps, Order: wt.order, Kind: kind,
			DataProducer: wt.dataProducer, Annotations: ann, RunSpec: &specs[i],
		})
	}
	if c.final != nil {
		b.final = c.final
	}
	return nil
}

// orderCheck is the outcome of comparing Go's priorities with the helper's
// dask.order.order (Config.CheckOrder).
type orderCheck struct {
	checked    bool
	tasks      int
	mismatches int
	detail     string // the first mismatches, for the log
}

// finish culls, orders and checks; keys are the update-graph's keys. The
// graph's keys come back resolved (scheduler.IndexGraph), so that the
// engine applies the graph without hashing them again.
func (b *graphBuilder) finish(keys []protocol.Key) ([]scheduler.GraphTask, *scheduler.GraphKeys, orderCheck, error) {
	var chk orderCheck
	if b.final == nil {
		return nil, nil, chk, errors.New("answer ended without its final chunk")
	}
	g, err := indexGraph(b.tasks)
	if err != nil {
		return nil, nil, chk, err
	}
	if b.final.explicitCulling && !b.final.culled {
		g = g.cull(keys)
	}
	tasks := g.tasks
	if !b.final.ordered {
		og := g.orderGraph()
		og.HashSeed = b.hashSeed
		prio, err := order.Order(og)
		if err != nil {
			return nil, nil, chk, fmt.Errorf("dask.order: %w", err)
		}
		for i := range tasks {
			tasks[i].Order = prio[i]
		}
	}
	if want := b.final.checkOrder; want != nil {
		chk = compareOrder(tasks, want)
	}
	return tasks, g.GraphKeys, chk, nil
}

// compareOrder compares Go's priorities with dask.order's.
func compareOrder(tasks []scheduler.GraphTask, want []int64) orderCheck {
	chk := orderCheck{checked: true, tasks: len(tasks)}
	if len(want) != len(tasks) {
		chk.mismatches = len(tasks)
		chk.detail = fmt.Sprintf("dask.order ordered %d tasks, Go %d", len(want), len(tasks))
		return chk
	}
	var d strings.Builder
	for i := range tasks {
		if tasks[i].Order == want[i] {
			continue
		}
		chk.mismatches++
		if chk.mismatches <= 5 {
			fmt.Fprintf(&d, "%s: go %d, dask.order %d; ", tasks[i].Key, tasks[i].Order, want[i])
		}
	}
	chk.detail = d.String()
	return chk
}

// indexedGraph is a materialized graph with dependencies resolved to
// positions (Deps(i): task i's, -1 for a key the graph does not hold, a
// dependency the scheduler already knows).
type indexedGraph struct {
	tasks []scheduler.GraphTask
	*scheduler.GraphKeys
}

// indexGraph resolves every dependency once. A dependency that names a
// task of the graph is re-pointed at that task's Key string, so the graph
// holds each key's bytes once.
func indexGraph(tasks []scheduler.GraphTask) (*indexedGraph, error) {
	keys := scheduler.IndexGraph(tasks)
	if e := keys.Duplicate(); e >= 0 {
		return nil, fmt.Errorf("key %s appears twice in the graph", tasks[e].Key)
	}
	for i := range tasks {
		deps := tasks[i].Deps
		for d, j := range keys.Deps(i) {
			if j >= 0 {
				deps[d] = tasks[j].Key
			}
		}
	}
	return &indexedGraph{tasks: tasks, GraphKeys: keys}, nil
}

// cull mirrors distributed.scheduler._cull for an LLGExpr: keep what the
// requested keys reach. Tasks keep their graph order (distributed's order
// follows its set's pops, which depend on the hash seed).
func (g *indexedGraph) cull(keys []protocol.Key) *indexedGraph {
	keep := make([]bool, len(g.tasks))
	work := make([]int32, 0, len(keys))
	for _, k := range keys {
		if i := g.Lookup(k); i >= 0 {
			work = append(work, i)
		}
	}
	kept := 0
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		if keep[i] {
			continue
		}
		keep[i] = true
		kept++
		for _, j := range g.Deps(int(i)) {
			if j >= 0 && !keep[j] {
				work = append(work, j)
			}
		}
	}
	if kept == len(g.tasks) {
		return g
	}
	tasks := make([]scheduler.GraphTask, 0, kept)
	for i := range g.tasks {
		if keep[i] {
			tasks = append(tasks, g.tasks[i])
		}
	}
	out, _ := indexGraph(tasks) // keys are unique: they were in g
	return out
}

// orderGraph is the graph as dask.order sees it: dependencies that the
// graph does not hold become external keys.
func (g *indexedGraph) orderGraph() *order.Graph {
	n := len(g.tasks)
	og := &order.Graph{
		Keys:     make([]protocol.Key, n, n+8),
		Deps:     make([][]int32, n),
		IsTask:   make([]bool, n),
		NumNodes: n,
	}
	external := map[protocol.Key]int32{}
	for i := range g.tasks {
		t := &g.tasks[i]
		og.Keys[i] = t.Key
		og.IsTask[i] = t.Kind != "DataNode" // dask.core.istask
		deps := g.Deps(i)
		if slices.Contains(deps, -1) {
			// external keys are numbered in a copy: the GraphKeys go to the
			// engine as they are
			deps = slices.Clone(deps)
			for d, j := range deps {
				if j >= 0 {
					continue
				}
				k := t.Deps[d]
				x, ok := external[k]
				if !ok {
					x = int32(len(og.Keys))
					external[k] = x
					og.Keys = append(og.Keys, k)
				}
				deps[d] = x
			}
		}
		og.Deps[i] = deps
	}
	return og
}
