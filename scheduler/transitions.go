package scheduler

import (
	"fmt"
	"strings"
	"time"

	"daskgo/protocol"
)

// transArgs carries the keyword arguments some transitions take in
// distributed (the TaskFinishedMsg / TaskErredMsg fields). Recommendations
// from the transitions loop carry none.
type transArgs struct {
	worker string
	ws     *WorkerState // s.workers[worker] when the caller looked it up
	// processing -> memory
	nbytes     int64
	typ        []byte
	typeName   string
	startStops []StartStop
	// thread, metadata and finished are only read by the plugin hook
	// (TransitionKwargs): the TaskFinishedMsg fields distributed passes on
	thread, metadata any
	finished         bool
	// queued -> processing: the placement co-assignment made
	placement Placement
	// -> erred
	cause                        *TaskState
	exception, traceback         any
	exceptionText, tracebackText string
}

type transitionFunc func(s *State, ts *TaskState, a *transArgs)

// transitionTable mirrors SchedulerState._TRANSITIONS_TABLE. Pairs absent
// from it go through released (see transition).
var transitionTable [numStatus][numStatus]transitionFunc

func init() {
	t := &transitionTable
	t[StatusReleased][StatusWaiting] = (*State).transitionReleasedWaiting
	t[StatusWaiting][StatusReleased] = (*State).transitionWaitingReleased
	t[StatusWaiting][StatusProcessing] = (*State).transitionWaitingProcessing
	t[StatusWaiting][StatusNoWorker] = (*State).transitionWaitingNoWorker
	t[StatusWaiting][StatusQueued] = (*State).transitionWaitingQueued
	t[StatusWaiting][StatusMemory] = (*State).transitionWaitingMemory
	t[StatusQueued][StatusReleased] = (*State).transitionQueuedReleased
	t[StatusQueued][StatusProcessing] = (*State).transitionQueuedProcessing
	t[StatusQueued][StatusErred] = (*State).transitionQueuedErred
	t[StatusProcessing][StatusReleased] = (*State).transitionProcessingReleased
	t[StatusProcessing][StatusMemory] = (*State).transitionProcessingMemory
	t[StatusProcessing][StatusErred] = (*State).transitionProcessingErred
	t[StatusNoWorker][StatusReleased] = (*State).transitionNoWorkerReleased
	t[StatusNoWorker][StatusProcessing] = (*State).transitionNoWorkerProcessing
	t[StatusNoWorker][StatusErred] = (*State).transitionNoWorkerErred
	t[StatusReleased][StatusForgotten] = (*State).transitionReleasedForgotten
	t[StatusMemory][StatusErred] = (*State).transitionMemoryErred
	t[StatusMemory][StatusForgotten] = (*State).transitionMemoryForgotten
	t[StatusErred][StatusReleased] = (*State).transitionErredReleased
	t[StatusMemory][StatusReleased] = (*State).transitionMemoryReleased
	t[StatusReleased][StatusErred] = (*State).transitionReleasedErred
}

// recs is distributed's recommendations dict: insertion-ordered, an update
// of a present key keeps its position, popitem takes the newest. The
// transitions loop depends on that LIFO order (priority-sorted bulk
// recommendations are inserted in reverse). Every recommendation is for a
// known task, so the position lives in TaskState.recIdx instead of a map:
// no hashing on the hottest path.
type recs struct {
	items []rec
}

type rec struct {
	ts *TaskState
	to Status
}

func (r *recs) set(ts *TaskState, to Status) {
	if i := int(ts.recIdx); i >= 0 && i < len(r.items) && r.items[i].ts == ts {
		r.items[i].to = to
		return
	}
	ts.recIdx = int32(len(r.items))
	r.items = append(r.items, rec{ts, to})
}

func (r *recs) get(ts *TaskState) (Status, bool) {
	if i := int(ts.recIdx); i >= 0 && i < len(r.items) && r.items[i].ts == ts {
		return r.items[i].to, true
	}
	return 0, false
}

func (r *recs) pop() (rec, bool) {
	n := len(r.items)
	if n == 0 {
		return rec{}, false
	}
	it := r.items[n-1]
	r.items[n-1] = rec{}
	r.items = r.items[:n-1]
	it.ts.recIdx = -1
	return it, true
}

// recommend queues ts -> to for the running transitions loop.
func (s *State) recommend(ts *TaskState, to Status) { s.recs.set(ts, to) }

// runTransitions mirrors SchedulerState._transitions: process
// recommendations until a steady state.
func (s *State) runTransitions() {
	for {
		r, ok := s.recs.pop()
		if !ok {
			return
		}
		s.transition(r.ts, r.to, nil)
	}
}

// transitionTo runs one transition now, then the loop; the form of
// distributed's SchedulerState.transitions({key: finish}).
func (s *State) transitionTo(ts *TaskState, to Status) {
	s.recs.set(ts, to)
	s.runTransitions()
}

// transitionWith is transitionTo with the transition's arguments (a
// placement already made, say).
func (s *State) transitionWith(ts *TaskState, to Status, a *transArgs) {
	s.transition(ts, to, a)
	s.runTransitions()
}

// transition mirrors SchedulerState._transition, then runs the work
// stealing extension's and get_task_metadata's transition hooks
// (distributed calls plugins' transition() with the state the task left
// and the one it reached).
func (s *State) transition(ts *TaskState, finish Status, a *transArgs) {
	start := ts.state
	s.transition1(ts, finish, a)
	if (start == StatusProcessing || ts.state == StatusProcessing) && s.stealOn() {
		s.stealTransition(ts, start)
	}
	if s.taskMeta != nil && ts.state != start {
		s.taskMetaTransition(ts)
	}
	if s.progress.watches != nil && ts.state != start {
		s.progressTransition(ts, start)
	}
}

// transition1 is _transition proper. A forgotten task is gone from tasks
// in distributed (tasks.get(key) is None): nothing to do.
func (s *State) transition1(ts *TaskState, finish Status, a *transArgs) {
	start := ts.state
	if start == finish || start == StatusForgotten {
		return
	}
	key := ts.Key
	s.countTransition(ts)
	s.placed = Reason{}
	if fn := transitionTable[start][finish]; fn != nil {
		fn(s, ts, a)
	} else if start != StatusReleased && finish != StatusReleased {
		before, had := s.recs.get(ts)
		toReleased := transitionTable[start][StatusReleased]
		if toReleased == nil {
			s.impossible(ts, start, finish)
			return
		}
		toReleased(s, ts, nil)
		s.shuffleTransition(ts)
		if s.hooks {
			s.hookTransition(ts, start, nil) // the inner _transition(key, "released") reports first
		}
		v := finish
		if r, ok := s.recs.get(ts); ok && (!had || r != before) {
			v = r // the inner recommendation wins, as in distributed
		}
		fn := transitionTable[StatusReleased][v]
		if fn == nil {
			s.impossible(ts, StatusReleased, v)
			return
		}
		if ts.state == StatusReleased {
			fn(s, ts, nil)
		}
		s.log.add(Transition{Key: key, From: start, To: StatusReleased, StimulusID: s.stimulusID, At: s.now})
		start = StatusReleased
		a = nil // distributed asserts a transition through released has no kwargs
	} else {
		s.impossible(ts, start, finish)
		return
	}
	// written in its slot, not built and copied there: building the 120
	// bytes, passing them by value and copying them into the ring were
	// about 4 % of the engine's instructions replaying the 100k-task tree
	// (cachegrind)
	t := s.log.slot()
	t.Key, t.From, t.To, t.StimulusID, t.At, t.Reason = key, start, ts.state, s.stimulusID, s.now, s.placed
	t.Worker = ""
	if ts.state == StatusProcessing && ts.processingOn != nil {
		t.Worker = ts.processingOn.Address
	}
	if s.hooks {
		s.hookTransition(ts, start, a)
	}
	if ts.state == StatusForgotten {
		s.forgotten++
		s.forgetGroupMaybe(ts.group)
	}
	s.shuffleTransition(ts)
}

// countTransition fails the stimulus with ts's story once it has caused
// more transitions than any cascade without a cycle can (Config's
// TransitionCounterMax): an engine bug, never peer input.
func (s *State) countTransition(ts *TaskState) {
	s.transitions++
	// the most tasks held during this stimulus: a release forgets them
	// as it goes, a graph creates them
	s.transitionTasks = max(s.transitionTasks, s.tasks.Len())
	limit := s.cfg.TransitionCounterMax
	if limit <= 0 {
		limit = 16 * (s.transitionTasks + 1024)
	}
	if s.transitions > limit {
		panic(fmt.Sprintf("scheduler bug: stimulus %s caused more than %d transitions, a recommendation cycle?\n%s",
			s.stimulusID, limit, s.storyString(ts.Key)))
	}
}

func (s *State) impossible(ts *TaskState, start, finish Status) {
	msg := fmt.Sprintf("impossible transition %s -> %s for %s (stimulus %s)", start, finish, ts.Key, s.stimulusID)
	if s.cfg.ValidateInvariants {
		panic(msg + "\n" + s.storyString(ts.Key))
	}
	s.logf(LogError, ts.Key, "", "", "%s", msg)
}

// ---- transition log ---------------------------------------------------------

// Transition is one entry of the bounded transition log: distributed's
// Transition without the recommendations, with the placement's worker and
// reason where the transition placed the task (placing it on a worker, or
// queueing it or leaving it without one).
type Transition struct {
	Key        protocol.Key
	From, To   Status
	StimulusID string
	At         time.Time
	Worker     string
	Reason     Reason
}

// transitionLog is a ring of capN entries, stored in fixed-size chunks
// allocated as the log fills: growing one slice by doubling copied (with
// write barriers) every entry again at each step, a cost paid on the
// hottest path (BenchmarkSubmitFinish).
type transitionLog struct {
	total  uint64 // transitions ever logged, for benchmarks
	chunks [][]Transition
	capN   int
	n      int // entries held (== capN once full)
	next   int // slot of the next write; the oldest entry once full
}

const logChunk = 1024

func (l *transitionLog) init(n int) {
	l.capN = n
}

func (l *transitionLog) at(i int) *Transition { return &l.chunks[i/logChunk][i%logChunk] }

func (l *transitionLog) add(t Transition) { *l.slot() = t }

// slot takes the slot of the next entry, the oldest one's once the ring is
// full, for the caller to fill in every field of.
func (l *transitionLog) slot() *Transition {
	l.total++
	i := l.next
	if i == len(l.chunks)*logChunk {
		l.chunks = append(l.chunks, make([]Transition, min(logChunk, l.capN-i)))
	}
	if l.n < l.capN {
		l.n++
	}
	if l.next++; l.next == l.capN {
		l.next = 0
	}
	return &l.chunks[i/logChunk][i%logChunk]
}

// entries returns the log oldest first.
func (l *transitionLog) entries() []Transition {
	out := make([]Transition, 0, l.n)
	start := 0
	if l.n == l.capN {
		start = l.next
	}
	for j := 0; j < l.n; j++ {
		out = append(out, *l.at((start + j) % l.capN))
	}
	return out
}

// TransitionLog returns the bounded transition log, oldest first.
func (s *State) TransitionLog() []Transition {
	return s.log.entries()
}

// StoryOf returns the logged transitions of any of keys or of any of the
// stimulus ids, oldest first: what distributed's SchedulerState.story
// documents (it matches recommendations rather than stimulus ids; the log
// here keeps no recommendations).
func (s *State) StoryOf(keys []protocol.Key, stimuli []string) []Transition {
	want := make(map[protocol.Key]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	sids := make(map[string]bool, len(stimuli))
	for _, id := range stimuli {
		sids[id] = true
	}
	var out []Transition
	for _, t := range s.log.entries() {
		if want[t.Key] || sids[t.StimulusID] {
			out = append(out, t)
		}
	}
	return out
}

// Story returns the logged transitions of key (distributed's story()).
func (s *State) Story(key protocol.Key) []Transition {
	var out []Transition
	for _, t := range s.log.entries() {
		if t.Key == key {
			out = append(out, t)
		}
	}
	return out
}

func (s *State) storyString(key protocol.Key) string {
	var b strings.Builder
	fmt.Fprintf(&b, "story of %s:\n", key)
	for _, t := range s.Story(key) {
		fmt.Fprintf(&b, "  %s -> %s  (%s)", t.From, t.To, t.StimulusID)
		if t.Worker != "" {
			fmt.Fprintf(&b, " on %s", t.Worker)
		}
		if t.Reason.Rule != RuleNone {
			fmt.Fprintf(&b, ": %s", t.Reason)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
