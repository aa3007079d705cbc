package scheduler

import "daskgo/protocol"

// Retiring workers: distributed's Scheduler.retire_workers with the
// active memory manager's RetireWorker policy. A retiring worker is set to
// closing_gracefully (no new tasks); every key in memory only on retiring
// workers needs a replica elsewhere first. RetireWorker.run asks for one
// replica per unique key on a recipient chosen by _find_recipient (a
// running worker that is not retiring, least memory first); the outer
// ring sends those as acquire-replicas, the recipients fetch and report
// add-keys, and the plan is recomputed until nothing unique is left
// (RetireWorker.done) or no recipient exists (RetireWorker.no_recipients).

// RetirePlan is one round of the RetireWorker policy over a set of
// retiring workers.
type RetirePlan struct {
	// Acquire is {recipient: {key: [holders]}}: the acquire-replicas to send.
	Acquire WhoHasPlan
	// Unique counts the keys still held only by retiring workers.
	Unique int
	// NoRecipients: unique keys exist but no worker can take them; the
	// retirement must be aborted (the workers keep their data).
	NoRecipients bool
}

// Done is RetireWorker.done: nothing unique is left on the retiring workers.
func (p RetirePlan) Done() bool { return p.Unique == 0 }

// PlanRetire computes one round for the workers being retired. Recipients
// are running workers outside retiring; each key goes to the one with the
// least managed memory counting what this plan already assigned.
func (s *State) PlanRetire(retiring []string) RetirePlan {
	out := map[*WorkerState]bool{}
	for _, a := range retiring {
		if ws := s.workers[a]; ws != nil {
			out[ws] = true
		}
	}
	var recipients []*WorkerState
	for _, ws := range s.running.Items() {
		if !out[ws] {
			recipients = append(recipients, ws)
		}
	}
	sortByMemory(recipients)
	mem := map[*WorkerState]int64{}
	for _, ws := range recipients {
		mem[ws] = ws.nbytes
	}
	plan := RetirePlan{Acquire: WhoHasPlan{}}
	seen := map[*TaskState]bool{}
	for _, a := range retiring {
		ws := s.workers[a]
		if ws == nil {
			continue
		}
		for _, ts := range ws.hasWhat.Items() {
			if seen[ts] || ts.state != StatusMemory || !onlyOn(ts, out) {
				continue
			}
			seen[ts] = true
			plan.Unique++
			if len(recipients) == 0 {
				plan.NoRecipients = true
				continue
			}
			r := recipients[0]
			plan.Acquire.add(r.Address, ts.Key, workerAddrs(ts.whoHas.Items()))
			mem[r] += s.getNBytes(ts)
			sortByMem(recipients, mem)
		}
	}
	return plan
}

// onlyOn reports whether every holder of ts is in set.
func onlyOn(ts *TaskState, set map[*WorkerState]bool) bool {
	for _, ws := range ts.whoHas.Items() {
		if !set[ws] {
			return false
		}
	}
	return true
}

// AcquireReplicasMsgs turns a plan into acquire-replicas stream messages,
// one per recipient (worker_state_machine.AcquireReplicasEvent: who_has
// and nbytes), as ActiveMemoryManagerExtension._enact_suggestions sends.
func (s *State) AcquireReplicasMsgs(plan WhoHasPlan, sid string) map[string]*protocol.Map {
	out := make(map[string]*protocol.Map, len(plan))
	for to, who := range plan {
		nbytes := make(map[protocol.Key]int64, len(who))
		for k := range who {
			if ts := s.tasks.get(k); ts != nil {
				nbytes[k] = s.getNBytes(ts)
			}
		}
		out[to] = protocol.NewMap("op", "acquire-replicas", "who_has", who, "nbytes", nbytes, "stimulus_id", sid)
	}
	return out
}
