package scheduler

// Pacing (WITHHOLDING.md, "Pacing"). The deal spreads every worker's
// families over the whole priority range, so the workers start out walking
// it together; but each walks its own families at its own pace, and a
// worker that gets ahead makes data that waits for the combines it feeds
// until the others get there. Withholding has no such drift (whoever is
// free takes the most urgent root). Two bounds pace a worker that runs
// ahead of the block's front, the most urgent root still queued:
//
//   - the families' window: its next root is more than coPaceFactor ×
//     workers × the largest family (in ranks of the partition's priority
//     order) ahead of the front. It takes a family nobody has started from
//     the front on instead, so the families stay whole (no transfer inside
//     them) and the laggard keeps the family it is on.
//   - its memory: it holds more of the co-assigned roots' outputs than its
//     share (by threads) of what the workers hold of them, by more than
//     the memory bound (coHeldOver), and its next root is ahead of the
//     front. It takes the front root itself instead, until it holds no
//     more than that: its family's worker loses one root, whose consumers
//     then fetch one output.
//
// Where families span the whole priority range, the families' window is
// the whole range and only the memory bound paces. anom-persist's families
// are time ranges of 320 rows, 16 rows of each of its 20 groups, and each
// row waits in memory until its group's climatology is done, that is,
// until the last worker has run its rows of the group. The workers do not
// walk their rows at one pace (each also runs the consumers that follow
// its data), so the one ahead holds rows of groups the others have not
// finished: at the largest worker's peak (scripts/bench/trace_peak.py) it
// held 227 rows (216 MiB) waiting for their groups' climatologies, where a
// worker under withholding held about 32.
//
// A worker that holds its share keeps walking its own families however
// far ahead it is: basic-sum's families are contiguous ranges, each worker
// a quarter of the priorities ahead of the next, and each family's data is
// reduced within it.

// coPaceFactor scales the families' window. At 1 it spans the w families
// the deal puts side by side (w × the largest family, in ranks), so workers
// walking one round of families at different speeds are not drift; a
// worker a whole round ahead is. In the simulator, at benchmark size,
// climactic-mean peaked at 0.41 GiB with a window of one or two rounds
// (withholding: 0.40, no pacing: 0.46); moving single roots instead of
// whole families took vorticity's transfers from 61 to 160 MiB.
const coPaceFactor = 1

// The memory bound (coHeldOver) is the larger of coPaceMemoryShare of the
// worker's memory limit and coPaceSlotRounds rounds of its slots' roots
// (withholding, too, lets one worker hold its slots' roots more than
// another). In the simulator, 4 workers × 1 GiB, medians of five worker
// speed seeds (cluster peak, largest worker's peak, bytes moved):
// anom-persist without the bound 1,771 MB, 523 MB, 4.2 GB; with 5 % 1,502,
// 418, 4.4; 2 % 1,510, 402, 4.6; 1 % 1,461, 381, 4.8 (withholding 1,427,
// 375, 7.5). anom-mean at full size (20 workers × 8 GiB): 58.8 GiB, 4.62
// GiB, 257 GiB without; 27.4, 1.75, 273 with 1 % (withholding 25.0, 1.53,
// 407). With one round of slots basic-sum's transfers grew from 9.0 to
// 20.9 GiB at full size (its 100 MiB roots' outputs reach a few roots of
// imbalance as they are reduced), with two they stay at 9.2; the other
// benchmark workloads are not paced by it at either.
const (
	coPaceMemoryShare = 0.01
	coPaceSlotRounds  = 2
)

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
// urgent run) when a bound paces it, and why: a run made of the first
// family not started yet from the block's front on (the families'
// window), or of the front root alone (the memory bound). nil: take from
// r. O(1) amortized (the front and the family scan only move forward).
func (s *State) coPace(r *coRun, ws *WorkerState) (*coRun, Reason) {
	b := r.block
	if b.window == 0 || b.fams == nil {
		return nil, Reason{}
	}
	front := b.frontTask()
	if front == nil {
		return nil, Reason{}
	}
	lead := int(b.tasks[r.lo].coRank - front.coRank)
	if lead > b.window {
		if nr := s.coPaceSteal(b, front, ws, b.window); nr != nil {
			return nr, Reason{Rule: RuleCoPaced, N1: float64(lead), N2: float64(b.window)}
		}
	}
	if lead <= 0 {
		return nil, Reason{}
	}
	over, bound := s.coHeldOver(ws, front)
	if over <= bound {
		return nil, Reason{}
	}
	return s.coPaceFront(b, front, ws), Reason{Rule: RuleCoPacedMemory, N1: float64(over), N2: float64(bound)}
}

// coHeldOver is how much more of the co-assigned roots' outputs ws holds
// than its share (by threads) of what the workers hold of them, and the
// memory bound on that: coPaceMemoryShare of its memory limit, and at
// least coPaceSlotRounds × its slots × the mean output of the front's
// group so far. No bound without a memory limit. O(1).
func (s *State) coHeldOver(ws *WorkerState, front *TaskState) (over, bound int64) {
	if ws.MemoryLimit <= 0 || s.totalNThreads <= 0 {
		return 0, 0
	}
	share := s.co.rootBytes * int64(ws.NThreads) / int64(s.totalNThreads)
	bound = int64(coPaceMemoryShare * float64(ws.MemoryLimit))
	if tg := front.group; tg != nil && tg.nbytesTasks > 0 {
		bound = max(bound, tg.nbytesTotal/tg.nbytesTasks*int64(coPaceSlotRounds*s.slotLimit(ws)))
	}
	return ws.coRootBytes - share, bound
}

// coRootHeld counts a change of nb bytes in what ws holds of ts, when ts
// is a co-assigned root.
func (s *State) coRootHeld(ts *TaskState, ws *WorkerState, nb int64) {
	if ts.coRoot {
		ws.coRootBytes += nb
		s.co.rootBytes += nb
	}
}

// coPaceSteal moves to ws the first family not started yet among the
// window ranks from the front (the scan stops at the first rank beyond
// it; the next call resumes there). Its queued members leave their runs (nils
// stay behind, as for a released task) and become a run of a block of
// their own, in priority order. A rank that holds no family to move never
// will (a task does not come back to its block, a family does not become
// unstarted), so the scan resumes where it stopped: amortized O(1) per
// rank, plus O(family) per move, at most once per family.
func (s *State) coPaceSteal(b *coBlock, front *TaskState, ws *WorkerState, window int) *coRun {
	t := b.fams
	end := min(len(b.byRank), int(front.coRank)+window+1)
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
		return s.coRunOfOwn(moved, ws)
	}
	return nil
}

// coPaceFront moves the front root alone to ws, which holds too much to go
// on with its own roots ahead of it. The root's family's worker loses it,
// and the consumers that join it to its siblings fetch one output. O(1).
func (s *State) coPaceFront(b *coBlock, front *TaskState, ws *WorkerState) *coRun {
	b.tasks[front.coPos] = nil
	return s.coRunOfOwn([]*TaskState{front}, ws)
}

// coRunOfOwn makes tasks (in priority order, taken out of their block) a
// block of their own, run by ws.
func (s *State) coRunOfOwn(tasks []*TaskState, ws *WorkerState) *coRun {
	s.co.genSeq++
	nb := &coBlock{tasks: tasks, gen: s.co.genSeq}
	s.coPlace(nb)
	return s.coAddRun(nb, 0, len(tasks), ws)
}
