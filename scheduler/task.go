package scheduler

import (
	"math"
	"strings"
	"time"

	"daskgo/protocol"
)

// Status is a task state, with distributed's names.
type Status uint8

// The task states of distributed's SchedulerState (TaskStateState).
const (
	StatusReleased Status = iota
	StatusWaiting
	StatusQueued
	StatusNoWorker
	StatusProcessing
	StatusMemory
	StatusErred
	StatusForgotten
	numStatus
)

var statusNames = [numStatus]string{"released", "waiting", "queued", "no-worker", "processing", "memory", "erred", "forgotten"}

func (st Status) String() string {
	if st < numStatus {
		return statusNames[st]
	}
	return "invalid"
}

// ParseStatus maps a dask state name to a Status.
func ParseStatus(name string) (Status, bool) {
	for i, n := range statusNames {
		if n == name {
			return Status(i), true
		}
	}
	return 0, false
}

// priority is distributed's (-user_priority, generation, order) tuple,
// compared lexicographically; smaller runs first.
type priority [3]float64

func (p priority) less(q priority) bool {
	for i := range p {
		if p[i] != q[i] {
			return p[i] < q[i]
		}
	}
	return false
}

// priorityWire is the priority tuple as compute-task sends it, stored in
// the message's own allocation (protocol.Int64At): the array, its items
// and the numbers behind them.
type priorityWire struct {
	list  []any
	items [3]any
	ints  [3]int64
	flts  [3]float64
}

// wireInto renders the tuple as compute-task's array of numbers into w:
// integral elements as ints (as Python sends them), others as floats.
func (p priority) wireInto(w *priorityWire) any {
	for i, f := range p {
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			w.ints[i] = int64(f)
			w.items[i] = protocol.Int64At(&w.ints[i])
		} else {
			w.flts[i] = f
			w.items[i] = protocol.Float64At(&w.flts[i])
		}
	}
	w.list = w.items[:]
	return protocol.AnysAt(&w.list)
}

// TaskState mirrors distributed.scheduler.TaskState: everything the
// scheduler knows about one key. Sets are osets so iteration is
// deterministic. Fields are grouped so that the struct packs tightly, and
// what few tasks have lives in extra: a smaller TaskState is less memory to
// zero, to scan at every GC and to pull through the cache on every
// transition (BenchmarkSubmitFinish).
//
// It is 352 bytes, a size class of its own (TestTaskStateSize): the key
// is not boxed per task (keyAny points at Key) and the kind is an index
// into the State's one copy of each name, which took it from 376 bytes in
// the 384-byte class plus a 16-byte box (a task waiting in a 200k-task
// graph cost the Go process 48 bytes less,
// scripts/bench/results/memory-per-task). The kind's index and the graph
// mark taking four bytes each, and exceptionBlame living in extra, pay for
// the second inline slot of dependencies and waitingOn (oset2.go).
type TaskState struct {
	// The fields most transitions read or write come first, so that a
	// task's hot part spans four or five cache lines of its six: the task
	// a transition touches is mostly out of the cache by then, each line a
	// miss.
	state               Status
	dataProducer        bool
	hasPriority         bool
	hasLostDependencies bool
	actor               bool
	// viaQueuePolicy: placed by decide_worker_rootish_queuing_enabled while
	// processing; such tasks never exceed a worker's slot limit.
	viaQueuePolicy bool
	// notQueueable is distributed's _queueable = False: P2P output tasks,
	// placed with the queuing-disabled policy even when they are root-ish.
	notQueueable bool
	// coRoot: a root co-assignment handed out; its outputs count in
	// WorkerState.coRootBytes (coassign_pace.go)
	coRoot bool
	recIdx int32 // index in State.recs, -1 when not recommended
	// kind is GraphTask.Kind as its index in State.kindNames (kindOf), 0
	// before a spec; only the P2P barrier check reads it
	kind uint32
	// epoch == State.graphEpoch: touched by the graph being applied
	epoch uint32
	// keyHash is the low half of keyIndexHash(Key), taken when the task is
	// made, while its key is in the cache: the key cache and the task
	// table's slots find a task's place by it without reading the key
	// again, which by then is usually a cache miss (keycache.go).
	keyHash uint32
	// Key never changes once the task is made: keyAny's values point at it.
	// Every transition reads it, for the transition log.
	Key protocol.Key

	group        *TaskGroup
	prefix       *TaskPrefix
	processingOn *WorkerState
	nbytes       int64 // -1 until measured
	runID        int64 // 0 = never sent
	priority     priority

	dependencies oset2[*TaskState] // two inline: a binary operation's or tree node's inputs (oset2.go)
	dependents   oset[*TaskState]
	waitingOn    oset2[*TaskState] // dependencies not in memory yet
	waiters      oset[*TaskState]  // dependents that still need this task
	whoWants     oset[*ClientState]
	whoHas       oset[*WorkerState]

	// slotSet, slotPos: the task's position in one has_what, one
	// wants_what, one processing set and one stealable level, so those big
	// sets need no hash index (taskset.go)
	slotSet [numRoles - 1]*taskSet
	slotPos [numRoles - 1]int32

	heapTok  uint64 // ticket of the live entry in State.queued, 0 when not in it
	queueSeq uint64 // tie-breaker: oldest first, like HeapSet

	// Read once or twice in a task's life, or only in some modes.
	runSpec     RunSpec
	annotations any        // verbatim, for compute-task (GraphTask.Annotations)
	extra       *taskExtra // nil until a rare field is set
	// coBlock/coPos: the task's place in a co-assignment run (coassign.go)
	coBlock *coBlock
	coPos   int32
	coRank  int32 // rank in its partition's priority order (coBlock.byRank)
	coFam   int32 // its family in coBlock.fams, when the block has families
	// seg/segPos: the State.tasks segment holding the task and its entry
	// there, nil when the table's slots hold it (tasktable_segment.go)
	segPos int32
	seg    *tableSegment
}

// taskExtra holds the TaskState fields that few tasks use: restrictions,
// retries, failures.
type taskExtra struct {
	// exceptionBlame: the erred task this one failed because of
	// (distributed's exception_blame); set only on the error paths
	exceptionBlame       *TaskState
	workerRestrictions   []string
	hostRestrictions     []string
	resourceRestrictions map[string]float64
	resourcesRaw         any // the annotation value, relayed in compute-task
	looseRestrictions    bool
	retries              int
	suspicious           int

	exception, traceback         any
	exceptionText, tracebackText string
	erredOn                      []string
	// unrunnableSince: when the task last went to no-worker, kept only
	// while NoWorkersTimeout is on (distributed's unrunnable[ts])
	unrunnableSince time.Time

	// shuffleSaved: a P2P shuffle pinned the task to one worker, and
	// shuffleOrigWorkers are the worker restrictions to restore (distributed
	// keeps them in annotations["shuffle_original_restrictions"]).
	shuffleSaved       bool
	shuffleOrigWorkers []string

	// metadata: the last non-empty metadata a worker's task-finished
	// carried (ts.metadata), opaque; get_task_metadata and the cluster
	// dump read it
	metadata any
}

// noExtra is what x() returns for a task without extra: read-only.
var noExtra taskExtra

// x reads the rare fields; never write through it (use ext).
func (ts *TaskState) x() *taskExtra {
	if ts.extra == nil {
		return &noExtra
	}
	return ts.extra
}

// ext returns the rare fields for writing, allocating them on first use.
func (ts *TaskState) ext() *taskExtra {
	if ts.extra == nil {
		ts.extra = &taskExtra{}
	}
	return ts.extra
}

// blame is the task's exception_blame, nil when it has none.
func (ts *TaskState) blame() *TaskState { return ts.x().exceptionBlame }

// setBlame sets exception_blame; clearing it allocates nothing.
func (ts *TaskState) setBlame(b *TaskState) {
	if b == nil {
		if ts.extra != nil {
			ts.extra.exceptionBlame = nil
		}
		return
	}
	ts.ext().exceptionBlame = b
}

// clearException forgets the task's exception (retry, forget, scatter).
func (ts *TaskState) clearException() {
	if e := ts.extra; e != nil {
		e.exceptionBlame = nil
		e.exception, e.traceback = nil, nil
		e.exceptionText, e.tracebackText = "", ""
	}
}

// keyAny is Key as an interface value for a message, stored in the task
// itself (protocol.KeyAt): boxing a string allocates, and every message
// names its key. The value keeps the task alive while it is held, so a
// record kept for long (the event log) boxes the key instead.
func (ts *TaskState) keyAny() any { return protocol.KeyAt(&ts.Key) }

// kindName is ts's kind ("Task", "Alias", ...), "" before a spec.
func (s *State) kindName(ts *TaskState) string {
	if ts.kind == 0 {
		return ""
	}
	return s.kindNames[ts.kind-1]
}

// State returns the task's current state.
func (ts *TaskState) State() Status { return ts.state }

func (s *State) setState(ts *TaskState, st Status) {
	ts.group.states[ts.state]--
	ts.group.states[st]++
	ts.prefix.states[ts.state]--
	ts.prefix.states[st]++
	ts.prefix.stateTotals[st]++
	ts.state = st
	if st == StatusMemory || st == StatusErred {
		s.doneEntered++
	}
}

func (s *State) getNBytes(ts *TaskState) int64 {
	if ts.nbytes >= 0 {
		return ts.nbytes
	}
	return s.cfg.DefaultDataSize
}

// setNBytes mirrors TaskState.set_nbytes, keeping holders' totals right.
func (s *State) setNBytes(ts *TaskState, n int64) {
	diff := n
	if ts.nbytes >= 0 {
		diff -= ts.nbytes
	} else {
		ts.group.nbytesTasks++
	}
	ts.group.nbytesTotal += diff
	for _, ws := range ts.whoHas.Items() {
		ws.nbytes += diff
		s.coRootHeld(ts, ws, diff)
	}
	ts.nbytes = n
}

func (ts *TaskState) setPriority(p priority) {
	ts.priority = p
	ts.hasPriority = true
}

func (ts *TaskState) addDependency(dts *TaskState) {
	ts.dependencies.Add(dts)
	ts.group.dependencies[dts.group] = struct{}{}
	dts.dependents.Add(ts)
}

func (ts *TaskState) isRestricted() bool {
	e := ts.extra
	return e != nil && (len(e.resourceRestrictions) > 0 || len(e.workerRestrictions) > 0 || len(e.hostRestrictions) > 0)
}

// TaskPrefix mirrors distributed's TaskPrefix: all tasks sharing key_split,
// carrying the duration estimate used for occupancy.
type TaskPrefix struct {
	Name            string
	durationAverage float64 // seconds, EMA of compute startstops; < 0 unknown
	maxExecTime     float64
	suspicious      int
	states          [numStatus]int
	// stateTotals counts every entry into each state (state_counts);
	// computeSeconds and transferSeconds sum the durations its tasks
	// reported (all_durations): the dashboard's and /metrics' figures.
	stateTotals                     [numStatus]int64
	computeSeconds, transferSeconds float64
	// fast: default-task-durations lists the prefix at 1 ms or less, so its
	// tasks are never stolen (stealing.fast_tasks).
	fast bool
	// stealUnknown holds tasks put in a stealable set while the prefix had
	// no measured duration; the prefix's first finished task re-levels
	// them (stealing.py's unknown_durations). It may hold tasks that have
	// left processing since, and duplicates; see addStealUnknown.
	stealUnknown []*TaskState
}

func (tp *TaskPrefix) addExecTime(d float64) {
	if d > tp.maxExecTime {
		tp.maxExecTime = d
	}
	if d > 2*tp.durationAverage {
		tp.durationAverage = -1
	}
}

func (tp *TaskPrefix) addDuration(action string, start, stop float64) {
	us := math.Max(math.Round((stop-start)*1e6), 0)
	switch action {
	case "compute":
		tp.computeSeconds += us / 1e6
	case "transfer":
		tp.transferSeconds += us / 1e6
		return
	default:
		return
	}
	d := us / 1e6
	if tp.durationAverage < 0 {
		tp.durationAverage = d
	} else {
		tp.durationAverage = 0.5*d + 0.5*tp.durationAverage
	}
}

// TaskGroup mirrors distributed's TaskGroup: tasks sharing key_split_group.
// Groups drive root-ish detection.
type TaskGroup struct {
	Name         string
	prefix       *TaskPrefix
	size         int // every task ever added while the group lived (len(tg))
	states       [numStatus]int
	dependencies map[*TaskGroup]struct{}
	nbytesTotal  int64
	nbytesTasks  int64 // tasks whose nbytes nbytesTotal counts: their mean is nbytesTotal / nbytesTasks
	// types is TaskGroup.types, the set of its results' type names;
	// lastType the one added last, which a group's tasks nearly always
	// repeat: the set is not probed again for it, once per finished task
	types    map[string]struct{}
	lastType string

	// co-assignment state of decide_worker_rootish_queuing_disabled; kept
	// for the policy hook (place_rootish.go).
	lastWorker          *WorkerState
	lastWorkerTasksLeft int

	// spanID: the span the group is in (spans.go), "" for none; spanAny is
	// it boxed once for compute-task
	spanID  string
	spanAny any
}

func (s *State) newTask(key protocol.Key, spec *GraphTask, st Status) *TaskState {
	h := keyIndexHash(key)
	ts := s.makeTask(key, uint32(h), spec, st)
	s.tasks.putHashed(ts, h)
	return ts
}

// makeTask is newTask without entering the task in State.tasks; h is
// uint32(keyIndexHash(key)).
func (s *State) makeTask(key protocol.Key, h uint32, spec *GraphTask, st Status) *TaskState {
	str, plain := keyStr(key)
	head, tuple := "", false
	if !plain {
		head, tuple = tupleHeadStr(key)
	}
	var kv any = str
	var gname string
	switch {
	case plain:
		gname = keySplitGroupString(str)
	case tuple: // key_split_group of a tuple is its first element
		gname = head
	default:
		kv = key.Value()
		gname = keySplitGroupValue(kv)
	}
	tg := s.groups[gname]
	if tg == nil {
		// names may be substrings of the key: clone them so a long-lived
		// group or prefix does not pin the key's memory
		var pname string
		if tuple {
			pname = keySplitString(head) // key_split of a tuple splits its first element
		} else {
			pname = keySplitValue(kv)
		}
		tp := s.prefixes[pname]
		if tp == nil {
			tp = &TaskPrefix{Name: strings.Clone(pname), durationAverage: -1, maxExecTime: -1}
			if d, ok := s.cfg.DefaultTaskDurations[tp.Name]; ok {
				// TaskPrefix.__init__ takes default-task-durations
				tp.durationAverage = d.Seconds()
				tp.fast = d <= time.Millisecond
			}
			s.prefixes[tp.Name] = tp
		}
		tg = &TaskGroup{Name: strings.Clone(gname), prefix: tp, dependencies: map[*TaskGroup]struct{}{}}
		s.groups[tg.Name] = tg
	}
	ts := &TaskState{Key: key, state: st, group: tg,
		prefix: tg.prefix, nbytes: -1, recIdx: -1, keyHash: h}
	tg.size++
	tg.states[st]++
	tg.prefix.states[st]++
	if spec != nil {
		s.setSpec(ts, spec)
	}
	return ts
}

func (s *State) setSpec(ts *TaskState, spec *GraphTask) {
	ts.runSpec = spec.RunSpec
	ts.kind = s.kindOf(spec.Kind)
	ts.dataProducer = spec.DataProducer
}

// kindOf interns a kind name: the State holds one copy of each (a graph
// has a handful), its tasks the copy's index plus one in kindNames, four
// bytes where a pointer took eight. The last one found is checked first,
// since a graph's tasks mostly share their kind.
func (s *State) kindOf(name string) uint32 {
	if k := s.lastKind; k != 0 && s.kindNames[k-1] == name {
		return k
	}
	k, ok := s.kinds[name]
	if !ok {
		if s.kinds == nil {
			s.kinds = map[string]uint32{}
		}
		s.kindNames = append(s.kindNames, strings.Clone(name))
		k = uint32(len(s.kindNames))
		s.kinds[s.kindNames[k-1]] = k
	}
	s.lastKind = k
	return k
}

// forgetGroupMaybe drops a group whose tasks are all forgotten, as
// SchedulerState._transition does.
func (s *State) forgetGroupMaybe(tg *TaskGroup) {
	for st, n := range tg.states {
		if n != 0 && Status(st) != StatusForgotten {
			return
		}
	}
	if s.groups[tg.Name] == tg {
		delete(s.groups, tg.Name)
	}
}
