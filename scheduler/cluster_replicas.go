package scheduler

import (
	"fmt"
	"sort"

	"daskgo/protocol"
)

// Replica placement for Scheduler.replicate, Scheduler.rebalance and the
// active memory manager's RetireWorker policy. The engine decides (these
// are read-only plans over the current state); the outer ring carries
// them out with worker RPCs (gather, free_keys) or acquire-replicas on
// worker streams, and reports the outcome back as AddKeys and
// ReleaseWorkerData stimuli, as distributed's gather_on_worker and
// delete_worker_data update its state.
//
// Where distributed draws with random.sample, we pick the worker with
// the least managed memory (ties by address): deterministic, and the same
// target distributed's AMM prefers (ActiveMemoryManagerExtension.
// _find_recipient picks the least memory.optimistic).

// WhoHasPlan is {recipient: {key: [holders to fetch from]}}.
type WhoHasPlan map[string]map[protocol.Key][]string

func (p WhoHasPlan) add(to string, k protocol.Key, from []string) {
	if p[to] == nil {
		p[to] = map[protocol.Key][]string{}
	}
	p[to][k] = from
}

// ReplicatePlan is one round of Scheduler.replicate.
type ReplicatePlan struct {
	Missing []protocol.Key            // keys nobody holds: partial-fail
	Delete  map[string][]protocol.Key // extraneous replicas (delete=True)
	Gather  WhoHasPlan                // this round's copies
	// Done is true when every key has n replicas among the workers.
	Done bool
}

// PlanReplicate mirrors one iteration of Scheduler.replicate: n replicas
// among workers (nil: running workers; n <= 0: all of them), at most
// branching x current holders new copies per key per round. Errors are
// what distributed raises (unknown key, n == 0 workers).
func (s *State) PlanReplicate(keys []protocol.Key, n int, workers []string, branching int) (ReplicatePlan, error) {
	pool, err := s.replicaPool(workers)
	if err != nil {
		return ReplicatePlan{}, err
	}
	if n <= 0 || n > len(pool) {
		n = len(pool)
	}
	if n == 0 {
		return ReplicatePlan{}, fmt.Errorf("ValueError: Can not use replicate to delete data")
	}
	branching = max(branching, 1)
	plan := ReplicatePlan{Delete: map[string][]protocol.Key{}, Gather: WhoHasPlan{}, Done: true}
	for _, k := range keys {
		ts := s.tasks.get(k)
		if ts == nil {
			return ReplicatePlan{}, fmt.Errorf("KeyError: %s", k)
		}
		if ts.whoHas.Len() == 0 {
			plan.Missing = append(plan.Missing, k)
		}
	}
	if len(plan.Missing) > 0 {
		return plan, nil
	}
	for _, k := range keys {
		ts := s.tasks.get(k)
		have := s.holdersIn(ts, pool)
		if len(have) > n { // heaviest holders give theirs up
			for _, ws := range have[n:] {
				plan.Delete[ws.Address] = append(plan.Delete[ws.Address], k)
			}
			continue
		}
		missing := n - len(have)
		if missing == 0 {
			continue
		}
		plan.Done = false
		holders := workerAddrs(ts.whoHas.Items())
		for _, ws := range s.byMemory(pool, ts, min(missing, branching*len(holders))) {
			plan.Gather.add(ws.Address, k, holders)
		}
	}
	return plan, nil
}

// replicaPool is the running workers among workers (all running if nil),
// sorted by managed memory.
func (s *State) replicaPool(workers []string) ([]*WorkerState, error) {
	var pool []*WorkerState
	if workers == nil {
		pool = append(pool, s.running.Items()...)
	} else {
		for _, w := range workers {
			addr := w
			if a, ok := s.aliases[w]; ok && s.workers[w] == nil {
				addr = a
			}
			ws := s.workers[addr]
			if ws == nil {
				return nil, fmt.Errorf("KeyError: unknown worker %s", w)
			}
			if ws.status == "running" {
				pool = append(pool, ws)
			}
		}
	}
	sortByMemory(pool)
	return pool, nil
}

func sortByMemory(ws []*WorkerState) {
	sort.SliceStable(ws, func(i, j int) bool {
		if ws[i].nbytes != ws[j].nbytes {
			return ws[i].nbytes < ws[j].nbytes
		}
		return ws[i].Address < ws[j].Address
	})
}

// holdersIn lists ts's holders in pool, least memory first.
func (s *State) holdersIn(ts *TaskState, pool []*WorkerState) []*WorkerState {
	var out []*WorkerState
	for _, ws := range pool {
		if ts.whoHas.Has(ws) {
			out = append(out, ws)
		}
	}
	return out
}

// byMemory picks up to count workers of pool (sorted) that lack ts.
func (s *State) byMemory(pool []*WorkerState, ts *TaskState, count int) []*WorkerState {
	var out []*WorkerState
	for _, ws := range pool {
		if len(out) == count {
			break
		}
		if !ts.whoHas.Has(ws) {
			out = append(out, ws)
		}
	}
	return out
}

// Move is one key copied from a sender to a recipient (rebalance).
type Move struct {
	Key      protocol.Key
	From, To string
}

// PlanRebalance is Scheduler.rebalance's choice of moves, simplified:
// distributed compares each worker's process memory (the "optimistic"
// measure) with its memory_limit through the sender-min / recipient-max /
// sender-recipient-gap thresholds; we balance managed memory (the nbytes
// of the keys each worker holds) around the mean of the chosen workers,
// with no thresholds. Senders (above the mean, fullest first) give keys
// (largest first) to recipients (below the mean, emptiest first) while a
// move narrows the gap between the two. Only keys in keys (nil: all) that
// the recipient lacks move.
func (s *State) PlanRebalance(keys []protocol.Key, workers []string) ([]Move, error) {
	pool, err := s.replicaPool(workers)
	if err != nil || len(pool) < 2 {
		return nil, err
	}
	var subset map[*TaskState]bool
	if keys != nil {
		subset = map[*TaskState]bool{}
		for _, k := range keys {
			if ts := s.tasks.get(k); ts != nil && ts.state == StatusMemory {
				subset[ts] = true
			}
		}
	}
	mem := map[*WorkerState]int64{}
	var total int64
	for _, ws := range pool {
		mem[ws] = ws.nbytes
		total += ws.nbytes
	}
	mean := total / int64(len(pool))
	var senders []*WorkerState // fullest first; pool is re-sorted as moves land
	for i := len(pool) - 1; i >= 0 && mem[pool[i]] > mean; i-- {
		senders = append(senders, pool[i])
	}
	var moves []Move
	for _, ws := range senders {
		moves = s.drainSender(ws, pool, mem, mean, subset, moves)
	}
	return moves, nil
}

// drainSender moves keys off sender until it reaches the mean or no move
// narrows a gap.
func (s *State) drainSender(sender *WorkerState, pool []*WorkerState, mem map[*WorkerState]int64,
	mean int64, subset map[*TaskState]bool, moves []Move) []Move {
	cands := make([]*TaskState, 0, sender.hasWhat.Len())
	for _, ts := range sender.hasWhat.Items() {
		if ts.state == StatusMemory && (subset == nil || subset[ts]) {
			cands = append(cands, ts)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return s.getNBytes(cands[i]) > s.getNBytes(cands[j]) })
	for _, ts := range cands {
		if mem[sender] <= mean {
			break
		}
		nb := s.getNBytes(ts)
		for _, r := range pool { // emptiest first
			if r == sender || ts.whoHas.Has(r) || mem[r] >= mean || mem[r]+nb >= mem[sender] {
				continue
			}
			moves = append(moves, Move{Key: ts.Key, From: sender.Address, To: r.Address})
			mem[r] += nb
			mem[sender] -= nb
			sortByMem(pool, mem)
			break
		}
	}
	return moves
}

func sortByMem(pool []*WorkerState, mem map[*WorkerState]int64) {
	sort.SliceStable(pool, func(i, j int) bool {
		if mem[pool[i]] != mem[pool[j]] {
			return mem[pool[i]] < mem[pool[j]]
		}
		return pool[i].Address < pool[j].Address
	})
}
