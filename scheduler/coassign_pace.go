package scheduler

// Pacing (WITHHOLDING.md, "Pacing"). The deal spreads every worker's
// families over the whole priority range, so the workers start out walking
// it together; but each walks its own families at its own speed, and a
// worker that falls behind holds back the combines that take one input
// from it: the others' partials wait in memory. Withholding has no such
// drift (whoever is free takes the most urgent root). So a worker whose
// next root is more than the block's window (coPaceFactor × workers × the
// largest family, in ranks of the partition's priority order) ahead of the
// block's front, the most urgent root still queued, takes a family nobody
// has started from the front on instead: the families stay whole (no
// transfer inside them), and the laggard keeps the family it is on.

// coPaceFactor scales the window. At 1 it spans the w families the deal
// puts side by side (w × the largest family, in ranks), so workers walking
// one round of families at different speeds are not drift; a worker a
// whole round ahead is. In the simulator, at benchmark size,
// climactic-mean peaked at 0.41 GiB with a window of one or two rounds
// (withholding: 0.40, no pacing: 0.46); moving single roots instead of
// whole families took vorticity's transfers from 61 to 160 MiB.
const coPaceFactor = 1

// coFamTable: the families of a partition, for pacing (coMembers: their
// members by rank); started[k] is set once any member of family k left
// the queue.
type coFamTable struct {
	coMembers
	started []bool
}

// coFamTableOf records each task's family for pacing. O(u).
func coFamTableOf(m coMembers, byRank []*TaskState) *coFamTable {
	for k := 0; k < m.count(); k++ {
		for _, i := range m.byFamily[m.first[k]:m.first[k+1]] {
			byRank[i].coFam = int32(k)
		}
	}
	return &coFamTable{coMembers: m, started: make([]bool, m.count())}
}

// frontTask returns the block's most urgent task still queued in it.
// Amortized O(1): the front only moves forward.
func (b *coBlock) frontTask() *TaskState {
	for b.front < len(b.byRank) {
		ts := b.byRank[b.front]
		if ts.coBlock == b && b.tasks[ts.coPos] == ts {
			return ts
		}
		b.front++
	}
	return nil
}

// coPace returns the run ws should take from instead of r (its most
// urgent run) when r's head is beyond the window: a run made of the first
// family not started yet, from the block's front on. nil: take from r.
func (s *State) coPace(r *coRun, ws *WorkerState) *coRun {
	b := r.block
	if b.window == 0 || b.fams == nil {
		return nil
	}
	front := b.frontTask()
	if front == nil || int(b.tasks[r.lo].coRank-front.coRank) <= b.window {
		return nil
	}
	return s.coPaceSteal(b, front, ws)
}

// coPaceSteal moves to ws the first family not started yet among the
// window ranks from the front. Its queued members leave their runs (nils
// stay behind, as for a released task) and become a run of a block of
// their own, in priority order. A rank that holds no family to move never
// will (a task does not come back to its block, a family does not become
// unstarted), so the scan resumes where it stopped: amortized O(1) per
// rank, plus O(family) per move, at most once per family.
func (s *State) coPaceSteal(b *coBlock, front *TaskState, ws *WorkerState) *coRun {
	t := b.fams
	end := min(len(b.byRank), int(front.coRank)+b.window+1)
	for rank := max(int(front.coRank), b.paceScan); rank < end; rank++ {
		b.paceScan = rank + 1
		ts := b.byRank[rank]
		if ts.coBlock != b || b.tasks[ts.coPos] != ts || t.started[ts.coFam] {
			continue
		}
		f := ts.coFam
		t.started[f] = true
		var moved []*TaskState
		for _, i := range t.byFamily[t.first[f]:t.first[f+1]] {
			if m := b.byRank[i]; m.coBlock == b && b.tasks[m.coPos] == m {
				b.tasks[m.coPos] = nil
				moved = append(moved, m)
			}
		}
		s.co.genSeq++
		nb := &coBlock{tasks: moved, gen: s.co.genSeq}
		s.coPlace(nb)
		return s.coAddRun(nb, 0, len(moved), ws)
	}
	return nil
}
