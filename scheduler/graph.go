package scheduler

import (
	"math"
	"slices"
	"sort"
	"time"

	"daskgo/protocol"
)

// Graph submission: update-graph goes to the materializer helper; its
// answer (GraphMaterialized) is applied as Scheduler.update_graph does after
// materialization (distributed/scheduler.py: Scheduler.update_graph from
// _find_lost_dependencies on, and _create_taskstate_from_graph). While a client's graph
// is in the helper, its later stream stimuli are held, so that e.g. a
// client-releases-keys never overtakes the graph that creates the keys.

// pendingGraph is an update-graph waiting for the materializer.
type pendingGraph struct {
	id    int64
	ug    *UpdateGraph
	start time.Time
}

// PendingGraphs is the number of update-graphs in the materializer.
func (s *State) PendingGraphs() int { return len(s.pending) }

func (s *State) handleUpdateGraph(x *UpdateGraph) {
	s.helperIDs++
	p := &pendingGraph{id: s.helperIDs, ug: x, start: x.At}
	s.pending[x.Client] = p
	s.out.Helper = append(s.out.Helper, HelperRequest{ID: p.id, Client: x.Client, Keys: x.Keys, Msg: x.Payload})
}

func (s *State) handleGraphMaterialized(x *GraphMaterialized) {
	p := s.pending[x.Client]
	if p == nil || p.id != x.RequestID {
		s.logf(LogWarn, "", "", x.Client, "graph materialized for unknown request %d ignored", x.RequestID)
		return
	}
	delete(s.pending, x.Client)
	if x.Err != nil {
		for _, k := range p.ug.Keys {
			s.report(msgTaskErred(k, x.Err.Exception, x.Err.Traceback), s.tasks.get(k), x.Client)
		}
	} else {
		if s.taskMeta != nil {
			s.taskMetaGraph(p.ug.Keys)
		}
		s.applyGraph(p, x.Tasks, x.Keys)
	}
	s.drainHeld(x.Client)
}

// drainHeld replays the client's held stimuli in order until one of them
// sends another graph to the helper.
func (s *State) drainHeld(client string) {
	for len(s.held[client]) > 0 && s.pending[client] == nil {
		st := s.held[client][0]
		s.held[client] = s.held[client][1:]
		b := st.base()
		s.now, s.stimulusID = b.At, b.ID
		s.apply(st)
	}
	if len(s.held[client]) == 0 {
		delete(s.held, client)
	}
}

// applyGraph is update_graph after materialization.
func (s *State) applyGraph(p *pendingGraph, tasks []GraphTask, keys *GraphKeys) {
	g := graphIndexFor(tasks, keys)
	if s.hasLostDependencies(g, p.ug.Keys) {
		s.report(protocol.NewMap("op", "cancelled-keys", "keys", protocol.Set(keysAny(p.ug.Keys)),
			"reason", "lost dependencies", "msg", nil), nil, p.ug.Client)
		s.clientReleasesKeys(p.ug.Keys, p.ug.Client)
		return
	}
	if len(tasks) >= segmentMin {
		// the graph's new tasks are held through its own index
		// (tasktable_segment.go); an empty table frees its old slots
		if s.tasks.Len() == 0 {
			s.tasks.reset()
		}
		g.seg = s.tasks.adoptSegment(g.index, len(tasks))
	} else if s.tasks.Len() == 0 {
		// size the table for the graph: no growing while its tasks are
		// created (this also frees an old, bigger one)
		s.tasks.sizeFor(len(tasks))
	}
	s.nextGraphEpoch()
	gen := s.graphGeneration(p)
	wanted, touched, existing := s.generateTaskStates(p, g, gen)
	if g.seg != nil {
		s.tasks.settle(g.seg)
	}
	// reached memory or erred since the tasks were made: until one does,
	// only the tasks that existed before the graph can be in either
	done := s.doneEntered
	s.clientDesiresTasks(wanted, p.ug.Client)
	s.markActors(p)

	released := make([]*TaskState, 0, len(wanted))
	s.nextGraphEpoch() // reuse the mark for "already listed"
	for _, ts := range wanted {
		if ts.state == StatusReleased && ts.epoch != s.graphEpoch {
			ts.epoch = s.graphEpoch
			released = append(released, ts)
		}
	}
	sort.SliceStable(released, func(i, j int) bool { return released[j].priority.less(released[i].priority) })
	s.recs.items = slices.Grow(s.recs.items, len(released))
	for _, ts := range released {
		s.recommend(ts, StatusWaiting)
	}
	if blameReachable(existing) {
		for _, ts := range touched {
			for _, dts := range ts.dependencies.Items() {
				if dts.blame() != nil {
					ts.setBlame(dts.blame())
					s.recommend(ts, StatusErred)
					break
				}
			}
		}
	}
	if s.hookMask.Has(HookUpdateGraph) {
		s.hookUpdateGraph(p.ug.Client, p.ug.Keys, touched)
	}
	s.runTransitions()
	report := existing
	if s.doneEntered != done {
		report = touched
	}
	for _, ts := range report {
		if ts.state == StatusMemory || ts.state == StatusErred {
			s.reportOnKey(ts, p.ug.Client)
		}
	}
}

// blameReachable reports whether a task of the graph can depend on one
// that carries exception_blame. The graph's new tasks carry none, and a
// new task's dependencies are new or among the tasks that existed (the
// walk reaches them); so only an existing task or one of its dependencies
// can. Checking those few spares the common graph a pass over every task
// and its dependencies' rare fields, each a cache miss on a big graph.
func blameReachable(existing []*TaskState) bool {
	for _, ts := range existing {
		if ts.blame() != nil {
			return true
		}
		for _, dts := range ts.dependencies.Items() {
			if dts.blame() != nil {
				return true
			}
		}
	}
	return false
}

func keysAny(ks []protocol.Key) []any {
	out := make([]any, len(ks))
	for i, k := range ks {
		out[i] = k
	}
	return out
}

// hasLostDependencies mirrors Scheduler._find_lost_dependencies: a key
// reachable from keys that is neither in the graph nor known. On the way it
// records the entries of keys (graphIndex.keyIdx).
func (s *State) hasLostDependencies(g *graphIndex, keys []protocol.Key) bool {
	g.keyIdx = make([]int32, len(keys))
	work := make([]int32, 0, len(keys))
	for n, k := range keys {
		i := g.Lookup(k)
		g.keyIdx[n] = i
		if i >= 0 {
			work = append(work, i)
		} else if s.tasks.get(k) == nil {
			return true
		}
	}
	if g.external == 0 {
		return false // every dependency is in the graph
	}
	seen := make([]bool, len(g.tasks))
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		if seen[i] {
			continue
		}
		seen[i] = true
		for n, j := range g.Deps(int(i)) {
			if j >= 0 {
				if !seen[j] {
					work = append(work, j)
				}
			} else if s.tasks.get(g.tasks[i].Deps[n]) == nil {
				return true
			}
		}
	}
	return false
}

// keyRef is a key with its graph entry (-1: not in the graph).
type keyRef struct {
	k protocol.Key
	i int32
}

// generateTaskStates mirrors SchedulerState._generate_taskstates: get or
// create the tasks reachable from the graph's keys, then wire dependency
// edges. It returns the requested tasks, every touched task, and those of
// the touched that existed before the graph (in the order touched). g must
// have been through hasLostDependencies.
//
// A new task gets its annotations, and every task of the graph without a
// priority its priority (generation gen), when the walk reaches it, which
// update_graph does in two later passes over the graph
// (_apply_annotations, _set_priorities): each sets only the task's own
// fields and the walk reads neither, so doing it while the task is still
// in the cache gives the same state without two more passes over a big
// graph's tasks, each a cache miss per task.
func (s *State) generateTaskStates(p *pendingGraph, g *graphIndex, gen float64) (wanted, touched, existing []*TaskState) {
	keys := p.ug.Keys
	stack := make([]keyRef, len(keys))
	for n, k := range keys {
		stack[n] = keyRef{k, g.keyIdx[n]}
	}
	nkeys := len(stack)
	fresh0 := s.tasks.Len() == 0
	collisions := map[protocol.Key]bool{}
	// sized for the common graph: every key requested and new
	wanted = make([]*TaskState, 0, len(keys))
	touched = make([]*TaskState, 0, len(g.tasks))
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		k, i := r.k, r.i
		stack = stack[:len(stack)-1]
		requested := len(stack) < nkeys // popped from the initial keys
		if requested {
			nkeys--
		}
		inGraph := i >= 0
		var spec *GraphTask
		var ts *TaskState
		if inGraph {
			spec = &g.tasks[i]
			ts = g.ts[i] // == s.tasks.get(k) once generated here
		}
		if ts == nil && !fresh0 {
			// a fresh scheduler (no task before this graph) knows no key
			// the graph does not create: skip a lookup per task
			ts = s.tasks.get(k)
		}
		made := false
		switch {
		case ts == nil && spec == nil:
			continue // unreachable: lost dependencies were checked
		case ts == nil && g.seg != nil && inGraph:
			ts = s.makeTask(k, g.hash[i], spec, StatusReleased)
			s.tasks.adopt(g.seg, i, ts)
			made = true
		case ts == nil:
			ts = s.newTask(k, spec, StatusReleased)
			made = true
		case ts.epoch == s.graphEpoch:
			if requested {
				wanted = append(wanted, ts)
			}
			continue
		case ts.runSpec == nil && spec != nil:
			s.setSpec(ts, spec)
		case spec != nil && !sameDeps(ts, spec):
			collisions[k] = true
			s.logf(LogWarn, k, "", "", "different run_spec for key %s between two update_graph calls; keeping the first", k)
		}
		if made {
			s.applyAnnotations(ts, spec)
		} else {
			existing = append(existing, ts)
		}
		if inGraph {
			if !ts.hasPriority {
				s.setPriority(p, ts, spec, gen)
			}
			g.ts[i] = ts
		}
		ts.epoch = s.graphEpoch
		touched = append(touched, ts)
		if requested {
			wanted = append(wanted, ts)
		}
		if spec != nil {
			for n, j := range g.Deps(int(i)) {
				stack = append(stack, keyRef{spec.Deps[n], j})
			}
		}
	}
	for i := range g.tasks { // graph order, not map order: deterministic edges
		ts := g.ts[i]
		if ts == nil || (len(collisions) > 0 && collisions[g.tasks[i].Key]) {
			continue
		}
		// the entry's GraphTask is read only for a dependency outside the
		// graph: the resolved entries already name the others' tasks
		for n, j := range g.Deps(i) {
			var dts *TaskState
			if j >= 0 && g.ts[j] != nil {
				dts = g.ts[j]
			} else {
				dts = s.tasks.get(g.tasks[i].Deps[n])
			}
			if dts == nil {
				s.logf(LogWarn, g.tasks[i].Key, "", "", "dependency %s of %s is unknown; edge dropped", g.tasks[i].Deps[n], g.tasks[i].Key)
				continue
			}
			if dts == ts {
				s.logf(LogWarn, g.tasks[i].Key, "", "", "task %s depends on itself; edge dropped", g.tasks[i].Key)
				continue
			}
			ts.addDependency(dts)
		}
	}
	return wanted, touched, existing
}

func sameDeps(ts *TaskState, spec *GraphTask) bool {
	want := map[protocol.Key]bool{}
	for _, d := range spec.Deps {
		want[d] = true
	}
	if len(want) != ts.dependencies.Len() {
		return false
	}
	for _, dts := range ts.dependencies.Items() {
		if !want[dts.Key] {
			return false
		}
	}
	return true
}

// graphGeneration is the generation SchedulerState._set_priorities gives
// the graph's tasks: the submitting task's priority nudged ahead, or a new
// generation once fifo_timeout has passed since the last one.
func (s *State) graphGeneration(p *pendingGraph) float64 {
	fifo := p.ug.FifoTimeout.Seconds()
	start := float64(p.start.UnixNano()) / 1e9
	var sts *TaskState
	if p.ug.SubmittingTask != nil {
		sts = s.tasks.get(*p.ug.SubmittingTask)
	}
	switch {
	case sts != nil && sts.hasPriority:
		return sts.priority[0] - 0.01
	case p.ug.SubmittingTask != nil:
		return s.generation // super-task already cleaned up
	case s.lastTime+fifo < start:
		s.generation++
		s.lastTime = start
	}
	return s.generation
}

// setPriority is _set_priorities for one task of the graph, from its
// entry gt: (-user priority, generation, dask.order's position).
func (s *State) setPriority(p *pendingGraph, ts *TaskState, gt *GraphTask, gen float64) {
	prio := p.ug.UserPriority
	if a := gt.Annotations; a != nil && a.HasPriority {
		prio = a.Priority
	}
	ts.setPriority(priority{-prio, gen, float64(gt.Order)})
}

// markActors applies update-graph's actors field: true = every requested
// key, or a list of keys.
func (s *State) markActors(p *pendingGraph) {
	keys := p.ug.ActorKeys
	if p.ug.AllActors {
		keys = p.ug.Keys
	}
	for _, k := range keys {
		if ts := s.tasks.get(k); ts != nil {
			ts.actor = true
		}
	}
}

// nextGraphEpoch starts a new mark for TaskState.epoch. The mark is four
// bytes (it shares a word with the task's kind); when it would wrap, every
// task's mark is cleared first, so that no task left over from four
// billion marks ago reads as touched by this one.
func (s *State) nextGraphEpoch() {
	if s.graphEpoch == math.MaxUint32 {
		for _, ts := range s.tasks.all() {
			ts.epoch = 0
		}
		s.graphEpoch = 0
	}
	s.graphEpoch++
}
