package order

import (
	"errors"
	"fmt"
	"math/big"
)

// Order returns the priority dask.order.order gives each graph node (index
// < g.NumNodes), exactly as CPython 3.11 with PYTHONHASHSEED=g.HashSeed
// computes it.
// A graph with a cycle returns a *CycleError naming one, as dask raises.
func Order(g *Graph) ([]int64, error) {
	if err := g.validate(); err != nil {
		return nil, err
	}
	if g.NumNodes == 0 {
		return []int64{}, nil
	}
	o, err := newOrderer(g)
	if err != nil {
		return nil, err
	}
	if err := o.prepare(); err != nil {
		return nil, err
	}
	if err := o.run(); err != nil {
		return nil, err
	}
	return o.prio[:g.NumNodes:g.NumNodes], nil
}

// errDaskWouldFail marks states in which dask.order itself raises (an
// empty min() or a failed assertion); none is known to be reachable.
var errDaskWouldFail = errors.New("order: dask.order would fail on this graph")

// orderer is the state of one dask.order.order call: its local variables
// and closures' nonlocals, over node ids. Python dicts keyed by node become
// node-indexed slices; sets whose iteration order is observable are pySets
// (with a []bool mirror where membership is hot), the others plain []bool.
type orderer struct {
	g  *Graph
	hs []uint64 // hash(key) per node

	// dsk and the DependenciesMapping over it.
	dskOrder    []int32 // graph nodes, then the external keys' DataNodes
	alive       []bool  // still in dsk
	dskLen      int
	expectedLen int
	isTask      []bool
	external    []bool // external_keys
	origDeps    frozenSets
	deps        frozenSets // dependencies[k] after the pre-pass
	removed     []bool     // DependenciesMapping._removed
	nRemoved    int
	liveDeps    []int32 // len(dependencies[k]) during the pre-pass

	// dependents (reverse_dict), in set order; depOrder is the dict's order.
	dependents     adjacency
	depOrder       []int32
	liveDependents []int32 // len(dependents[k]) during the pre-pass

	leafNodes, rootNodes *pySet
	isLeaf, isRoot       []bool
	requiresDataTask     map[int32]*pySet // requires_data_task, sparse

	// result
	prio      []int64
	inResult  []bool
	resultLen int
	i         int64

	// sort_key parts
	numNeeded      []int32
	total          []uint64
	totalBig       []*big.Int // only when a total passes 2**64
	rootsConnected *sortedSets
	rootsOf        []int32
	leafsConnected *tableSets
	leafsOf        []int32
	maxDependents  []int32
	nroots         []int32 // len(roots_connected[k])
	sortBuf        []int32
	texts          keyTexts // str() of every key, rendered on first use

	// the ordering loop
	runnableHull    []bool
	reachableHull   *pySet
	runnable        []int32
	known           knownPaths
	leafsDegree     []int32
	leafsPerDegree  []int32 // leafs_per_degree: 1 + index in sets, 0 when absent
	sets            setSlab
	minLeafDegree   int
	maxLeafDegree   int
	leafNodesSorted []int32
	criticalPath    []int32

	scratchSet  pySet
	scratchList []int32
	candidates  pySet
	// reused buffers of the walk
	nextDeps, walkDeps, unknownDeps, knownDeps, splitDeps []int32
}

func newOrderer(g *Graph) (*orderer, error) {
	n := len(g.Keys)
	o := &orderer{
		g:        g,
		hs:       make([]uint64, n),
		alive:    make([]bool, n),
		isTask:   make([]bool, n),
		external: make([]bool, n),
		removed:  make([]bool, n),
		prio:     make([]int64, n),
		inResult: make([]bool, n),
	}
	o.sets.sizeFor(n)
	kh := keyHasher{secret: SecretForSeed(g.HashSeed)}
	for i, k := range g.Keys {
		h, err := kh.hash(k)
		if err != nil {
			return nil, err
		}
		o.hs[i] = h
	}
	copy(o.isTask, g.IsTask[:g.NumNodes])
	o.origDeps = buildDependencies(g, o.hs)
	o.dependents, o.depOrder = reverseDict(g, o.hs, &o.origDeps)
	o.dskOrder = make([]int32, 0, n)
	for i := 0; i < g.NumNodes; i++ {
		o.dskOrder = append(o.dskOrder, int32(i))
		o.alive[i] = true
	}
	for _, k := range o.depOrder { // `for k in dependents: if k not in dependencies`
		if int(k) >= g.NumNodes {
			o.dskOrder = append(o.dskOrder, k)
			o.alive[k] = true
			o.external[k] = true
		}
	}
	o.dskLen = len(o.dskOrder)
	o.expectedLen = o.dskLen
	o.scratchSet.recycle, o.candidates.recycle = true, true
	o.scratchSet.clear()
	o.candidates.clear()
	return o, nil
}

// prepare runs everything before the core loop: the leaf and root sets, the
// pre-pass, ndependencies (and the cycle check), _connecting_to_roots both
// ways, the leaf degrees and the strategy choice.
func (o *orderer) prepare() error {
	n := len(o.g.Keys)
	o.liveDeps = make([]int32, n)
	o.liveDependents = make([]int32, n)
	o.isLeaf = make([]bool, n)
	o.isRoot = make([]bool, n)
	o.leafNodes, o.rootNodes = newPySet(), newPySet()
	for _, k := range o.depOrder { // {k for k, v in dependents.items() if not v}
		o.liveDependents[k] = int32(len(o.dependents.of(k)))
		if o.liveDependents[k] == 0 {
			o.leafNodes.add(o.hs, k)
			o.isLeaf[k] = true
		}
	}
	for _, k := range o.dskOrder { // {k for k, v in dependencies.items() if not v}
		o.liveDeps[k] = int32(o.origDeps.size(k))
		if o.liveDeps[k] == 0 {
			o.rootNodes.add(o.hs, k)
			o.isRoot[k] = true
		}
	}
	o.prepass()
	o.finishPrepass()
	if !o.ndependencies() {
		return o.cycleError()
	}
	o.maxDependents = make([]int32, n)
	o.rootsConnected = newSortedSets(n)
	o.rootsOf = connectingToRoots(o.dskOrder, o.alive, o.deps.members, o.dependents.of,
		o.rootsConnected, o.maxDependents)
	o.nroots = make([]int32, n)
	for k, obj := range o.rootsOf {
		if obj >= 0 {
			o.nroots[k] = int32(o.rootsConnected.size(obj))
		}
	}
	o.leafsConnected = newTableSets(o.hs)
	o.leafsOf = connectingToRoots(o.depOrder, o.alive, o.dependents.of, o.deps.members,
		o.leafsConnected, nil)
	o.runnableHull = make([]bool, n)
	o.reachableHull = newPySet()
	o.known = newKnownPaths(n)
	o.initLeafDegrees()
	o.leafNodesSorted = o.leafNodes.appendTo(nil)
	o.sortByKey(o.leafNodesSorted, !o.useLongestPath())
	return nil
}

// initLeafDegrees fills leafs_degree and leafs_per_degree from
// `leaf_nodes - root_nodes`, whose iteration order shapes the tables.
func (o *orderer) initLeafDegrees() {
	o.leafsDegree = make([]int32, len(o.g.Keys))
	for i := range o.leafsDegree {
		o.leafsDegree[i] = -1
	}
	o.leafsPerDegree = make([]int32, o.dskLen+1)
	o.minLeafDegree, o.maxLeafDegree = o.dskLen, o.dskLen
	difference(o.hs, &o.scratchSet, o.leafNodes.view(), o.isRoot, o.rootNodes.len())
	for _, leaf := range o.scratchSet.appendTo(o.scratchList[:0]) {
		degree := int(o.nroots[leaf])
		o.minLeafDegree = min(o.minLeafDegree, degree)
		o.maxLeafDegree = max(o.maxLeafDegree, degree)
		o.leafsDegree[leaf] = int32(degree)
		o.perDegree(degree).add(o.hs, leaf)
	}
}

// perDegree is leafs_per_degree[d] (a defaultdict(set)).
func (o *orderer) perDegree(d int) *pySet {
	if o.leafsPerDegree[d] == 0 {
		o.leafsPerDegree[d] = o.sets.alloc() + 1
	}
	return o.sets.get(o.leafsPerDegree[d] - 1)
}

// hasLeafsAt is `d in leafs_per_degree and leafs_per_degree[d]`.
func (o *orderer) hasLeafsAt(d int) bool {
	return o.leafsPerDegree[d] != 0 && o.sets.get(o.leafsPerDegree[d]-1).len() > 0
}

// useLongestPath mirrors use_longest_path. The first root whose leaf count
// is zero does not fix `size` (`if not size`), so the root iteration order
// matters when some roots are also leaves.
func (o *orderer) useLongestPath() bool {
	nRoots := o.rootNodes.len()
	diff := nRoots - o.leafNodes.len()
	if diff < 0 {
		diff = -diff
	}
	if float64(diff)/float64(nRoots) < 0.8 {
		size := 0
		for _, r := range o.rootNodes.slots {
			if r < 0 {
				continue
			}
			l := o.leafsConnected.size(o.leafsOf[r])
			if size == 0 {
				size = l
			} else if size != l {
				return false
			}
		}
	}
	return true
}

// setResult is result[k] = prio.
func (o *orderer) setResult(k int32, prio int64) {
	o.prio[k] = prio
	o.inResult[k] = true
	o.resultLen++
}

// getTarget mirrors get_target: a leaf reachable from what is already in
// the result and needing the fewest new roots, else the next leaf of the
// initial sort.
func (o *orderer) getTarget() (int32, error) {
	allLeafsAccessible := o.minLeafDegree == o.maxLeafDegree
	if o.reachableHull.len() == 0 || allLeafsAccessible {
		if len(o.leafNodesSorted) == 0 {
			return 0, fmt.Errorf("%w: pop from an empty leaf list", errDaskWouldFail)
		}
		t := o.leafNodesSorted[len(o.leafNodesSorted)-1]
		o.leafNodesSorted = o.leafNodesSorted[:len(o.leafNodesSorted)-1]
		return t, nil
	}
	perDegree := o.perDegree(o.minLeafDegree)
	intersection(o.hs, &o.candidates, o.reachableHull, perDegree)
	candidates := &o.candidates
	if candidates.len() == 0 {
		candidates = perDegree
	}
	if candidates.len() == 0 {
		return 0, fmt.Errorf("%w: min() of no candidates", errDaskWouldFail)
	}
	o.scratchList = candidates.appendTo(o.scratchList[:0])
	return o.minByKey(o.scratchList), nil
}

// run is the core loop: build a critical path from a target back to a
// runnable root, then walk it, adding what becomes runnable.
func (o *orderer) run() error {
	for o.resultLen < o.expectedLen {
		target, err := o.getTarget()
		if err != nil {
			return err
		}
		o.buildCriticalPath(target)
		if err := o.walkCriticalPath(); err != nil {
			return err
		}
		if err := o.processRunnables(); err != nil {
			return err
		}
	}
	for k, ext := range o.external { // `del result[k]` for external keys
		if ext {
			o.prio[k] = 0
		}
	}
	return nil
}

// buildCriticalPath is step A: from the target, repeatedly step to the
// most valuable dependency (max by sort_key), pushing the others not yet
// in the result too.
func (o *orderer) buildCriticalPath(target int32) {
	next := append(o.nextDeps[:0], o.deps.members(target)...)
	o.criticalPath = append(o.criticalPath, target)
	for len(next) > 0 {
		item := o.maxByKey(next)
		o.criticalPath = append(o.criticalPath, item)
		next = o.depsNotInResult(item, next[:0])
		o.criticalPath = append(o.criticalPath, next...)
	}
	o.nextDeps = next
}

// walkCriticalPath is step B: pop the path; a node still waiting for
// dependencies goes back with them on top (known runnable paths first
// reversed, then the unknown ones in sort_key order), a runnable one is
// added to the result, possibly after the runnable tasks once the walk had
// to load more than one new branch.
func (o *orderer) walkCriticalPath() error {
	walkedBack := false
	for len(o.criticalPath) > 0 {
		item := o.criticalPath[len(o.criticalPath)-1]
		o.criticalPath = o.criticalPath[:len(o.criticalPath)-1]
		if o.inResult[item] {
			continue
		}
		if o.numNeeded[item] != 0 {
			o.criticalPath = append(o.criticalPath, item)
			if o.walkBack(item) {
				walkedBack = true
			}
			continue
		}
		if walkedBack && len(o.runnable) < len(o.criticalPath) {
			if err := o.processRunnables(); err != nil {
				return err
			}
		}
		if err := o.addToResult(item); err != nil {
			return err
		}
	}
	return nil
}

// walkBack pushes item's missing dependencies onto the critical path and
// reports whether more than one of them has no known runnable path.
func (o *orderer) walkBack(item int32) bool {
	deps := o.depsNotInResult(item, o.walkDeps[:0])
	o.sortByKey(deps, false)
	unknown, known := o.unknownDeps[:0], o.knownDeps[:0]
	for _, d := range deps {
		if o.known.has(d) {
			known = append(known, d)
		} else {
			unknown = append(unknown, d)
		}
	}
	o.criticalPath = append(o.criticalPath, unknown...)
	for _, d := range known {
		for _, path := range o.known.pop(d) {
			for j := len(path) - 1; j >= 0; j-- { // reversed(path)
				o.criticalPath = append(o.criticalPath, path[j])
			}
		}
	}
	o.walkDeps, o.unknownDeps, o.knownDeps = deps, unknown, known
	return len(unknown) > 1
}

// depsNotInResult is dependencies[k].difference(result), appended to dst in
// iteration order.
func (o *orderer) depsNotInResult(k int32, dst []int32) []int32 {
	difference(o.hs, &o.scratchSet, o.deps.view(k), o.inResult, o.resultLen)
	return o.scratchSet.appendTo(dst)
}
