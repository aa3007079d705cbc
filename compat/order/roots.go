package order

import (
	"math/big"
	"math/bits"
)

// ndependencies mirrors dask.order.ndependencies: num_needed (each node's
// dependency count, decremented as the order proceeds) and
// total_dependencies (1 + the sum over the dependencies, so counting paths,
// not nodes: it can pass 2**64 on lattice-like graphs, where Python's ints
// keep growing; then the totals are recomputed as big.Ints). The values do
// not depend on traversal order. It returns false when some node is never
// reached, i.e. the graph has a cycle.
func (o *orderer) ndependencies() bool {
	n := len(o.g.Keys)
	o.numNeeded = make([]int32, n)
	pending := make([]int32, n)
	o.total = make([]uint64, n)
	topo := make([]int32, 0, o.dskLen)
	stack := make([]int32, 0, 64)
	for _, k := range o.dskOrder {
		if !o.alive[k] {
			continue
		}
		c := int32(o.deps.size(k))
		o.numNeeded[k], pending[k] = c, c
		if c == 0 {
			stack = append(stack, k)
		}
	}
	overflow := false
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		topo = append(topo, k)
		t := uint64(1)
		for _, d := range o.deps.members(k) {
			var carry uint64
			t, carry = bits.Add64(t, o.total[d], 0)
			if carry != 0 || o.total[d] == 0 {
				overflow = true // a saturated (0) child propagates
				t = 0
				break
			}
		}
		o.total[k] = t
		for _, p := range o.dependents.of(k) {
			pending[p]--
			if pending[p] == 0 {
				stack = append(stack, p)
			}
		}
	}
	if overflow {
		o.totalBig = make([]*big.Int, n)
		for _, k := range topo {
			t := big.NewInt(1)
			for _, d := range o.deps.members(k) {
				t.Add(t, o.totalBig[d])
			}
			o.totalBig[k] = t
		}
	}
	return len(topo) == o.dskLen
}

// connectingToRoots mirrors dask.order._connecting_to_roots(dependencies,
// dependents): for every node, the frozenset of roots it is connected to
// (built in `sets`, ids in the returned slice; every root ends with the
// empty set), and, if maxDependents is not nil, max_dependents. Called with
// the two relations swapped it yields the leaves below each node.
//
// keys is the dependencies mapping's iteration order (dead entries skipped
// via alive). The traversal order and the child order matter: the first of
// several equal unions fixes the layout everyone shares, and a child whose
// set is the same object as an earlier child's is skipped entirely, also
// for max_dependents.
func connectingToRoots(keys []int32, alive []bool, deps, dependents func(int32) []int32,
	sets transitiveSets, maxDependents []int32) []int32 {
	n := len(alive)
	result := make([]int32, n)
	numNeeded := make([]int32, n)
	for i := range result {
		result[i] = -1
	}
	var current, roots, trans []int32
	for _, k := range keys {
		if alive[k] {
			numNeeded[k] = int32(len(deps(k)))
		}
	}
	for _, k := range keys {
		if !alive[k] || len(deps(k)) != 0 { // `if not v`, not num_needed
			continue
		}
		roots = append(roots, k)
		result[k] = sets.singleton(k)
		ds := dependents(k)
		if maxDependents != nil {
			maxDependents[k] = int32(len(ds))
		}
		for _, child := range ds {
			numNeeded[child]--
			if numNeeded[child] == 0 {
				current = append(current, child)
			}
		}
	}
	seen := newStamps()
	for len(current) > 0 {
		key := current[len(current)-1]
		current = current[:len(current)-1]
		if result[key] >= 0 {
			continue
		}
		for _, parent := range dependents(key) {
			numNeeded[parent]--
			if numNeeded[parent] == 0 {
				current = append(current, parent)
			}
		}
		trans = trans[:0]
		seen.next()
		best := int32(-1)
		for _, child := range deps(key) {
			r := result[child]
			if seen.marked(r) { // id(r_child) in transitive_deps_ids
				continue
			}
			seen.mark(r)
			trans = append(trans, r)
			if maxDependents != nil {
				best = max(best, maxDependents[child])
			}
		}
		if maxDependents != nil {
			maxDependents[key] = best
		}
		result[key] = connect(sets, trans)
	}
	empty := sets.empty()
	for _, r := range roots {
		result[r] = empty
	}
	return result
}

// connect picks the object for a node whose children's distinct objects are
// trans: the only one, the first if it holds all the others, else a union.
func connect(sets transitiveSets, trans []int32) int32 {
	if len(trans) == 1 {
		return trans[0]
	}
	d := trans[0]
	for _, t := range trans[1:] {
		if !sets.subset(t, d) {
			return sets.union(trans)
		}
	}
	return d
}

// stamps is a set of small ints cleared in O(1): an id is marked when its
// stamp equals the current generation.
type stamps struct {
	gen   int32
	stamp []int32
}

func newStamps() *stamps { return &stamps{} }

func (s *stamps) next() { s.gen++ }

func (s *stamps) marked(i int32) bool { return int(i) < len(s.stamp) && s.stamp[i] == s.gen }

func (s *stamps) mark(i int32) {
	for int(i) >= len(s.stamp) {
		s.stamp = append(s.stamp, make([]int32, len(s.stamp)+64)...)
	}
	s.stamp[i] = s.gen
}
