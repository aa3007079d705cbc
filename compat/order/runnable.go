package order

import "fmt"

// addToResult mirrors add_to_result: give item (and whatever it makes
// runnable along a linear chain) the next priority, after the data nodes it
// requires; update the leaf degrees when a root is added.
func (o *orderer) addToResult(item int32) error {
	nextItems := []int32{item}
	for len(nextItems) > 0 {
		item := nextItems[len(nextItems)-1]
		nextItems = nextItems[:len(nextItems)-1]
		o.runnableHull[item] = false
		o.reachableHull.discard(o.hs, item)
		if o.isLeaf[item] {
			o.leafNodes.discard(o.hs, item)
			o.isLeaf[item] = false
		}
		if o.inResult[item] {
			continue
		}
		if rd := o.requiresDataTask[item]; rd != nil {
			for rd.len() > 0 {
				if err := o.addToResult(rd.pop()); err != nil {
					return err
				}
			}
		}
		o.setResult(item, o.i)
		if !o.external[item] {
			o.i++
		}
		if o.isRoot[item] {
			if err := o.rootAdded(item); err != nil {
				return err
			}
		}
		dependents := o.dependents.of(item)
		for _, dep := range dependents {
			o.numNeeded[dep]--
			o.reachableHull.add(o.hs, dep)
			if o.numNeeded[dep] == 0 {
				if len(dependents) == 1 {
					nextItems = append(nextItems, dep)
				} else {
					o.runnable = append(o.runnable, dep)
				}
			}
		}
	}
	return nil
}

// rootAdded lowers the degree of every leaf the root leads to, in the
// iteration order of leafs_connected[root].
func (o *orderer) rootAdded(root int32) error {
	o.scratchList = o.leafsConnected.appendMembers(o.scratchList[:0], o.leafsOf[root])
	for _, leaf := range o.scratchList {
		if !o.isLeaf[leaf] {
			continue
		}
		degree := int(o.leafsDegree[leaf]) // leafs_degree.pop(leaf)
		if degree < 0 {
			return fmt.Errorf("%w: leafs_degree has no leaf %s", errDaskWouldFail, o.g.Keys[leaf])
		}
		o.leafsDegree[leaf] = -1
		o.perDegree(degree).discard(o.hs, leaf)
		newDegree := degree - 1
		if newDegree > 0 {
			o.minLeafDegree = min(o.minLeafDegree, newDegree)
			o.perDegree(newDegree).add(o.hs, leaf)
			o.leafsDegree[leaf] = int32(newDegree)
		} else if !o.hasLeafsAt(degree) {
			if degree != o.minLeafDegree {
				return fmt.Errorf("%w: assert degree == min_leaf_degree", errDaskWouldFail)
			}
			for o.minLeafDegree != o.maxLeafDegree && !o.hasLeafsAt(o.minLeafDegree) {
				o.minLeafDegree++
			}
		}
	}
	return nil
}

// processRunnables mirrors process_runnables: walk forward from each
// runnable task until a reducer, remembering the paths that end there
// (known runnable paths), and run a path once it leads to a leaf or its
// reducer has all its inputs available.
func (o *orderer) processRunnables() error {
	var candidates []int32
	for len(o.runnable) > 0 {
		candidates = append(candidates[:0], o.runnable...)
		o.runnable = o.runnable[:0]
		for len(candidates) > 0 {
			key := candidates[len(candidates)-1]
			candidates = candidates[:len(candidates)-1]
			if o.runnableHull[key] || o.inResult[key] {
				continue
			}
			if o.isLeaf[key] {
				if err := o.addToResult(key); err != nil {
					return err
				}
				continue
			}
			if err := o.walkBranches(key); err != nil {
				return err
			}
		}
	}
	return nil
}

// branch is one (nsplits, path) entry of the branches deque.
type branch struct {
	nsplits int
	path    []int32
}

// walkBranches is the body of process_runnables for one runnable key.
func (o *orderer) walkBranches(key int32) error {
	branches := []branch{{0, []int32{key}}} // a deque: popped from the front
	for len(branches) > 0 {
		nsplits, path := branches[0].nsplits, branches[0].path
		branches = branches[1:]
		for {
			current := path[len(path)-1]
			o.runnableHull[current] = true
			downstream := o.dependents.of(current)
			upstream := o.deps.size(current)
			if len(downstream) == 0 {
				if o.numNeeded[current] <= 1 {
					if err := o.addAll(path); err != nil {
						return err
					}
				} else {
					o.runnableHull[current] = false
				}
			} else if len(path) == 1 || upstream == 1 {
				if len(downstream) > 1 {
					nsplits++
					sorted := append(o.splitDeps[:0], downstream...)
					o.sortByKey(sorted, false)
					o.splitDeps = sorted
					for _, d := range sorted {
						if o.deps.size(d) == 1 { // a genuine split, not an interleave
							b := make([]int32, len(path)+1)
							copy(b, path)
							b[len(path)] = d
							branches = append(branches, branch{nsplits, b})
						}
					}
					break
				}
				path = append(path, downstream...)
				continue
			} else if o.known.has(current) {
				more, err := o.joinKnown(current, path, nsplits)
				if err != nil {
					return err
				}
				if more != nil {
					branches = append(branches, *more)
				}
			} else if upstream > 1 && o.numNeeded[current] <= 1 {
				if err := o.addAll(path); err != nil {
					return err
				}
			} else {
				o.known.set(current, [][]int32{path})
				o.runnableHull[current] = false
			}
			break
		}
	}
	return nil
}

// joinKnown handles a path reaching a reducer that already has known paths:
// record it, and once enough paths are there, either merge them into one
// branch (after several splits) or run them. It returns a new branch to
// queue, if any.
func (o *orderer) joinKnown(current int32, path []int32, nsplits int) (*branch, error) {
	o.known.add(current, path)
	o.runnableHull[current] = false
	if len(o.known.get(current)) < int(o.numNeeded[current]) {
		return nil, nil
	}
	var pruned [][]int32 // a deque: popped from the front
	for _, p := range o.known.pop(current) {
		if !o.inResult[p[len(p)-2]] {
			pruned = append(pruned, p)
		}
	}
	if len(pruned) < int(o.numNeeded[current]) {
		o.known.set(current, pruned)
		return nil, nil
	}
	if nsplits > 1 {
		var joined []int32
		for _, p := range pruned {
			joined = append(joined, p...)
		}
		return &branch{nsplits - 1, joined}, nil
	}
	for len(pruned) > 0 {
		p := pruned[0]
		pruned = pruned[1:]
		for _, k := range p {
			if o.numNeeded[k] != 0 {
				pruned = append(pruned, p)
				break
			}
			if err := o.addToResult(k); err != nil {
				return nil, err
			}
		}
	}
	return nil, nil
}

func (o *orderer) addAll(path []int32) error {
	for _, k := range path {
		if err := o.addToResult(k); err != nil {
			return err
		}
	}
	return nil
}

// knownPaths is known_runnable_paths: node -> list of paths, with
// presence distinct from an empty list. Entries index a pool reused through
// a free list, so no per-node map is needed.
type knownPaths struct {
	slot  []int32 // per node: index into paths, or -1
	paths [][][]int32
	free  []int32
}

func newKnownPaths(n int) knownPaths {
	k := knownPaths{slot: make([]int32, n)}
	for i := range k.slot {
		k.slot[i] = -1
	}
	return k
}

func (k *knownPaths) has(node int32) bool { return k.slot[node] >= 0 }

func (k *knownPaths) get(node int32) [][]int32 { return k.paths[k.slot[node]] }

func (k *knownPaths) set(node int32, paths [][]int32) {
	if s := k.slot[node]; s >= 0 {
		k.paths[s] = paths
		return
	}
	if n := len(k.free); n > 0 {
		s := k.free[n-1]
		k.free = k.free[:n-1]
		k.paths[s] = paths
		k.slot[node] = s
		return
	}
	k.paths = append(k.paths, paths)
	k.slot[node] = int32(len(k.paths) - 1)
}

func (k *knownPaths) add(node int32, path []int32) {
	s := k.slot[node]
	k.paths[s] = append(k.paths[s], path)
}

// pop is known_runnable_paths.pop(node).
func (k *knownPaths) pop(node int32) [][]int32 {
	s := k.slot[node]
	paths := k.paths[s]
	k.paths[s] = nil
	k.slot[node] = -1
	k.free = append(k.free, s)
	return paths
}
