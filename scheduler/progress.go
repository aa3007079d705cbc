package scheduler

import (
	"strings"

	"daskgo/protocol"
)

// Progress bars: distributed.diagnostics.progress.Progress and
// MultiProgress, the scheduler plugins that ProgressBar.listen and
// MultiProgressBar.listen set up through the feed op. The outer ring
// recognises their pickled closures (through the helper, once per feed)
// and the engine runs their logic itself: no Python runs per transition.
//
// A watch is created by StartProgress (Progress.setup: the keys and what
// they depend on), changed only by transitions (Progress.transition and
// MultiProgress.transition), read by ProgressReport (the feed's function:
// {"all", "remaining", "status"} plus the error's "exception" and "key")
// and dropped by StopProgress when its feed closes. Nothing is kept while
// no feed is open: the transition hook is one nil check.
//
// Why the transitions and not a poll of the keys' states each interval:
// Progress counts a key when it goes processing -> memory, and a poll can
// miss that (an intermediate of a reduction goes processing -> memory ->
// released between two polls, and a key forgotten and resubmitted looks
// new). The hook costs a map lookup on the transitions that matter
// (BenchmarkSubmitFinishProgress: the engine's CPU per task rises from
// about 2.5 to 3.8 µs with a watch on every one of 100,000 keys, setup
// included).
//
// A watch stops, as the plugin removes itself, at its first final status:
// "finished" when every remaining key has gone processing -> memory,
// "error" when a tracked key errs or a remaining key is forgotten. After
// that transitions leave it alone, as they leave a removed plugin.

// ProgressGrouping is how a MultiProgress groups its keys.
type ProgressGrouping uint8

// Groupings.
const (
	// GroupByPrefix is dask.utils.key_split, MultiProgressBar's default.
	GroupByPrefix ProgressGrouping = iota
	// GroupByCustom is a Python function: the outer ring has the helper
	// apply it to the keys StartProgress answers and sets the groups with
	// SetProgressGroups.
	GroupByCustom
	// GroupBySpans is group_by="spans": (", ".join(span.name), span_id) of
	// each key's group (spans.go); a key outside any span, which distributed
	// puts in its ("default",) span, is in ("default", "default").
	GroupBySpans
)

// ProgressStatus is Progress.status.
type ProgressStatus uint8

// Statuses: running is Python's None.
const (
	ProgressRunning ProgressStatus = iota
	ProgressFinished
	ProgressError
)

// StartProgress is Progress.setup (MultiProgress.setup when Multi): track
// Keys and, through their dependencies, what they need (dependent_keys).
// The reply is a *ProgressStarted.
type StartProgress struct {
	Base
	Keys     []protocol.Key
	Complete bool // count the keys already computed too
	Multi    bool
	Grouping ProgressGrouping // when Multi
	ReplyTo  int64
}

// ProgressStarted answers StartProgress. Missing: some key is not known
// yet (the client's update-graph has not arrived: setup polls
// scheduler.tasks); no watch was made, ask again. AllKeys are the tracked
// keys when the grouping is GroupByCustom, in the order SetProgressGroups
// expects their groups.
type ProgressStarted struct {
	ID      int64
	Missing bool
	AllKeys []protocol.Key
}

// SetProgressGroups gives a GroupByCustom watch the group of each key of
// ProgressStarted.AllKeys, in that order (the Python function's results,
// msgpack values). A watch gone or a count that does not match is ignored.
type SetProgressGroups struct {
	Base
	ID     int64
	Groups []any
}

// StopProgress drops a watch: its feed has closed.
type StopProgress struct {
	Base
	ID int64
}

// ReplyID implements the outer ring's reply lookup.
func (x *StartProgress) ReplyID() int64 { return x.ReplyTo }

type progressWatch struct {
	multi bool
	// all is every tracked key (all_keys) and its group's index; remaining
	// are those still to compute (keys)
	all       map[protocol.Key]int32
	remaining map[protocol.Key]struct{}
	// groups are the group names by index, allN and remN the keys per group
	groups     []any
	allN, remN []int64
	status     ProgressStatus
	// extra: the error carries "exception" and "key" (Progress.extra)
	extra  bool
	errKey protocol.Key
	errExc any
	// order lists all's keys as ProgressStarted.AllKeys did, until
	// SetProgressGroups names their groups (GroupByCustom)
	order []protocol.Key
}

type progressWatches struct {
	next    int64
	watches map[int64]*progressWatch // nil while none is open
}

func (s *State) dispatchProgress(st Stimulus) {
	switch x := st.(type) {
	case *StartProgress:
		s.reply(x.ReplyTo, s.startProgress(x))
	case *SetProgressGroups:
		if w := s.progress.watches[x.ID]; w != nil && w.order != nil && len(x.Groups) == len(w.order) {
			w.setGroups(x.Groups)
		}
	case *StopProgress:
		delete(s.progress.watches, x.ID)
		if len(s.progress.watches) == 0 {
			s.progress.watches = nil
		}
	}
}

// startProgress mirrors Progress.setup and MultiProgress.setup.
func (s *State) startProgress(x *StartProgress) *ProgressStarted {
	tasks := make([]*TaskState, 0, len(x.Keys))
	for _, k := range x.Keys {
		ts := s.tasks.get(k)
		if ts == nil {
			return &ProgressStarted{Missing: true}
		}
		tasks = append(tasks, ts)
	}
	all, errors := dependentKeys(tasks, x.Complete)
	remaining := all
	if x.Complete {
		remaining, _ = dependentKeys(tasks, false)
	} else {
		remaining = make(map[protocol.Key]*TaskState, len(all))
		for k, ts := range all {
			remaining[k] = ts
		}
	}
	for _, ts := range tasks {
		all[ts.Key] = ts
	}
	for k, ts := range errors {
		if _, ok := all[k]; ok {
			remaining[k] = ts
		}
	}
	w := &progressWatch{multi: x.Multi, all: make(map[protocol.Key]int32, len(all)),
		remaining: make(map[protocol.Key]struct{}, len(remaining))}
	for k := range remaining {
		w.remaining[k] = struct{}{}
	}
	started := &ProgressStarted{}
	switch {
	case !x.Multi:
		for k := range all {
			w.all[k] = 0
		}
		w.count(1)
	case x.Grouping == GroupByPrefix:
		index := map[string]int32{}
		for k, ts := range all {
			name := ts.prefix.Name
			g, ok := index[name]
			if !ok {
				g = int32(len(w.groups))
				index[name] = g
				w.groups = append(w.groups, name)
			}
			w.all[k] = g
		}
		w.count(len(w.groups))
	case x.Grouping == GroupBySpans:
		index := map[string]int32{}
		for k, ts := range all {
			id, name := ts.group.spanID, "default"
			if sp := s.spans.byID[id]; sp != nil {
				name = strings.Join(sp.name, ", ")
			} else {
				id = "default"
			}
			g, ok := index[id]
			if !ok {
				g = int32(len(w.groups))
				index[id] = g
				w.groups = append(w.groups, []any{name, id})
			}
			w.all[k] = g
		}
		w.count(len(w.groups))
	default: // counted once SetProgressGroups names the groups
		started.AllKeys = make([]protocol.Key, 0, len(all))
		for k := range all {
			w.all[k] = 0
			started.AllKeys = append(started.AllKeys, k)
		}
		w.order = append([]protocol.Key(nil), started.AllKeys...)
	}
	if len(w.remaining) == 0 {
		w.status = ProgressFinished
	}
	for k, ts := range errors { // transition(k, None, "erred", exception=True)
		if _, ok := w.all[k]; ok {
			w.stopError(k, ts.x().exception)
		}
	}
	s.progress.next++
	if s.progress.watches == nil {
		s.progress.watches = map[int64]*progressWatch{}
	}
	s.progress.watches[s.progress.next] = w
	started.ID = s.progress.next
	return started
}

// dependentKeys mirrors distributed.diagnostics.progress.dependent_keys:
// every key these tasks need; unless complete, those in memory (and what
// only they need) and those erred are left out. errors are the tasks met
// with an exception of their own.
func dependentKeys(tasks []*TaskState, complete bool) (out, errors map[protocol.Key]*TaskState) {
	out = map[protocol.Key]*TaskState{}
	errors = map[protocol.Key]*TaskState{}
	stack := append([]*TaskState(nil), tasks...)
	for len(stack) > 0 {
		ts := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, seen := out[ts.Key]; seen {
			continue
		}
		if !complete && ts.whoHas.Len() > 0 {
			continue
		}
		if ts.x().exception != nil {
			errors[ts.Key] = ts
			if !complete {
				continue
			}
		}
		out[ts.Key] = ts
		stack = append(stack, ts.dependencies.Items()...)
	}
	return out, errors
}

// count sets the per-group totals from all and remaining.
func (w *progressWatch) count(groups int) {
	w.allN = make([]int64, groups)
	w.remN = make([]int64, groups)
	for _, g := range w.all {
		w.allN[g]++
	}
	for k := range w.remaining {
		w.remN[w.all[k]]++
	}
}

// setGroups names each key's group: groups[i] is the group of
// ProgressStarted.AllKeys[i] (w.order). Groups are told apart by their
// msgpack.
func (w *progressWatch) setGroups(groups []any) {
	index := map[string]int32{}
	w.groups = w.groups[:0]
	for i, k := range w.order {
		id, err := protocol.AppendValue(nil, groups[i])
		if err != nil {
			id = []byte(protocol.String(groups[i]))
		}
		g, ok := index[string(id)]
		if !ok {
			g = int32(len(w.groups))
			index[string(id)] = g
			w.groups = append(w.groups, groups[i])
		}
		w.all[k] = g
	}
	w.order = nil
	w.count(len(w.groups))
}

func (w *progressWatch) stopError(k protocol.Key, exc any) {
	w.status, w.extra, w.errKey, w.errExc = ProgressError, true, k, exc
}

// progressTransition is Progress.transition / MultiProgress.transition
// for every open watch still running, after ts went from start to its
// state.
func (s *State) progressTransition(ts *TaskState, start Status) {
	for _, w := range s.progress.watches {
		if w.status == ProgressRunning {
			w.transition(ts, start)
		}
	}
}

func (w *progressWatch) transition(ts *TaskState, start Status) {
	switch ts.state {
	case StatusMemory:
		if start != StatusProcessing {
			return
		}
		if _, ok := w.remaining[ts.Key]; ok {
			delete(w.remaining, ts.Key)
			if g := w.all[ts.Key]; int(g) < len(w.remN) {
				w.remN[g]--
			}
			if len(w.remaining) == 0 {
				w.status = ProgressFinished
			}
		}
	case StatusErred:
		if _, ok := w.all[ts.Key]; !ok {
			return
		}
		exc := ts.x().exception
		switch {
		case exc != nil: // the task that failed: kwargs carry its exception
			w.stopError(ts.Key, exc)
		case w.multi: // a dependent: kwargs.get("exception") is None, stop()
			w.status = ProgressFinished
		}
		// Progress reads kwargs["exception"], which a dependent's erred
		// lacks: the KeyError leaves the plugin running
	case StatusForgotten:
		if w.multi {
			if _, ok := w.all[ts.Key]; ok {
				// stop(exception=True) with key None: the status is set,
				// then reading tasks[None] raises, so no extra
				w.status = ProgressError
			}
			return
		}
		if _, ok := w.remaining[ts.Key]; ok {
			w.stopError(ts.Key, ts.x().exception)
		}
	}
}

// ProgressReport is the feed's message for watch id, as the bar's
// function builds it: {"all": n, "remaining": n, "status": None |
// "finished" | "error"} (per group {name: n} for a MultiProgress), with
// "exception" and "key" on an error. final is true once the status is
// final; ok is false for a watch that is gone. A GroupByCustom watch whose
// groups are not set yet reports empty groups.
func (s *State) ProgressReport(id int64) (msg *protocol.Map, final, ok bool) {
	w := s.progress.watches[id]
	if w == nil {
		return nil, false, false
	}
	var all, rem any
	if w.multi {
		am := &protocol.Map{Entries: make([]protocol.Entry, len(w.groups))}
		rm := &protocol.Map{Entries: make([]protocol.Entry, len(w.groups))}
		for g, name := range w.groups {
			am.Entries[g] = protocol.Entry{Key: name, Value: w.allN[g]}
			rm.Entries[g] = protocol.Entry{Key: name, Value: w.remN[g]}
		}
		all, rem = am, rm
	} else {
		all, rem = int64(len(w.all)), int64(len(w.remaining))
	}
	var status any
	switch w.status {
	case ProgressFinished:
		status = "finished"
	case ProgressError:
		status = "error"
	}
	msg = protocol.NewMap("all", all, "remaining", rem, "status", status)
	if w.status == ProgressError && w.extra {
		msg.Set("exception", w.errExc)
		msg.Set("key", w.errKey)
	}
	return msg, w.status != ProgressRunning, true
}

// ProgressWatches is the number of open watches.
func (s *State) ProgressWatches() int { return len(s.progress.watches) }
