package sim

import (
	"container/heap"
	"fmt"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// What a simulated worker does with the engine's messages, and the events
// that follow: dependency transfers and task executions.

func (s *Sim) workerMsgs(w *worker, msgs []*protocol.Map) {
	for _, m := range msgs {
		switch m.Get("op") {
		case "compute-task":
			s.computeTask(w, m)
		case "steal-request":
			s.stealRequest(w, m)
		case "free-keys":
			for _, k := range msgKeys(m.Get("keys")) {
				if t, ok := s.index[k]; ok {
					s.mem(w, w.free(t))
				}
			}
		case "remove-replicas":
			// replicas the AMM dropped, or the scheduler does not track
			// (add-keys raced a release): a stock worker releases those it
			// holds in memory (_handle_remove_replicas)
			for _, k := range msgKeys(m.Get("keys")) {
				if t, ok := s.index[k]; ok {
					if w.keys.held(t) {
						s.mem(w, w.keys.drop(t))
						s.replicasDropped++
					}
				}
			}
		}
	}
	s.startTasks(w)
}

// msgKeys reads a keys field as the engine builds it.
func msgKeys(v any) []protocol.Key {
	switch x := v.(type) {
	case []protocol.Key:
		return x
	case protocol.Set:
		return anyKeys(x)
	case []any:
		return anyKeys(x)
	}
	return nil
}

func anyKeys(xs []any) []protocol.Key {
	out := make([]protocol.Key, 0, len(xs))
	for _, e := range xs {
		if k, err := protocol.KeyOf(e); err == nil {
			out = append(out, k)
		}
	}
	return out
}

// computeTask: the task is assigned here; dependencies not held locally are
// fetched from a holder in the message's who_has (or joined to a fetch
// already in flight), and the task is ready once all are local.
func (s *Sim) computeTask(w *worker, m *protocol.Map) {
	k, _ := m.Get("key").(protocol.Key)
	t, ok := s.index[k]
	run, _ := m.Get("run_id").(int64)
	if !ok {
		s.failed = fmt.Errorf("sim: compute-task for unknown key %s", k)
		return
	}
	w.assigned[t] = run
	p := &pending{run: run}
	whoHas := m.Get("who_has")
	for _, d := range s.g.Tasks[t].Deps {
		if w.keys.held(d) {
			continue
		}
		p.missing++
		if ws, inFlight := w.fetch[d]; inFlight {
			w.fetch[d] = append(ws, waiter{t, run})
			continue
		}
		src := s.pickHolder(w, d, whoHas)
		if src == nil {
			s.failed = fmt.Errorf("sim: no worker holds %s, a dependency of %s on %s", s.g.Tasks[d].Key, k, w.addr)
			return
		}
		w.fetch[d] = []waiter{{t, run}}
		s.transfer(src, w, d)
	}
	if p.missing == 0 {
		heap.Push(&w.ready, readyItem{order: s.g.Tasks[t].Order, task: t, run: run})
	} else {
		w.waiting[t] = p
	}
}

// pickHolder chooses among the holders the scheduler named (seeded choice,
// like the worker's random choice of a peer), skipping any that no longer
// hold the data; if none does, it asks the engine (request-refresh-who-has).
func (s *Sim) pickHolder(w *worker, d int32, whoHas any) *worker {
	key := s.g.Tasks[d].Key
	var cands []*worker
	for _, a := range holderAddrs(whoHas, key) {
		if h := s.byAddr[a]; h != nil && h != w {
			if h.keys.held(d) {
				cands = append(cands, h)
			} else {
				s.anomalies++
			}
		}
	}
	if len(cands) == 0 {
		for _, a := range s.eng.WhoHas([]protocol.Key{key})[key] {
			if h := s.byAddr[a]; h != nil && h != w {
				if h.keys.held(d) {
					cands = append(cands, h)
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[s.rand(len(cands))]
}

func holderAddrs(whoHas any, key protocol.Key) []string {
	switch x := whoHas.(type) {
	case *protocol.KeyList[[]string]: // compute-task's
		addrs, _ := x.Get(key)
		return addrs
	case map[protocol.Key][]string:
		return x[key]
	case *protocol.Map:
		if x == nil {
			return nil
		}
		var out []string
		for _, e := range x.Entries {
			if k, err := protocol.KeyOf(e.Key); err != nil || k != key {
				continue
			}
			if l, ok := e.Value.([]any); ok {
				for _, a := range l {
					if s, ok := a.(string); ok {
						out = append(out, s)
					}
				}
			}
		}
		return out
	}
	return nil
}

// transfer moves d from src to dst. Each worker link serves one transfer at
// a time per direction (FIFO), at Bandwidth, plus the latency; with shared
// cores (Config.Cores) the transfer is instead CPU work on them (see
// Config.TransferCPU), run as soon as it is asked for. With
// MemoryModel.ReceiveEarly the destination holds the bytes from the request.
func (s *Sim) transfer(src, dst *worker, d int32) {
	nb := s.g.Tasks[d].NBytes
	s.transferred += nb
	s.mem(src, src.keys.touch(d)) // get_data reads it: unspilled if spilled
	if s.cfg.Mem.ReceiveEarly {
		s.mem(dst, nb)
	}
	if s.cpu != nil {
		s.cpu.start(s.clk.now, s.cfg.TransferCPU+float64(nb)*s.cfg.TransferCPUPerByte,
			cpuJob{transfer: true, w: dst.idx, task: d})
		s.scheduleCPU()
		return
	}
	start := max(s.clk.now, src.outFree, dst.inFree)
	end := start + float64(nb)/s.cfg.Bandwidth
	src.outFree, dst.inFree = end, end
	s.clk.schedule(&event{at: end + s.cfg.Latency, kind: evTransferDone, w: dst.idx, task: d})
}

// transferDone: the replica is stored and announced (add-keys) if a task
// here still waits for it; then waiting tasks may become ready.
func (s *Sim) transferDone(w *worker, d int32) {
	waiters := w.fetch[d]
	delete(w.fetch, d)
	if s.cfg.Mem.ReceiveEarly {
		s.mem(w, -s.g.Tasks[d].NBytes) // the buffer becomes the stored replica, if any
	}
	stored := false
	for _, wt := range waiters {
		p := w.waiting[wt.task]
		if p == nil || p.run != wt.run {
			continue
		}
		if !stored {
			stored = true
			if !w.keys.held(d) {
				s.mem(w, w.keys.store(d, s.g.Tasks[d].NBytes))
				s.toScheduler(&scheduler.AddKeys{Base: s.base(s.clk.now + s.cfg.Latency), Worker: w.addr,
					Keys: []protocol.Key{s.g.Tasks[d].Key}})
			}
		}
		if p.missing--; p.missing == 0 {
			delete(w.waiting, wt.task)
			heap.Push(&w.ready, readyItem{order: s.g.Tasks[wt.task].Order, task: wt.task, run: wt.run})
		}
	}
	s.startTasks(w)
}

// startTasks fills free threads with the most urgent ready tasks. With
// shared cores (Config.Cores) the task's Duration is CPU work on them;
// otherwise it runs on a core of its own for Duration seconds.
func (s *Sim) startTasks(w *worker) {
	started := false
	for w.busy < w.threads {
		it, ok := w.nextReady()
		if !ok {
			break
		}
		w.busy++
		w.executing[it.task] = it.run
		t := &s.g.Tasks[it.task]
		for _, d := range t.Deps {
			s.mem(w, w.keys.touch(d)) // the task reads its inputs: spilled ones come back
		}
		s.activate(w)
		s.mem(w, s.runningBytes(t))
		work := s.taskWork(it.task, it.run) * w.speed
		if s.cpu != nil {
			s.cpu.start(s.clk.now, work, cpuJob{w: w.idx, task: it.task, run: it.run})
			started = true
			continue
		}
		s.clk.schedule(&event{at: s.clk.now + work, kind: evTaskDone, w: w.idx, task: it.task, run: it.run})
	}
	if started {
		s.scheduleCPU()
	}
}

// scheduleCPU (re)schedules the earliest finish on the shared cores; the
// events computed before this start or finish changed the rate are stale.
func (s *Sim) scheduleCPU() {
	s.cpu.gen++
	if at, ok := s.cpu.next(); ok {
		s.clk.schedule(&event{at: at, kind: evCPU, run: int64(s.cpu.gen)})
	}
}

// taskDone stores the result and reports it, unless the scheduler freed
// the task meanwhile (a cancelled run's result is dropped, as the worker
// drops it). The output is counted before the working memory is released.
// start is when the task began (its wall time is reported, as workers do:
// contention for cores included).
func (s *Sim) taskDone(w *worker, t int32, run int64, start float64) {
	w.busy--
	if r, ok := w.executing[t]; ok && r == run {
		delete(w.executing, t)
	}
	task := &s.g.Tasks[t]
	if w.live(t, run) {
		delete(w.assigned, t)
		s.mem(w, w.keys.store(t, task.NBytes))
		s.toScheduler(&scheduler.TaskFinished{Base: s.base(s.clk.now + s.cfg.Latency), Worker: w.addr,
			Key: task.Key, RunID: run, NBytes: task.NBytes, TypeName: "ndarray",
			StartStops: []scheduler.StartStop{{Action: "compute",
				Start: unixSeconds(s.at(start)), Stop: unixSeconds(s.at(s.clk.now))}}})
	}
	s.mem(w, -s.runningBytes(task))
	s.startTasks(w)
}

// stealRequest answers steal-request as a stock worker does
// (WorkerState._handle_steal_request): a task not started yet (waiting for
// its inputs, or ready) is released and reported as such; otherwise the
// worker reports what it knows (executing, memory, or None).
func (s *Sim) stealRequest(w *worker, m *protocol.Map) {
	k, _ := m.Get("key").(protocol.Key)
	sid, _ := m.Get("stimulus_id").(string)
	state := ""
	if t, ok := s.index[k]; ok {
		run, assigned := w.assigned[t]
		exRun, executing := w.executing[t]
		_, waiting := w.waiting[t]
		held := w.keys.held(t)
		switch {
		case assigned && executing && exRun == run:
			state = "executing"
		case assigned:
			state = "ready"
			if waiting {
				state = "waiting"
			}
			delete(w.assigned, t) // a stale ready-heap entry is skipped
			delete(w.waiting, t)
		case held:
			state = "memory"
		}
	}
	s.toScheduler(&scheduler.StealResponse{Base: scheduler.Base{ID: sid, At: s.at(s.clk.now + s.cfg.Latency)},
		Worker: w.addr, Key: k, State: state})
}

// detachReused returns a message the simulated worker can read after the
// engine has built later messages in m's storage (State.MessagesWritten):
// what workerMsgs reads of a compute-task or a free-keys, copied out of m.
// Other messages are never rebuilt and come back as they are.
func detachReused(m *protocol.Map) *protocol.Map {
	switch m.Get("op") {
	case "compute-task":
		d := &protocol.Map{Entries: make([]protocol.Entry, 0, 4)}
		d.Set("op", "compute-task")
		d.Set("key", m.Get("key")) // a Key's bytes never change
		if run, ok := m.Get("run_id").(int64); ok {
			d.Set("run_id", run) // boxed anew: m's box points into m
		}
		if wh, ok := m.Get("who_has").(*protocol.KeyList[[]string]); ok && wh != nil {
			c := &protocol.KeyList[[]string]{Items: make([]protocol.KeyItem[[]string], len(wh.Items))}
			for i, it := range wh.Items {
				c.Items[i] = protocol.KeyItem[[]string]{Key: it.Key, Value: append([]string(nil), it.Value...)}
			}
			d.Set("who_has", c)
		}
		return d
	case "free-keys":
		// the keys list of a one-task free-keys lies in m itself
		return protocol.NewMap("op", "free-keys", "keys", append([]protocol.Key(nil), msgKeys(m.Get("keys"))...))
	}
	return m
}
