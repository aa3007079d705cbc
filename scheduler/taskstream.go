package scheduler

import (
	"sort"

	"daskgo/protocol"
)

// The task stream: distributed.diagnostics.task_stream.TaskStreamPlugin,
// which Client.get_task_stream and the get_task_stream context manager
// read through the get_task_stream and get_task_stream_index RPCs. The
// plugin appends the task-finished/task-erred message of every
// processing -> memory/erred transition to a bounded deque and counts the
// appends; the count is the cursor the context manager uses.
//
// Like distributed's Scheduler._task_stream_plugin, the plugin exists, and
// records, only from the first get_task_stream or get_task_stream_index
// call on (StartTaskStream): a scheduler nobody asks for a task stream
// keeps no record per task (on 100k tasks that was ~50 MiB and a copy of
// every finished task's startstops).

// TaskStreamRecord is one finished or erred run of a task, as the worker
// reported it.
type TaskStreamRecord struct {
	Key        protocol.Key
	Worker     string
	Status     string // "OK" or "error", as TaskFinishedMsg/TaskErredMsg.to_dict
	NBytes     int64
	TypeName   string
	Thread     any // int or None, as the worker sent it
	RunID      int64
	StimulusID string
	StartStops []StartStop
	// erred runs only
	ExceptionText, TracebackText string
}

// taskStream is the plugin's deque and whether the plugin exists
// (StartTaskStream was handled).
type taskStream struct {
	on bool
	ring[TaskStreamRecord]
}

// recordRun appends the run that just left processing (TaskStreamPlugin
// .transition asserts startstops; a run without any is not recorded).
// Callers check stream.on first, so that a scheduler without the plugin
// does not even build the record of each finished task.
func (s *State) recordRun(r TaskStreamRecord) {
	if len(r.StartStops) == 0 {
		return
	}
	r.StimulusID = s.stimulusID
	s.stream.add(r)
}

// TaskStreamIndex is TaskStreamPlugin.index (Scheduler.get_task_stream_index).
func (s *State) TaskStreamIndex() int { return int(s.stream.total) }

// TaskStreamQuery is get_task_stream's arguments; nil means not given.
// Start and Stop are unix times (the outer ring resolves "10s" strings
// against its clock).
type TaskStreamQuery struct {
	Start, Stop *float64
	Count       *int
	StartIndex  *int
}

// TaskStream mirrors TaskStreamPlugin.collect: by cursor (StartIndex), or
// by the latest stop time of each record (bisected, as the plugin does:
// records arrive in roughly increasing stop order) and a count.
func (s *State) TaskStream(q TaskStreamQuery) []*protocol.Map {
	n := s.stream.len()
	if q.StartIndex != nil {
		from := *q.StartIndex - (int(s.stream.total) - n)
		return s.taskStreamRange(clamp(from, 0, n), n)
	}
	var start, stop *int
	if q.Start != nil {
		v := s.bisectStop(*q.Start)
		start = &v
	}
	if q.Stop != nil {
		v := s.bisectStop(*q.Stop)
		stop = &v
	}
	if q.Count != nil {
		c := *q.Count
		switch {
		case start == nil && stop == nil:
			e, b := n, n-c
			start, stop = &b, &e
		case start == nil:
			b := *stop - c
			start = &b
		case stop == nil:
			e := *start + c
			stop = &e
		}
	}
	from, to := 0, n
	if start != nil {
		from = max(0, *start)
	}
	if stop != nil {
		to = min(*stop, n)
	}
	return s.taskStreamRange(from, to)
}

func (s *State) bisectStop(target float64) int {
	return sort.Search(s.stream.len(), func(i int) bool { return lastStop(s.stream.at(i)) >= target })
}

func lastStop(r *TaskStreamRecord) float64 {
	m := 0.0
	for i, ss := range r.StartStops {
		if i == 0 || ss.Stop > m {
			m = ss.Stop
		}
	}
	return m
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

func (s *State) taskStreamRange(from, to int) []*protocol.Map {
	out := make([]*protocol.Map, 0, max(0, to-from))
	for i := from; i < to; i++ {
		out = append(out, s.stream.at(i).wire())
	}
	return out
}

// wire is the record as the plugin keeps it: the worker's message
// (minus op) with key and worker added.
func (r *TaskStreamRecord) wire() *protocol.Map {
	ss := make([]any, len(r.StartStops))
	for i, x := range r.StartStops {
		m := protocol.NewMap("action", x.Action, "start", x.Start, "stop", x.Stop)
		if x.Source != "" {
			m.Set("source", x.Source)
		}
		ss[i] = m
	}
	m := protocol.NewMap("key", r.Key, "worker", r.Worker, "status", r.Status, "thread", r.Thread,
		"startstops", ss, "run_id", r.RunID, "stimulus_id", r.StimulusID)
	if r.Status == "OK" {
		m.Set("nbytes", r.NBytes)
		m.Set("typename", r.TypeName)
	} else {
		m.Set("exception_text", r.ExceptionText)
		m.Set("traceback_text", r.TracebackText)
	}
	return m
}
