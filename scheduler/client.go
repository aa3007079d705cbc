package scheduler

import (
	"time"

	"daskgo/protocol"
)

// fireAndForget is distributed's pseudo-client that keeps fire_and_forget
// futures alive until they finish.
const fireAndForget = "fire-and-forget"

// ClientState mirrors distributed.scheduler.ClientState.
type ClientState struct {
	ID        string
	wantsWhat taskSet
	lastSeen  time.Time
	// connected: the client has a stream (AddClient); pseudo-clients
	// (fire-and-forget, publish) get no messages, as report() skips them.
	connected bool
}

func (s *State) addClientState(id string) *ClientState {
	cs := s.clients[id]
	if cs == nil {
		cs = &ClientState{ID: id, wantsWhat: taskSet{role: roleWantsWhat}}
		s.clients[id] = cs
		s.clientOrder.Add(cs)
	}
	if id != fireAndForget && s.out != nil {
		if s.hookMask != 0 && !cs.connected {
			s.hook(HookEvent{Hook: HookAddClient, Client: id})
		}
		cs.connected = true
		cs.lastSeen = s.now
	}
	return cs
}

// removeClient mirrors Scheduler.remove_client: release everything only
// this client wanted.
func (s *State) removeClient(id string) {
	cs := s.clients[id]
	if cs == nil || id == fireAndForget {
		return
	}
	keys := make([]protocol.Key, 0, cs.wantsWhat.Len())
	for _, ts := range cs.wantsWhat.Items() {
		keys = append(keys, ts.Key)
	}
	s.clientReleasesKeys(keys, id)
	s.unsubscribeAll(id)
	s.dropClientDiagnostics(id)
	delete(s.clients, id)
	s.clientOrder.Remove(cs)
	cs.connected = false
	delete(s.held, id)
	if s.hookMask != 0 {
		s.hook(HookEvent{Hook: HookRemoveClient, Client: id})
	}
}

// clientDesiresKeys mirrors Scheduler.client_desires_keys.
func (s *State) clientDesiresKeys(keys []protocol.Key, client string) {
	cs := s.clients[client]
	if cs == nil {
		cs = &ClientState{ID: client, wantsWhat: taskSet{role: roleWantsWhat}} // publish, queues: no stream
		s.clients[client] = cs
		s.clientOrder.Add(cs)
	}
	for _, k := range keys {
		ts := s.tasks.get(k)
		if ts == nil {
			s.logf(LogDebug, k, "", client, "client %s desires unknown key %s", client, k)
			continue
		}
		s.desire(cs, ts, client)
	}
}

// clientDesiresTasks is clientDesiresKeys for already resolved tasks.
func (s *State) clientDesiresTasks(tasks []*TaskState, client string) {
	cs := s.clients[client]
	if cs == nil {
		cs = &ClientState{ID: client, wantsWhat: taskSet{role: roleWantsWhat}}
		s.clients[client] = cs
		s.clientOrder.Add(cs)
	}
	cs.wantsWhat.grow(len(tasks)) // one allocation for a big graph's keys
	for _, ts := range tasks {
		s.desire(cs, ts, client)
	}
}

func (s *State) desire(cs *ClientState, ts *TaskState, client string) {
	// who_wants mirrors wants_what: probe the small side only
	if ts.whoWants.Add(cs) {
		cs.wantsWhat.addNew(ts)
	}
	if ts.state == StatusMemory || ts.state == StatusErred {
		s.reportOnKey(ts, client)
	}
}

// clientReleasesKeys mirrors Scheduler.client_releases_keys.
func (s *State) clientReleasesKeys(keys []protocol.Key, client string) {
	cs := s.clients[client]
	if cs == nil {
		return
	}
	s.clientReleasesKeysRecs(keys, cs)
	s.runTransitions()
	s.queueSlotsMaybeOpened()
}

// clientReleasesKeysRecs mirrors SchedulerState._client_releases_keys.
func (s *State) clientReleasesKeysRecs(keys []protocol.Key, cs *ClientState) {
	for _, k := range keys {
		ts := s.tasks.get(k)
		// who_wants mirrors wants_what: test the small side first
		if ts == nil || !ts.whoWants.Remove(cs) {
			continue
		}
		cs.wantsWhat.Remove(ts)
		if ts.whoWants.Len() == 0 {
			if ts.dependents.Len() == 0 {
				s.recommend(ts, StatusForgotten) // no live dependents
			} else if ts.state != StatusErred && ts.waiters.Len() == 0 {
				s.recommend(ts, StatusReleased)
			}
		}
	}
}

// releaseFireAndForget drops the fire-and-forget interest once a task is
// done (memory or erred), as _add_to_memory and _propagate_erred do.
func (s *State) releaseFireAndForget(ts *TaskState) {
	for _, cs := range ts.whoWants.Items() { // == clients[fireAndForget].wantsWhat.Has(ts), without its hash probe
		if cs.ID == fireAndForget {
			s.clientReleasesKeysRecs(oneKey(ts), cs)
			return
		}
	}
}

// stimulusCancel mirrors Scheduler.stimulus_cancel; cancelled-keys goes to
// every client.
func (s *State) stimulusCancel(x *CancelKeys) {
	cs := s.clients[x.Client]
	if cs == nil {
		return
	}
	var cancelled []protocol.Key
	var clients []*ClientState
	s.cancelCollect(x.Keys, cs, x.Force, &cancelled, &clients, map[protocol.Key]bool{})
	for _, c := range clients {
		s.clientReleasesKeys(cancelled, c.ID)
	}
	if cancelled == nil {
		cancelled = []protocol.Key{}
	}
	s.reportAll(msgCancelledKeys(cancelled, x.Reason, x.Msg))
}

// cancelCollect walks dependents first, as stimulus_cancel recurses. The
// recursion in distributed also reports once per level; one report with
// every cancelled key is what clients need (they cancel each listed key).
func (s *State) cancelCollect(keys []protocol.Key, cs *ClientState, force bool, cancelled *[]protocol.Key, clients *[]*ClientState, seen map[protocol.Key]bool) {
	for _, k := range keys {
		ts := s.tasks.get(k)
		if ts == nil || seen[k] {
			continue
		}
		seen[k] = true
		onlyMe := ts.whoWants.Len() == 1 && ts.whoWants.Has(cs)
		if force || onlyMe {
			if ts.dependents.Len() > 0 {
				deps := make([]protocol.Key, 0, ts.dependents.Len())
				for _, d := range ts.dependents.Items() {
					deps = append(deps, d.Key)
				}
				s.cancelCollect(deps, cs, force, cancelled, clients, seen)
			}
			*cancelled = append(*cancelled, k)
		}
		if force {
			*clients = appendClients(*clients, ts.whoWants.Items()...)
		} else {
			*clients = appendClients(*clients, cs)
		}
	}
}

func appendClients(list []*ClientState, add ...*ClientState) []*ClientState {
	for _, c := range add {
		if !containsClient(list, c) {
			list = append(list, c)
		}
	}
	return list
}

func containsClient(list []*ClientState, c *ClientState) bool {
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

// handleHeartbeatClient mirrors Scheduler.client_heartbeat.
func (s *State) handleHeartbeatClient(x *HeartbeatClient) {
	cs := s.clients[x.Client]
	if cs == nil {
		return
	}
	cs.lastSeen = s.now
	s.toClient(cs, protocol.NewMap("op", "adjust-heartbeat-interval",
		"interval", heartbeatInterval(len(s.clients))*10))
}

// handleRetry mirrors Scheduler.stimulus_retry: walk erred dependencies
// down to the erred roots and send those back to waiting.
func (s *State) handleRetry(x *Retry) {
	stack := append([]protocol.Key(nil), x.Keys...)
	seen := map[protocol.Key]bool{}
	var order, roots []protocol.Key
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ts := s.tasks.get(k)
		if ts == nil {
			s.logf(LogWarn, k, "", x.Client, "retry of unknown key %s ignored", k)
			continue
		}
		if !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
		var erred []protocol.Key
		for _, dts := range ts.dependencies.Items() {
			if dts.state == StatusErred {
				erred = append(erred, dts.Key)
			}
		}
		if len(erred) > 0 {
			stack = append(stack, erred...)
		} else {
			roots = append(roots, k)
		}
	}
	for _, k := range roots {
		s.recommend(s.tasks.get(k), StatusWaiting)
	}
	s.runTransitions()
	if x.ReplyTo != 0 {
		if order == nil {
			order = []protocol.Key{}
		}
		s.reply(x.ReplyTo, order)
	}
}

// handleUpdateData mirrors Scheduler.update_data (scatter): the keys are in
// memory on the given workers.
func (s *State) handleUpdateData(x *UpdateData) {
	keys := make([]protocol.Key, 0, len(x.WhoHas))
	for k := range x.WhoHas {
		keys = append(keys, k)
	}
	sortKeys(keys)
	for _, k := range keys {
		var holders []*WorkerState
		for _, addr := range x.WhoHas[k] {
			if ws := s.workers[addr]; ws != nil {
				holders = append(holders, ws)
			} else {
				s.logf(LogWarn, k, addr, x.Client, "update-data names unknown worker %s", addr)
			}
		}
		if len(holders) == 0 {
			continue
		}
		ts := s.tasks.get(k)
		if ts == nil {
			ts = s.newTask(k, nil, StatusMemory)
		}
		s.forceMemory(ts)
		if nb, ok := x.NBytes[k]; ok && nb >= 0 {
			s.setNBytes(ts, nb)
		}
		for _, ws := range holders {
			s.addReplica(ts, ws)
		}
		s.report(msgKeyInMemory(k, nil), ts, "")
	}
	if x.Client != "" {
		s.clientDesiresKeys(keys, x.Client)
	}
	if x.ReplyTo != 0 {
		s.reply(x.ReplyTo, nil)
	}
}

// forceMemory is update_data's `ts.state = "memory"`, made safe: a task
// that was waiting for a worker leaves those structures first.
func (s *State) forceMemory(ts *TaskState) {
	switch ts.state {
	case StatusMemory:
		return
	case StatusQueued:
		s.unqueue(ts)
	case StatusNoWorker:
		s.unrunnable.Remove(ts)
	case StatusProcessing:
		s.exitProcessingCommon(ts)
		if s.stealOn() { // no transition runs the stealing hook here
			s.stealRemove(ts)
			s.stealEndInFlight(ts)
		}
	}
	for _, dts := range ts.dependencies.Items() {
		dts.waiters.Remove(ts)
	}
	ts.waitingOn.Clear()
	ts.clearException()
	s.setState(ts, StatusMemory)
	for _, dts := range ts.dependents.Items() {
		if dts.waitingOn.Remove(ts) && dts.waitingOn.Len() == 0 && dts.state == StatusWaiting {
			s.recommend(dts, StatusProcessing)
		}
	}
	s.runTransitions()
}

func sortKeys(ks []protocol.Key) {
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
}
