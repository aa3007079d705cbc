package scheduler

import (
	"slices"

	"daskgo/protocol"
)

// The active memory manager's ReduceReplicas policy, which distributed
// starts by default (distributed.scheduler.active-memory-manager.start:
// true, policies: [ReduceReplicas], interval 2s;
// distributed/active_memory_manager.py). Every AMMTick it drops the
// replicas a key no longer needs: a dependency fetched by a worker stays
// there until the key is released unless something removes it, and on
// graphs whose inputs feed many consumers on several workers (dot-product's
// random blocks) those copies are what the cluster holds late in a run.
//
// Per key with more than one holder: keep as many replicas as
// replicasNeeded says; drop the rest, each from the holder
// (ActiveMemoryManagerExtension._find_dropper) that is not running a
// waiter of the key, preferring workers that are not running, then the
// most memory (managed bytes here: the engine has no process memory, where
// distributed reads memory.optimistic; updated as drops are planned, as
// workers_memory is). The scheduler forgets each dropped replica at once
// and tells the worker (request_remove_replicas); a worker that still
// needs it answers add-keys and the replica comes back (addKeys).
//
// Cost: O(replicated keys × their holders) per tick, plus their waiters
// for keys with fewer than 20 waiters or a replica to drop; the replicated
// set is kept by addReplica/removeReplica, so keys held once cost nothing.

// reduceReplicas is one AMM cycle with the ReduceReplicas policy.
func (s *State) reduceReplicas() {
	if s.replicated.Len() == 0 {
		return
	}
	memory := make(map[*WorkerState]int64, len(s.workers))
	mem := func(ws *WorkerState) int64 {
		if m, ok := memory[ws]; ok {
			return m
		}
		return ws.nbytes
	}
	drops := map[*WorkerState][]*TaskState{}
	var order []*WorkerState // drop lists in first-planned order: deterministic
	busy := map[*WorkerState]struct{}{}
	for _, ts := range s.replicated.Snapshot() {
		if ts.actor || ts.whoHas.Len() < 2 {
			continue
		}
		need := s.replicasNeeded(ts)
		if ts.whoHas.Len() <= need {
			continue
		}
		clear(busy)
		for _, w := range ts.waiters.Items() {
			if w.processingOn != nil {
				busy[w.processingOn] = struct{}{}
			}
		}
		for n := ts.whoHas.Len() - need; n > 0; n-- {
			ws := s.findDropper(ts, busy, mem)
			if ws == nil {
				break
			}
			if _, ok := drops[ws]; !ok {
				order = append(order, ws)
			}
			drops[ws] = append(drops[ws], ts)
			memory[ws] = max(0, mem(ws)-s.getNBytes(ts))
			s.removeReplica(ts, ws) // request_remove_replicas: forgotten at once
		}
	}
	if len(order) == 0 {
		return
	}
	sid := s.sid("active_memory_manager")
	for _, ws := range order {
		keys := make([]protocol.Key, len(drops[ws]))
		for i, ts := range drops[ws] {
			keys[i] = ts.Key
		}
		s.toWorker(ws, msgRemoveReplicas(keys, sid))
	}
}

// replicasNeeded is ReduceReplicas.run's count of replicas to keep: one per
// waiter, except that with 2–19 waiters those processing on the same
// worker count once (an unplaced waiter still counts once each, erring on
// the side of an extra replica). From 20 waiters on distributed skips the
// dedup as too costly, so such keys keep len(waiters) replicas; so do we,
// or the two schedulers would drop different replicas.
func (s *State) replicasNeeded(ts *TaskState) int {
	n := ts.waiters.Len()
	if 1 < n && n < 20 {
		var on []*WorkerState
		unplaced := 0
		for _, w := range ts.waiters.Items() {
			switch {
			case w.processingOn == nil:
				unplaced++
			case !slices.Contains(on, w.processingOn):
				on = append(on, w.processingOn)
			}
		}
		n = len(on) + unplaced
	}
	return max(1, n)
}

// findDropper mirrors _find_dropper for candidates = all holders: never
// the last replica, never a worker a waiter is processing on; not running
// first, then the most memory, ties by address. It also keeps the one
// running replica when the others are on paused or retiring workers busy
// with the key's waiters (distributed's guard against ping-pong with
// RetireWorker).
func (s *State) findDropper(ts *TaskState, busy map[*WorkerState]struct{}, mem func(*WorkerState) int64) *WorkerState {
	if ts.whoHas.Len() < 2 {
		return nil
	}
	var choice *WorkerState
	candidates := 0
	busyHolders := 0
	for _, ws := range ts.whoHas.Items() {
		if _, ok := busy[ws]; ok {
			busyHolders++
			continue
		}
		candidates++
		if choice == nil || dropBefore(ws, choice, mem) {
			choice = ws
		}
	}
	if choice == nil {
		return nil
	}
	if candidates == 1 && choice.status == "running" && busyHolders > 0 {
		allIdle := true
		for _, ws := range ts.whoHas.Items() {
			if _, ok := busy[ws]; ok && ws.status == "running" {
				allIdle = false
			}
		}
		if allIdle {
			return nil
		}
	}
	return choice
}

// dropBefore orders drop candidates: not running first, then more memory,
// then address.
func dropBefore(a, b *WorkerState, mem func(*WorkerState) int64) bool {
	ar, br := a.status == "running", b.status == "running"
	if ar != br {
		return !ar
	}
	if ma, mb := mem(a), mem(b); ma != mb {
		return ma > mb
	}
	return a.Address < b.Address
}
