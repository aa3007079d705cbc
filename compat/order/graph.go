package order

import (
	"fmt"
	"math/bits"

	"daskgo/protocol"
)

// Graph is what dask.order sees of a materialized graph.
type Graph struct {
	// Keys[i] is node i's key. Nodes 0..NumNodes-1 are the graph's, in the
	// dsk dict's iteration order. Nodes NumNodes..len(Keys)-1 are external
	// keys: dependencies that are not in the graph (dask.order adds a
	// DataNode for each and leaves them out of its result; their order here
	// does not matter). Keys must be distinct under Python equality (1 and
	// 1.0 are one dict key), as in any dsk dict.
	Keys []protocol.Key
	// Deps[i] lists node i's dependencies (indices into Keys) in the order
	// its dependencies frozenset was built from: a Task's TaskRef arguments
	// in argument order (Task.__init__ adds them one by one to a set, then
	// freezes it), an Alias's single target. A repeated index is ignored, as
	// the set ignores it. External nodes have no dependencies.
	//
	// An argument that is itself a GraphNode with dependencies (a List,
	// Dict or nested Task; an Alias) is not added key by key: Task.__init__
	// copies its frozenset (set(a.dependencies), or .update() after the
	// first argument), and the copy can lay keys out differently. To be
	// exact for such tasks, write that argument's own construction between
	// DepsOpen and DepsClose, recursively. A flat list treats it as plain
	// TaskRef arguments, which is what a graph rebuilt from
	// list(node.dependencies) has.
	Deps [][]int32
	// IsTask[i] is istask(dsk[key]) for i < NumNodes: false only for a
	// DataNode. (Task and Alias build the same one-element table, so the
	// two need not be told apart.)
	IsTask []bool
	// NumNodes is the number of graph nodes; the rest of Keys are external.
	NumNodes int
	// HashSeed is the PYTHONHASHSEED of the interpreter whose dask.order
	// the result reproduces (0: randomization off). Python's scheduler runs
	// under a random one per process, and on some graphs (dot-product) the
	// priorities, and the workers' memory, differ by seed.
	HashSeed uint32
}

// Markers in Graph.Deps around a nested GraphNode argument's construction.
const (
	DepsOpen  int32 = -1
	DepsClose int32 = -2
)

// validate rejects what dask.order could not be given: out-of-range
// indices, unbalanced nesting markers, dependencies of external keys.
func (g *Graph) validate() error {
	switch {
	case g.NumNodes < 0 || g.NumNodes > len(g.Keys):
		return fmt.Errorf("order: NumNodes %d with %d keys", g.NumNodes, len(g.Keys))
	case len(g.Keys) >= 1<<31-1:
		return fmt.Errorf("order: %d keys do not fit int32 node ids", len(g.Keys))
	case len(g.Deps) < g.NumNodes || len(g.Deps) > len(g.Keys):
		return fmt.Errorf("order: %d dependency lists for %d nodes", len(g.Deps), g.NumNodes)
	case len(g.IsTask) < g.NumNodes:
		return fmt.Errorf("order: %d IsTask flags for %d nodes", len(g.IsTask), g.NumNodes)
	}
	for i, deps := range g.Deps {
		if i >= g.NumNodes && len(deps) > 0 {
			return fmt.Errorf("order: external key %s has dependencies", g.Keys[i])
		}
		depth := 0
		for _, d := range deps {
			switch {
			case d == DepsOpen:
				depth++
			case d == DepsClose:
				if depth--; depth < 0 {
					return fmt.Errorf("order: dependencies of %s close a group never opened", g.Keys[i])
				}
			case d < 0 || int(d) >= len(g.Keys):
				return fmt.Errorf("order: %s depends on node %d of %d", g.Keys[i], d, len(g.Keys))
			}
		}
		if depth != 0 {
			return fmt.Errorf("order: dependencies of %s leave %d groups open", g.Keys[i], depth)
		}
	}
	return nil
}

// frozenSets stores one frozenset per node, compactly: members in slot
// order with their slot indices (CSR), the table size and a dummies flag.
// Node i's set is keys[start[i]:start[i+1]].
type frozenSets struct {
	start []int32
	keys  []int32
	pos   []int32
	shape []uint8 // log2 of the table size, | dirtyBit when it holds dummies
}

const dirtyBit = 0x80

func (f *frozenSets) view(i int32) frozenView {
	a, b := f.start[i], f.start[i+1]
	sh := f.shape[i]
	return frozenView{
		keys:  f.keys[a:b:b],
		pos:   f.pos[a:b:b],
		mask:  1<<(sh&^dirtyBit) - 1,
		dirty: sh&dirtyBit != 0,
	}
}

func (f *frozenSets) members(i int32) []int32 {
	a, b := f.start[i], f.start[i+1]
	return f.keys[a:b:b]
}

func (f *frozenSets) size(i int32) int { return int(f.start[i+1] - f.start[i]) }

// appendSet appends s's table as the next node's frozenset.
func (f *frozenSets) appendSet(s *pySet) {
	for i, k := range s.slots {
		if k >= 0 {
			f.keys = append(f.keys, k)
			f.pos = append(f.pos, int32(i))
		}
	}
	sh := uint8(bits.TrailingZeros(uint(len(s.slots))))
	if s.fill != s.used {
		sh |= dirtyBit
	}
	f.shape = append(f.shape, sh)
	f.start = append(f.start, int32(len(f.keys)))
}

// appendEmpty appends an empty frozenset (dask's shared _no_deps).
func (f *frozenSets) appendEmpty() {
	f.shape = append(f.shape, 3)
	f.start = append(f.start, int32(len(f.keys)))
}

func newFrozenSets(n, members int) frozenSets {
	f := frozenSets{
		start: make([]int32, 1, n+1),
		keys:  make([]int32, 0, members),
		pos:   make([]int32, 0, members),
		shape: make([]uint8, 0, n),
	}
	return f
}

// buildDependencies builds every node's dependencies frozenset the way
// Task.__init__ does: {first}, .add(each later one), frozenset(). The
// frozenset is a set_merge copy, which may move keys to a smaller table.
func buildDependencies(g *Graph, hs []uint64) frozenSets {
	total := 0
	for _, d := range g.Deps {
		total += len(d)
	}
	f := newFrozenSets(len(g.Keys), total)
	var b depsBuilder
	for i := range g.Keys {
		var deps []int32
		if i < len(g.Deps) {
			deps = g.Deps[i]
		}
		switch {
		case len(deps) == 0:
			f.appendEmpty()
		case len(deps) == 1: // one key in an 8-slot table, at its home slot
			f.keys = append(f.keys, deps[0])
			f.pos = append(f.pos, int32(hs[deps[0]]&(setMinSize-1)))
			f.shape = append(f.shape, 3)
			f.start = append(f.start, int32(len(f.keys)))
		default:
			frozen, _ := b.build(hs, deps, 0)
			f.appendSet(frozen)
		}
	}
	return f
}

// depsBuilder runs Task.__init__'s loop over a dependency program, with one
// pair of scratch sets per nesting level.
type depsBuilder struct {
	building, frozen []*pySet
}

// build returns the frozenset built from program (up to its matching
// DepsClose, if depth > 0) and the rest of the program.
func (b *depsBuilder) build(hs []uint64, program []int32, depth int) (*pySet, []int32) {
	for len(b.building) <= depth {
		building, frozen := newPySet(), newPySet()
		building.recycle, frozen.recycle = true, true
		b.building = append(b.building, building)
		b.frozen = append(b.frozen, frozen)
	}
	building := b.building[depth]
	building.clear()
	for len(program) > 0 {
		d := program[0]
		program = program[1:]
		switch d {
		case DepsClose:
			return b.freeze(hs, building, depth), program
		case DepsOpen: // a nested GraphNode: set(a.dependencies) or .update()
			var child *pySet
			child, program = b.build(hs, program, depth+1)
			building.mergeSet(hs, child) // into an empty set too: set(x) is a merge
		default:
			building.add(hs, d)
		}
	}
	return b.freeze(hs, building, depth), program
}

// freeze is frozenset(_dependencies) (empty, like _no_deps, when nothing
// was added).
func (b *depsBuilder) freeze(hs []uint64, building *pySet, depth int) *pySet {
	frozen := b.frozen[depth]
	frozen.clear()
	frozen.mergeSet(hs, building)
	return frozen
}

// reverseDict is dask.core.reverse_dict over the graph nodes: every node
// gets an entry (in the order it is first met: a node, then the
// dependencies it names), and each dependency's set receives its dependents
// by set.add in dsk order. It returns the dependents frozen as iteration
// order lists and the dict's key order; external keys appear in the latter,
// which is the order dask.order appends their DataNodes to dsk.
func reverseDict(g *Graph, hs []uint64, deps *frozenSets) (dependents adjacency, dictOrder []int32) {
	n := len(g.Keys)
	seen := make([]bool, n)
	dictOrder = make([]int32, 0, n)
	count := make([]int32, n+1)
	for i := 0; i < g.NumNodes; i++ {
		if !seen[i] {
			seen[i] = true
			dictOrder = append(dictOrder, int32(i))
		}
		for _, d := range deps.members(int32(i)) {
			if !seen[d] {
				seen[d] = true
				dictOrder = append(dictOrder, d)
			}
			count[d+1]++
		}
	}
	for i := 1; i <= n; i++ {
		count[i] += count[i-1]
	}
	dependents = adjacency{start: count, list: make([]int32, count[n])}
	fillAt := make([]int32, n)
	copy(fillAt, count[:n])
	for i := 0; i < g.NumNodes; i++ { // adds in dsk order
		for _, d := range deps.members(int32(i)) {
			dependents.list[fillAt[d]] = int32(i)
			fillAt[d]++
		}
	}
	// Replay each set's adds on a scratch table to learn its iteration order.
	s := newPySet()
	s.recycle = true
	for v := 0; v < n; v++ {
		lst := dependents.of(int32(v))
		if len(lst) < 2 {
			continue
		}
		s.clear()
		for _, k := range lst {
			s.add(hs, k)
		}
		s.appendTo(lst[:0])
	}
	return dependents, dictOrder
}

// adjacency is a CSR list per node, in set iteration order.
type adjacency struct {
	start []int32
	list  []int32
}

func (a *adjacency) of(i int32) []int32 {
	x, y := a.start[i], a.start[i+1]
	return a.list[x:y:y]
}
