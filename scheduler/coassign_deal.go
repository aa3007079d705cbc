package scheduler

// The deal (WITHHOLDING.md, "The deal"): which worker owns which family.
// Families are dealt one by one, most urgent first, each to the worker
// with the fewest roots per thread so far, so that the w workers start on
// the w most urgent families and every worker's families come from the
// whole priority range: all workers walk it together, one front, as
// withholding's does. Each worker's share is then laid out as one run in
// priority order, so a partition makes at most one run per worker however
// small the families are.

// coMeshFamily is the family size limit on a mesh (coFamilySet.mesh), at
// least the cluster's thread count: families of a worker's share would be
// bands, one front each; families this small put the workers side by side
// on one front, at the cost of a transfer wherever two families meet.
const coMeshFamily = 16

// coLoad is one worker's tally during the deal.
type coLoad struct {
	ws           *WorkerState
	roots, quota int
	rank, idx    int
}

// coDeal deals the families m lists within each worker's quota
// (threadShares): a family that does not fit is split, its more urgent
// part filling the quota. It returns each root's worker (an index into
// workers). O(u + families × log workers).
func coDeal(m coMembers, workers []*WorkerState, quotas []int) []int32 {
	h := ixheap[*coLoad]{
		less: func(a, b *coLoad) bool {
			// a.roots/a.threads < b.roots/b.threads, without division
			x, y := a.roots*b.ws.NThreads, b.roots*a.ws.NThreads
			if x != y {
				return x < y
			}
			return a.rank < b.rank
		},
		setIdx: func(l *coLoad, i int) { l.idx = i },
	}
	for j, ws := range workers {
		h.push(&coLoad{ws: ws, quota: quotas[j], rank: j})
	}
	owner := make([]int32, len(m.byFamily))
	for k := 0; k < m.count(); k++ {
		for lo, hi := int(m.first[k]), int(m.first[k+1]); lo < hi; {
			l := h.items[0]
			take := hi - lo
			if room := l.quota - l.roots; room > 0 && room < take {
				take = room
			}
			for _, i := range m.byFamily[lo : lo+take] {
				owner[i] = int32(l.rank)
			}
			l.roots += take
			lo += take
			h.fix(0)
		}
	}
	return owner
}

// coMembers lists the families, most urgent (by its most urgent root)
// first: family k's members, in priority order, are the root indexes
// byFamily[first[k]:first[k+1]].
type coMembers struct {
	first, byFamily []int32
}

func (m coMembers) count() int { return len(m.first) - 1 }

// largest is the size of the largest family.
func (m coMembers) largest() int {
	big := int32(0)
	for k := 0; k < m.count(); k++ {
		big = max(big, m.first[k+1]-m.first[k])
	}
	return int(big)
}

// coFamilyMembers lists the families of n roots. O(u α(u)).
func coFamilyMembers(uf *unionFind, n int) coMembers {
	famOf := make([]int32, n) // union-find root -> family index
	for i := range famOf {
		famOf[i] = -1
	}
	first := []int32{0}
	for i := 0; i < n; i++ {
		if f := uf.find(int32(i)); famOf[f] < 0 {
			famOf[f] = int32(len(first) - 1)
			first = append(first, first[len(first)-1]+uf.size[f])
		}
	}
	byFamily := make([]int32, n)
	fill := append([]int32(nil), first...)
	for i := 0; i < n; i++ {
		k := famOf[uf.find(int32(i))]
		byFamily[fill[k]] = int32(i)
		fill[k]++
	}
	return coMembers{first: first, byFamily: byFamily}
}

// coWorkerLayout lays p (priority order) out worker by worker, each
// worker's roots in priority order, and returns the block and the workers'
// start indexes followed by len(p). O(u).
func coWorkerLayout(p []*TaskState, owner []int32, w int) ([]*TaskState, []int) {
	starts := make([]int, w+1)
	for _, j := range owner {
		starts[j+1]++
	}
	for j := 0; j < w; j++ {
		starts[j+1] += starts[j]
	}
	fill := append([]int(nil), starts[:w]...)
	block := make([]*TaskState, len(p))
	for i, ts := range p {
		j := owner[i]
		block[fill[j]] = ts
		fill[j]++
	}
	return block, starts
}

// coPartitionFamilies partitions the pooled roots b.tasks (priority
// order) by families: it finds them (smaller ones on a mesh, see
// coMeshFamily), deals them, lays the block out worker by worker (one run
// each) and sets the block up for pacing.
func (s *State) coPartitionFamilies(b *coBlock, order []*WorkerState) {
	n, w := len(b.tasks), len(order)
	for i, ts := range b.tasks {
		ts.coRank = int32(i)
	}
	b.byRank = append([]*TaskState(nil), b.tasks...)
	limit := (n + w - 1) / w
	fams := coFamilies(b.tasks, s.coFamilyDepth(), limit)
	if fams.mesh {
		fams = coFamilies(b.tasks, s.coFamilyDepth(), min(limit, max(coMeshFamily, s.TotalThreads())))
	}
	members := coFamilyMembers(fams.uf, n)
	owner := coDeal(members, order, threadShares(n, order))
	b.fams = coFamTableOf(members, b.byRank)
	b.window = coPaceFactor * w * members.largest()
	var starts []int
	b.tasks, starts = coWorkerLayout(b.tasks, owner, w)
	s.coPlace(b)
	for j := range order {
		if starts[j] < starts[j+1] {
			s.coAddRun(b, starts[j], starts[j+1], order[j])
		}
	}
}
