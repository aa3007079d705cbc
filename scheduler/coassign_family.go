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
// one worker's share of the pool (a mesh's families are smaller: see
// coFamilySet.mesh and coMeshFamily). The deal (coassign_deal.go) hands them out.
// Cost: O(u × depth × coFamilyFrontier) map operations for u pooled roots;
// each scheduling decision afterwards is unchanged (coNext).

const (
	// coFamilyFanout: a task with more dependents than this is a shared
	// input (a lookup table, an index), not part of a reduction; joining
	// through it would make every root one family, so it is not followed.
	coFamilyFanout = 32
	// coFamilyFrontier bounds the tasks followed per root and level.
	coFamilyFrontier = 32
)

// maxCoFamilyDepth bounds the partition's cost (linear in the depth);
// deeper joins only merge families that are at the limit already.
const maxCoFamilyDepth = 16

// coFamilyDepth is the configured depth, at most maxCoFamilyDepth; Off
// (negative) turns families off (contiguous priority runs).
//
// The default, 4 (DefaultConfig): anom-mean's random → mean_chunk →
// combine, with a getitem between, needs 3; basic-sum's combine tree needs
// 4 to reach a worker's share (with 3 its families are a quarter of that,
// and the simulated run moves 6× more). Deeper joins only merge families
// that are at the limit already.
func (s *State) coFamilyDepth() int {
	return min(s.cfg.CoFamilyDepth, maxCoFamilyDepth)
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

// union joins a's and b's families; it returns false when the join was
// refused at the size limit.
func (u *unionFind) union(a, b int32) bool {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return true
	}
	if u.size[ra]+u.size[rb] > u.limit {
		return false
	}
	if u.size[ra] < u.size[rb] {
		ra, rb = rb, ra
	}
	u.parent[rb] = ra
	u.size[ra] += u.size[rb]
	return true
}

// coFamilies unions the roots p (in priority order) that share a task
// within depth levels of dependents, nearest level first and, within a
// level, in priority order, so that a family refused at the limit leaves
// its neighbours to the next family rather than scattering them.
func coFamilies(p []*TaskState, depth, limit int) coFamilySet {
	uf := newUnionFind(len(p), limit)
	firstJoin, refused, width := 0, false, int32(0)
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
		var reached map[*TaskState]int32 // roots per task, on the first joining level
		if firstJoin == 0 {
			reached = make(map[*TaskState]int32, len(front))
		}
		for i := range p {
			for _, j := range front[off[i]:off[i+1]] {
				if reached != nil {
					reached[j]++
					width = max(width, reached[j])
				}
				if a, ok := seen[j]; ok {
					if firstJoin == 0 {
						firstJoin = level
					}
					if !uf.union(a, int32(i)) && level == firstJoin {
						refused = true
					}
				} else {
					seen[j] = int32(i)
				}
			}
		}
		if firstJoin == 0 {
			width = 0
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
	return coFamilySet{uf: uf, mesh: refused && width >= coMeshWidth}
}

// coFamilySet is the result of coFamilies. mesh: a join was refused at
// the size limit on the first level where roots join at all, and tasks of
// that level take coMeshWidth roots or more: a stencil, whose limit-sized
// families are bands of the grid, each a front of its own holding its
// border until the neighbouring band gets there (WITHHOLDING.md,
// "Meshes"). A reduction tree fills its subtrees and refuses joins only
// higher up.
type coFamilySet struct {
	uf   *unionFind
	mesh bool
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

// coMeshWidth: the fewest roots one task of the first joining level takes
// for a refused join there to make a mesh. A stencil's overlap task takes
// a chunk and its 8 neighbours; double-diff's a[1:, 1:] - b[:-1, :-1]
// takes one piece of a and one of b, and small families there doubled the
// bytes moved (421 MiB against 224 with bands) for no memory.
const coMeshWidth = 3
