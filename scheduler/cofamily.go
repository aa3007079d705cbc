package scheduler

// Families: which pooled roots feed the same reductions (WITHHOLDING.md,
// "Families"). coPartition used to cut the pool into one contiguous range
// of priorities per worker. That keeps siblings together when dask.order
// numbers them consecutively (basic-sum, vorticity), but a combine whose
// inputs are far apart in priority (anom-mean's time-axis combines, about
// 100 priorities apart at full size) then waits on a run that another
// worker walks at its own pace, and each of the w fronts holds its own
// window of half-combined data: w times what withholding's single front
// holds. Families put those inputs on one worker, and dealing families in
// priority order (not cutting ranges) makes every worker walk the whole
// priority range at the cluster's pace, as withholding does.
//
// A family is the union of roots that reach a common task within
// CoFamilyDepth levels of dependents, nearer joins first, never larger than
// one worker's share of the pool. Consecutive families (by their most urgent
// root) are packed into parcels of at least limit/coParcelDiv roots; a
// parcel becomes one run, in priority order, dealt to the least loaded
// worker per thread. Cost: O(u × depth × coFamilyFrontier) for u pooled
// roots (map operations), O(parcels × log workers) for the deal; each
// scheduling decision afterwards is unchanged (coNext).

const (
	// coFamilyFanout: a task with more dependents than this is a shared
	// input (a lookup table, an index), not part of a reduction; joining
	// through it would make every root one family, so it is not followed.
	coFamilyFanout = 32
	// coFamilyFrontier bounds the tasks followed per root and level.
	coFamilyFrontier = 32
	// coParcelDiv: a parcel holds at least limit/coParcelDiv roots, so a
	// partition makes O(workers × coParcelDiv) runs however small the
	// families are. Smaller parcels spread each worker's roots more evenly
	// over the priority range (less memory held for far-apart inputs) but
	// cut reductions of small families more often (more transfers): in the
	// simulator at benchmark scale, 8 instead of 2 took climactic-mean from
	// 0.52 to 0.44 GiB but a 50,000-root binary tree on 20 workers from 3.4
	// to 5.2 GiB moved; 2 keeps anom-mean, dot-product and dataframe-align
	// at their gains (1.02, 1.66, 0.20 GiB against ranges' 1.16, 2.55, 0.52).
	coParcelDiv = 2
	// defaultCoFamilyDepth: anom-mean's random → mean_chunk → combine, with
	// a getitem between, needs 3; basic-sum's combine tree needs 4 to reach
	// a worker's share (with 3 its families are a quarter of that, and the
	// simulated run moves 6× more). Deeper joins only merge families that
	// are at the limit already.
	defaultCoFamilyDepth = 4
)

// maxCoFamilyDepth bounds the partition's cost (linear in the depth);
// deeper joins only merge families that are at the limit already.
const maxCoFamilyDepth = 16

// coFamilyDepth is the configured depth; 0 means the default, negative
// turns families off (contiguous priority runs).
func (s *State) coFamilyDepth() int {
	if d := s.cfg.CoFamilyDepth; d != 0 {
		return min(d, maxCoFamilyDepth)
	}
	return defaultCoFamilyDepth
}

// unionFind over pooled roots by their index in priority order, with a
// size limit: a union that would exceed it is refused.
type unionFind struct {
	parent, size []int32
	limit        int32
}

func newUnionFind(n, limit int) *unionFind {
	u := &unionFind{parent: make([]int32, n), size: make([]int32, n), limit: int32(limit)}
	for i := range u.parent {
		u.parent[i], u.size[i] = int32(i), 1
	}
	return u
}

func (u *unionFind) find(i int32) int32 {
	for u.parent[i] != i {
		u.parent[i] = u.parent[u.parent[i]]
		i = u.parent[i]
	}
	return i
}

func (u *unionFind) union(a, b int32) {
	ra, rb := u.find(a), u.find(b)
	if ra == rb || u.size[ra]+u.size[rb] > u.limit {
		return
	}
	if u.size[ra] < u.size[rb] {
		ra, rb = rb, ra
	}
	u.parent[rb] = ra
	u.size[ra] += u.size[rb]
}

// coFamilies unions the roots p (in priority order) that share a task
// within depth levels of dependents, nearest level first and, within a
// level, in priority order, so that a family refused at the limit leaves
// its neighbours to the next family rather than scattering them.
func coFamilies(p []*TaskState, depth, limit int) *unionFind {
	uf := newUnionFind(len(p), limit)
	// the frontier of root i is front[off[i]:off[i+1]]
	var front, next []*TaskState
	off := make([]int32, len(p)+1)
	nextOff := make([]int32, len(p)+1)
	for i, ts := range p {
		off[i] = int32(len(front))
		front = appendDependents(front, ts, off[i])
	}
	off[len(p)] = int32(len(front))
	for level := 1; level <= depth && len(front) > 0; level++ {
		seen := make(map[*TaskState]int32, len(front))
		for i := range p {
			for _, j := range front[off[i]:off[i+1]] {
				if a, ok := seen[j]; ok {
					uf.union(a, int32(i))
				} else {
					seen[j] = int32(i)
				}
			}
		}
		if level == depth {
			break
		}
		next = next[:0]
		for i := range p {
			nextOff[i] = int32(len(next))
			for _, j := range front[off[i]:off[i+1]] {
				next = appendDependents(next, j, nextOff[i])
			}
		}
		nextOff[len(p)] = int32(len(next))
		front, next = next, front
		off, nextOff = nextOff, off
	}
	return uf
}

// appendDependents appends ts's dependents to dst unless ts is a shared
// input (more than coFamilyFanout dependents), skipping those already in
// dst[from:] and stopping at coFamilyFrontier entries since from.
func appendDependents(dst []*TaskState, ts *TaskState, from int32) []*TaskState {
	deps := ts.dependents.Items()
	if len(deps) > coFamilyFanout {
		return dst
	}
outer:
	for _, d := range deps {
		if len(dst)-int(from) >= coFamilyFrontier {
			return dst
		}
		for _, x := range dst[from:] {
			if x == d {
				continue outer
			}
		}
		dst = append(dst, d)
	}
	return dst
}

// coParcels lays the roots p (in priority order) out family by family and
// packs consecutive families, ordered by their most urgent root, into
// parcels of at least minParcel roots. It returns the block, in which each
// parcel is contiguous and in priority order, and the parcels' start
// indexes followed by len(p). O(u α(u)).
func coParcels(p []*TaskState, uf *unionFind, minParcel int) ([]*TaskState, []int) {
	n := len(p)
	parcelOf := make([]int32, n) // indexed by a family's union-find root
	for i := range parcelOf {
		parcelOf[i] = -1
	}
	var sizes []int
	open := 0 // roots in the parcel being filled
	for i := 0; i < n; i++ {
		f := uf.find(int32(i))
		if parcelOf[f] >= 0 {
			continue // family already placed at its most urgent root
		}
		if len(sizes) == 0 || open >= minParcel {
			sizes = append(sizes, 0)
			open = 0
		}
		parcelOf[f] = int32(len(sizes) - 1)
		sizes[len(sizes)-1] += int(uf.size[f])
		open += int(uf.size[f])
	}
	starts := make([]int, len(sizes)+1)
	for k, sz := range sizes {
		starts[k+1] = starts[k] + sz
	}
	fill := append([]int(nil), starts[:len(sizes)]...)
	block := make([]*TaskState, n)
	for i, ts := range p { // priority order: each parcel stays sorted
		k := parcelOf[uf.find(int32(i))]
		block[fill[k]] = ts
		fill[k]++
	}
	return block, starts
}

// coDeal hands the parcels, most urgent first, each to the worker with the
// fewest roots per thread so far (ties: the order of workers), so every
// worker gets parcels from the whole priority range. No worker gets more
// than its quota (threadShares): a parcel that does not fit is split, its
// more urgent part filling the quota. O(parcels × log workers).
func (s *State) coDeal(b *coBlock, starts []int, workers []*WorkerState, quotas []int) {
	type load struct {
		ws           *WorkerState
		roots, quota int
		rank, idx    int
	}
	h := ixheap[*load]{
		less: func(a, b *load) bool {
			// a.roots/a.threads < b.roots/b.threads, without division
			x, y := a.roots*b.ws.NThreads, b.roots*a.ws.NThreads
			if x != y {
				return x < y
			}
			return a.rank < b.rank
		},
		setIdx: func(l *load, i int) { l.idx = i },
	}
	for j, ws := range workers {
		h.push(&load{ws: ws, quota: quotas[j], rank: j})
	}
	for k := 0; k+1 < len(starts); k++ {
		for lo, hi := starts[k], starts[k+1]; lo < hi; {
			l := h.items[0]
			take := hi - lo
			if room := l.quota - l.roots; room > 0 && room < take {
				take = room
			}
			s.coAddRun(b, lo, lo+take, l.ws)
			l.roots += take
			lo += take
			h.fix(0)
		}
	}
}
