package order

// The normalization pass at the top of dask.order.order: leaves that are
// not tasks but gather several keys get the last priorities and leave the
// graph; roots that are not tasks (DataNodes) with several dependents leave
// it too, and are ordered right before the first of their dependents to run
// (requires_data_task).
//
// Removal goes through DependenciesMapping.__delitem__, which has a side
// effect dask.order's output depends on: once anything is removed, every
// dependencies[x] is recomputed as `deps - self._removed`, a new frozenset
// whose layout may differ from the original even when nothing was removed
// from it (set_difference rebuilds the table). currentDeps reproduces that
// value at any point of the pass; effectiveDependencies freezes it for all
// nodes once the pass is over, as later reads all see the final _removed.

// prepass runs the `while not all_tasks` loop.
func (o *orderer) prepass() {
	nRemovedLeaves := 0
	var snapshot []int32
	for allTasks := false; !allTasks; {
		allTasks = true
		snapshot = o.leafNodes.appendTo(snapshot[:0]) // list(leaf_nodes)
		for _, leaf := range snapshot {
			if o.isRoot[leaf] || o.isTask[leaf] || o.liveDeps[leaf] <= 1 {
				continue
			}
			allTasks = false
			o.setResult(leaf, int64(o.dskLen-1-nRemovedLeaves))
			nRemovedLeaves++
			o.leafNodes.discard(o.hs, leaf)
			o.isLeaf[leaf] = false
			for _, dep := range o.currentDeps(leaf) {
				o.liveDependents[dep]-- // dependents[dep].remove(leaf)
				if o.liveDependents[dep] == 0 {
					o.leafNodes.add(o.hs, dep)
					o.isLeaf[dep] = true
				}
			}
			o.removeNode(leaf)
		}
		snapshot = o.rootNodes.appendTo(snapshot[:0]) // list(root_nodes)
		for _, root := range snapshot {
			if o.isLeaf[root] || o.isTask[root] || o.liveDependents[root] <= 1 {
				continue
			}
			o.removeNode(root)
			o.rootNodes.discard(o.hs, root)
			o.isRoot[root] = false
			for _, dep := range o.dependents.of(root) {
				if !o.alive[dep] { // removed from dependents[root] earlier
					continue
				}
				o.requiresData(dep).add(o.hs, root)
				o.liveDeps[dep]--
				if o.liveDeps[dep] == 0 { // not dependencies[dep]
					o.rootNodes.add(o.hs, dep)
					o.isRoot[dep] = true
				}
			}
		}
	}
}

// removeNode is `del dsk[k]; del dependencies[k]; del dependents[k]`.
func (o *orderer) removeNode(k int32) {
	o.alive[k] = false
	o.dskLen--
	o.removed[k] = true
	o.nRemoved++
}

// requiresData is requires_data_task[k] (a defaultdict(set)).
func (o *orderer) requiresData(k int32) *pySet {
	if o.requiresDataTask == nil {
		o.requiresDataTask = map[int32]*pySet{}
	}
	s := o.requiresDataTask[k]
	if s == nil {
		s = newPySet()
		o.requiresDataTask[k] = s
	}
	return s
}

// currentDeps is dependencies[k] at this point of the pre-pass, in
// iteration order (valid until the next call).
func (o *orderer) currentDeps(k int32) []int32 {
	if o.nRemoved == 0 {
		return o.origDeps.members(k)
	}
	difference(o.hs, &o.scratchSet, o.origDeps.view(k), o.removed, o.nRemoved)
	o.scratchList = o.scratchSet.appendTo(o.scratchList[:0])
	return o.scratchList
}

// finishPrepass fixes every live node's dependencies to their final value
// and drops removed nodes from the dependents lists.
func (o *orderer) finishPrepass() {
	if o.nRemoved == 0 {
		o.deps = o.origDeps
		return
	}
	n := len(o.g.Keys)
	members := 0
	for k := 0; k < n; k++ {
		if o.alive[k] {
			members += int(o.liveDeps[k])
		}
	}
	deps := newFrozenSets(n, members)
	for k := int32(0); int(k) < n; k++ {
		if !o.alive[k] {
			deps.appendEmpty()
			continue
		}
		difference(o.hs, &o.scratchSet, o.origDeps.view(k), o.removed, o.nRemoved)
		deps.appendSet(&o.scratchSet)
	}
	o.deps = deps
	// Compact dependents in place: removals never reorder a set's survivors.
	w := int32(0)
	start := o.dependents.start
	from := start[0]
	for k := 0; k < n; k++ {
		to := start[k+1]
		start[k] = w
		if o.alive[k] {
			for _, d := range o.dependents.list[from:to] {
				if o.alive[d] {
					o.dependents.list[w] = d
					w++
				}
			}
		}
		from = to
	}
	start[n] = w
	o.dependents.list = o.dependents.list[:w]
}
