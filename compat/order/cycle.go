package order

import (
	"fmt"
	"strings"

	"daskgo/protocol"
)

// CycleError is the RuntimeError dask.order raises for a graph that is not
// a DAG; Keys is the cycle dask.core.getcycle reports, first key repeated
// last, and Error() is dask's message word for word.
type CycleError struct {
	Keys []protocol.Key
}

func (e *CycleError) Error() string {
	parts := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		parts[i] = string(appendKeyStr(nil, string(k)))
	}
	return "Cycle detected between the following keys:\n  -> " + strings.Join(parts, "\n  -> ")
}

// cycleError mirrors getcycle(dsk, None) on the dsk left after the
// pre-pass: a depth-first search in dsk order over the keys' own
// dependency sets (a fresh DependenciesMapping, so removed keys are still
// named), then dask's greedy walk back along the cycle. When the search
// steps onto a key the pre-pass removed, dask fails with a KeyError instead;
// that case is reported as a plain error.
func (o *orderer) cycleError() error {
	n := len(o.g.Keys)
	completed, seen := make([]bool, n), make([]bool, n)
	var next []int32
	for _, key := range o.dskOrder {
		if !o.alive[key] || completed[key] {
			continue
		}
		nodes := []int32{key}
		for len(nodes) > 0 {
			cur := nodes[len(nodes)-1]
			if completed[cur] {
				nodes = nodes[:len(nodes)-1]
				continue
			}
			if !o.alive[cur] {
				return o.keyError(cur)
			}
			seen[cur] = true
			next = next[:0]
			for _, nxt := range o.origDeps.members(cur) {
				if completed[nxt] {
					continue
				}
				if seen[nxt] {
					cycle, dead := o.walkCycle(nodes, nxt)
					if dead >= 0 {
						return o.keyError(dead)
					}
					return &CycleError{Keys: o.cycleKeys(cycle)}
				}
				next = append(next, nxt)
			}
			if len(next) > 0 {
				nodes = append(nodes, next...)
			} else {
				completed[cur], seen[cur] = true, false
				nodes = nodes[:len(nodes)-1]
			}
		}
	}
	return &CycleError{}
}

// keyError stands for the KeyError dask raises when its cycle search reads
// the dependencies of a key the pre-pass removed from dsk.
func (o *orderer) keyError(k int32) error {
	return fmt.Errorf("order: the graph has a cycle (dask.order raises KeyError(%s) while looking for it)", o.g.Keys[k])
}

func (o *orderer) cycleKeys(ids []int32) []protocol.Key {
	keys := make([]protocol.Key, len(ids))
	for i, k := range ids {
		keys[i] = o.g.Keys[k]
	}
	return keys
}

// walkCycle is getcycle's report once nxt is met again: rank the stack's
// top down to nxt, then walk from nxt back along dependents restricted to
// those nodes, always to the best-ranked one. Ranks can tie (a node on the
// stack twice is ranked again), so the dependents sets are built exactly as
// reverse_dict builds them and min() sees them in CPython's order. A ranked
// key the pre-pass removed makes dask fail with a KeyError: it is returned
// as dead (else dead is -1).
func (o *orderer) walkCycle(nodes []int32, nxt int32) (cycle []int32, dead int32) {
	hs := o.hs
	prio := map[int32]int{}
	var prioOrder []int32 // the priorities dict's key order
	rank := func(k int32) {
		v := -len(prio)
		if _, ok := prio[k]; !ok {
			prioOrder = append(prioOrder, k)
		}
		prio[k] = v
	}
	prev := nodes[len(nodes)-1]
	for nodes[len(nodes)-1] != nxt {
		rank(nodes[len(nodes)-1])
		nodes = nodes[:len(nodes)-1]
	}
	rank(nxt)
	// inplay = set(priorities): set_update_internal's dict branch.
	inplay := newPySet()
	if len(prioOrder)*5 >= inplay.mask()*3 {
		inplay.resize(hs, len(prioOrder)*2)
	}
	for _, k := range prioOrder {
		inplay.add(hs, k)
	}
	// reverse_dict({k: inplay.intersection(dependencies[k]) for k in inplay})
	dependents := map[int32]*pySet{}
	get := func(k int32) *pySet {
		if dependents[k] == nil {
			dependents[k] = newPySet()
		}
		return dependents[k]
	}
	inter := newPySet()
	for _, k := range inplay.appendTo(nil) {
		if !o.alive[k] {
			return nil, k
		}
		deps := o.origDepsTable(k)
		intersection(hs, inter, inplay, deps)
		get(k)
		for _, v := range inter.appendTo(nil) {
			get(v).add(hs, k)
		}
	}
	cycle = []int32{nxt, prev}
	for prev != cycle[0] && len(cycle) <= len(o.g.Keys)+1 {
		cands := get(cycle[len(cycle)-1]).appendTo(nil)
		if len(cands) == 0 {
			break
		}
		prev = cands[0]
		for _, c := range cands[1:] {
			if prio[c] < prio[prev] {
				prev = c
			}
		}
		cycle = append(cycle, prev)
	}
	for i, j := 0, len(cycle)-1; i < j; i, j = i+1, j-1 {
		cycle[i], cycle[j] = cycle[j], cycle[i]
	}
	return cycle, -1
}

// origDepsTable rebuilds node k's dependencies frozenset as a table; the
// originals never hold dummies, so positions are all it takes.
func (o *orderer) origDepsTable(k int32) *pySet {
	v := o.origDeps.view(k)
	s := &pySet{slots: make([]int32, v.mask+1), fill: len(v.keys), used: len(v.keys)}
	for i := range s.slots {
		s.slots[i] = slotEmpty
	}
	for i, key := range v.keys {
		s.slots[v.pos[i]] = key
	}
	return s
}
