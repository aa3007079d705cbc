package scheduler

import (
	"fmt"
	"strconv"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler/coord"
)

// State is the scheduler engine: distributed's SchedulerState as a pure
// state machine. Handle is its only mutator; every other method is a
// read-only accessor. It is not safe for concurrent use: the outer ring
// calls it only under its lock (scheduler/server/doc.go).
type State struct {
	cfg Config

	tasks    taskTable
	prefixes map[string]*TaskPrefix
	groups   map[string]*TaskGroup
	// kinds: every task kind name seen, one copy each in kindNames, by its
	// index plus one (kindOf); lastKind the one found last
	kinds     map[string]uint32
	kindNames []string
	lastKind  uint32

	workers     map[string]*WorkerState
	workerOrder oset[*WorkerState] // registration order, as distributed's dict
	aliases     map[string]string  // worker name -> address
	hosts       map[string]*oset[*WorkerState]
	resources   map[string]map[string]float64 // resource -> address -> supplied

	running       workerSet
	idle          workerSet
	idleTaskCount workerSet
	saturated     workerSet

	clients map[string]*ClientState
	// clientOrder lists clients by registration, for "to all clients".
	clientOrder oset[*ClientState]

	queued     taskHeap
	queueSeq   uint64
	slots      ixheap[*slotEntry] // idle_task_count by load (withhold_queue.go)
	co         coAssign           // withholding with co-assignment
	unrunnable oset[*TaskState]
	// replicated: tasks in memory on more than one worker (distributed's
	// replicated_tasks), for the active memory manager (amm.go)
	replicated taskSet

	totalNThreads     int
	totalMemory       int64
	prefixCountGlobal []prefixCount
	networkOccGlobal  int64
	bandwidth         float64
	nTasks            int64

	generation float64
	lastTime   float64
	// doneEntered counts transitions into memory or erred (setState): a
	// graph's new tasks can be in neither until it moves (applyGraph)
	doneEntered uint64

	runIDs     int64    // TaskState._run_id_iterator
	runs       runIndex // processing tasks by run id (runindex.go)
	recent     keyCache // tasks that last reached memory, by key (keycache.go)
	graphEpoch uint32
	helperIDs  int64
	pending    map[string]*pendingGraph // client -> update-graph in the materializer
	held       map[string][]Stimulus    // client -> stimuli held behind it
	shuffles   shuffleExt               // P2P shuffle runs (shuffle.go)
	steal      stealExt                 // work stealing (steal.go)

	// coordination extensions (scheduler/coord, coordination.go)
	coord *coord.Coordinator

	log transitionLog

	stream taskStream // TaskStreamPlugin's records (taskstream.go)
	// hookMask: the scheduler plugin hooks listened to; hooks: transition
	// among them, tested on every transition (hooks.go)
	hookMask HookMask
	hooks    bool
	// dashStream is the dashboard's task stream: the last runs, compact
	// (no startstops, no key), kept only with Config.DashboardStreamLength;
	// the client-facing stream (taskstream.go) records only once a client
	// asks for it, as distributed's plugin does.
	dashStream ring[StreamRun]
	forgotten  int64 // tasks forgotten since the start
	// noWorkersSince: _no_workers_since, zero for None (noworkers.go)
	noWorkersSince time.Time
	// idleSince, idleTransitions: check_idle's clock (cluster_adapt.go)
	idleSince       time.Time
	idleTransitions uint64
	tasksDone       int64   // tasks finished since the start
	broker          broker  // the event log per topic (eventlog.go)
	plugins         plugins // worker and nanny plugins (plugins.go)
	// diagnostics, nil while none runs: MemorySampler series
	// (memsampler.go) and get_task_metadata collections (taskmetadata.go)
	samplers    map[string]*memSampler
	taskMeta    map[string]*taskMetaCollection
	taskMetaGen int64
	progress    progressWatches // progress bars' feeds (progress.go)
	spans       spanRegistry    // span metrics (spans.go)
	// ammRunning: the active memory manager runs on AMMTick
	// (amm_control.go; amm_handler start/stop)
	ammRunning bool

	// per-Handle context
	out    *Outbox
	outBuf Outbox  // what out points at during Handle
	pool   outPool // lists and slices handed back by Recycle
	// outSeq numbers the Handles, for WorkerState.outSeq; outIdx indexes
	// the Handle's peer lists when they grow long (outbox.go)
	outSeq      uint64
	outIdx      outIndex
	reuse       messageReuse // written messages to build in again (message_reuse.go)
	finArgs     transArgs
	scratchTS   []*TaskState       // addToMemory's sorted dependents
	scratchWS   oset[*WorkerState] // decideWorker's candidates
	recs        recs
	placed      Reason // why the running transition placed its task as it did (logged with it)
	transitions int    // transitions this Handle caused (countTransition)
	// transitionTasks: the most tasks held during this Handle (countTransition)
	transitionTasks int
	now             time.Time
	stimulusID      string
	computeSID      any // "compute-task-<now>", rebuilt when the clock moves
	sidBoxed        any
	sidBoxedFor     string
	computeSIDAt    time.Time
}

// New builds an empty engine. cfg is validated (defaults filled); an invalid
// cfg panics, since it is a programming error of the caller.
func New(cfg Config) *State {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	s := &State{
		cfg:       cfg,
		prefixes:  map[string]*TaskPrefix{},
		groups:    map[string]*TaskGroup{},
		workers:   map[string]*WorkerState{},
		aliases:   map[string]string{},
		hosts:     map[string]*oset[*WorkerState]{},
		resources: map[string]map[string]float64{},
		clients:   map[string]*ClientState{},
		bandwidth: cfg.Bandwidth,
		pending:   map[string]*pendingGraph{},
		held:      map[string][]Stimulus{},
		slots:     newSlotHeap(),
		co:        newCoAssign(),
	}
	s.running.role, s.idle.role, s.idleTaskCount.role, s.saturated.role = roleRunning, roleIdle, roleIdleTaskCount, roleSaturated
	s.replicated.role = roleReplicated
	s.log.init(cfg.TransitionLogSize)
	s.stream.max = cfg.TaskStreamLength
	s.dashStream.max = cfg.DashboardStreamLength
	s.broker = newBroker(cfg.EventLogLength)
	s.coord = coord.New(coordHost{s}, cfg.LeaseValidationInterval)
	s.idleSince = cfg.StartedAt
	s.ammRunning = !cfg.NoActiveMemoryManager
	s.addClientState(fireAndForget)
	return s
}

// Config returns the validated configuration.
func (s *State) Config() Config { return s.cfg }

// Handle applies one stimulus and returns everything it wants sent. It is
// synchronous and deterministic: the same stimuli give the same outboxes.
func (s *State) Handle(st Stimulus) Outbox {
	if st == nil {
		return Outbox{}
	}
	// fill s.outBuf, not a local: s.out points at it, and a local would
	// escape to the heap on every call
	s.outBuf = Outbox{}
	s.begin(st.base(), &s.outBuf)
	s.apply(st)
	s.end()
	out := s.outBuf
	s.outBuf = Outbox{}
	return out
}

func (s *State) begin(b *Base, out *Outbox) {
	s.out = out
	s.outSeq++
	s.outIdx = outIndex{}
	s.transitions, s.transitionTasks = 0, s.tasks.Len()
	s.now = b.At
	s.stimulusID = b.ID
}

func (s *State) end() {
	// Any stimulus may have opened a slot (a release, a reschedule, a
	// removed task); distributed only checks after some of them, leaving
	// queued work idle until the next task-finished. Checking always keeps
	// "queued implies no free slot" an invariant.
	s.sid("stimulus")
	s.queueSlotsMaybeOpened()
	s.endShuffleStimulus()
	if s.cfg.ValidateInvariants {
		s.validateState()
	}
	s.out = nil
}

// unixNow is the logical time as Python's time().
func (s *State) unixNow() float64 {
	if s.now.IsZero() {
		return 0
	}
	return float64(s.now.UnixNano()) / 1e9
}

func (s *State) sid(prefix string) string {
	if s.stimulusID != "" {
		return s.stimulusID
	}
	s.stimulusID = prefix + "-" + strconv.FormatFloat(s.unixNow(), 'f', -1, 64)
	return s.stimulusID
}

// apply handles st now, or holds it behind its client's graph (to be
// applied when the graph lands), and answers a Replier it neither answered
// nor parked (Replier).
func (s *State) apply(st Stimulus) {
	if c := heldClient(st); c != "" && s.pending[c] != nil {
		s.held[c] = append(s.held[c], st)
		return
	}
	s.dispatch(st)
	if r, ok := st.(Replier); ok {
		if id := r.ReplyID(); id != 0 && !s.out.answers(id) && !s.Parked(id) {
			s.reply(id, nil)
		}
	}
}

func (s *State) dispatch(st Stimulus) {
	switch x := st.(type) {
	case *AddWorker:
		s.sid("add-worker")
		s.handleAddWorker(x)
	case *WorkerStatusChange:
		s.sid("worker-status-change")
		s.handleWorkerStatusChange(x)
	case *RemoveWorker:
		s.sid("remove-worker")
		s.handleRemoveWorker(x.Worker, x.Expected, x.Close, x.Reason)
	case *WorkerHeartbeat:
		s.handleHeartbeat(x)
	case *TaskFinished:
		s.sid("task-finished")
		s.handleTaskFinished(x)
	case *TaskErred:
		s.sid("task-erred")
		s.handleTaskErred(x)
	case *ReleaseWorkerData:
		s.sid("release-worker-data")
		s.handleReleaseWorkerData(x)
	case *AddKeys:
		s.sid("redundant-replicas")
		s.addKeys(x.Worker, x.Keys)
	case *LongRunning:
		s.sid("long-running")
		s.handleLongRunning(x)
	case *Reschedule:
		s.sid("reschedule")
		s.handleReschedule(x)
	case *RequestRefreshWhoHas:
		s.sid("request-refresh-who-has")
		s.handleRefreshWhoHas(x)
	case *ConfigChange:
		s.sid("config-change")
		s.handleConfigChange(x)
	case *ShuffleGetOrCreate, *ShuffleGet, *ShuffleBarrier, *ShuffleRestrictTask, *ShuffleRunCreated:
		s.dispatchShuffle(st)
	case *StealTick:
		s.sid("steal-balance")
		s.stealBalance()
	case *AMMTick:
		s.sid("active_memory_manager")
		if s.ammOn() {
			s.reduceReplicas()
		}
	case *StealResponse:
		s.sid("steal-response")
		s.handleStealResponse(x)
	case *Tick:
		s.sid("check-worker-ttl")
		s.handleTick()
		s.coord.Tick(s.now)
		s.checkNoWorkers()
		s.tickIdle()
	case *CoordOp:
		s.sid("coordination")
		s.coord.Handle(x.Op, s.now)
	case *LogEvent, *SubscribeTopic, *UnsubscribeTopic:
		s.dispatchEvents(st)
	case *RegisterPlugin, *UnregisterPlugin:
		s.dispatchPlugins(st)
	case *StartProgress, *SetProgressGroups, *StopProgress:
		s.dispatchProgress(st)
	case *StartTaskStream:
		s.stream.on = true
	case *SetHookListener:
		s.setHooks(x.Hooks)
	case *MemorySamplerStart, *MemorySample, *MemorySamplerStop, *StartTaskMetadata, *StopTaskMetadata, *AMMControl, *SetResources:
		s.dispatchDiagnostics(st)
	default:
		s.dispatchClient(st)
	}
}

func (s *State) dispatchClient(st Stimulus) {
	switch x := st.(type) {
	case *AddClient:
		s.addClientState(x.Client)
	case *RemoveClient:
		s.sid("remove-client")
		s.removeClient(x.Client)
	case *UpdateGraph:
		s.sid("update-graph")
		s.handleUpdateGraph(x)
	case *GraphMaterialized:
		s.sid("update-graph")
		s.handleGraphMaterialized(x)
	case *ClientDesiresKeys:
		s.clientDesiresKeys(x.Keys, x.Client)
	case *ClientReleasesKeys:
		s.sid("client-releases-keys")
		s.clientReleasesKeys(x.Keys, x.Client)
	case *CancelKeys:
		s.sid("cancel-key")
		s.stimulusCancel(x)
	case *HeartbeatClient:
		s.handleHeartbeatClient(x)
	case *Retry:
		s.sid("stimulus-retry")
		s.handleRetry(x)
	case *UpdateData:
		s.sid("update-data")
		s.handleUpdateData(x)
	case *Restart:
		s.sid("restart")
		s.handleRestart()
	default:
		s.logf(LogWarn, "", "", "", "unknown stimulus %T ignored", st)
	}
}

func (s *State) dispatchShuffle(st Stimulus) {
	switch x := st.(type) {
	case *ShuffleGetOrCreate:
		s.sid("shuffle-get-or-create")
		s.handleShuffleGetOrCreate(x)
	case *ShuffleGet:
		s.sid("shuffle-get")
		s.handleShuffleGet(x)
	case *ShuffleBarrier:
		s.sid("p2p-barrier")
		s.handleShuffleBarrier(x)
	case *ShuffleRestrictTask:
		s.sid("shuffle-restrict-task")
		s.handleShuffleRestrictTask(x)
	case *ShuffleRunCreated:
		s.sid("shuffle-run-created")
		s.handleShuffleRunCreated(x)
	}
}

// heldClient names the client whose stream order a stimulus belongs to.
// RPC-driven stimuli (Retry, UpdateData) and heartbeats are not held:
// distributed answers them on other comms, unordered with the stream.
func heldClient(st Stimulus) string {
	switch x := st.(type) {
	case *UpdateGraph:
		return x.Client
	case *ClientDesiresKeys:
		return x.stream()
	case *ClientReleasesKeys:
		return x.stream()
	case *CoordOp:
		return x.heldStream()
	case *CancelKeys:
		return x.Client
	case *RemoveClient:
		return x.Client
	}
	return ""
}

// ---- logging ---------------------------------------------------------------

// LogLevel grades a LogEntry (coord's, which logs through the engine).
type LogLevel = coord.LogLevel

// Log levels, as zerolog's.
const (
	LogDebug = coord.LogDebug
	LogInfo  = coord.LogInfo
	LogWarn  = coord.LogWarn
	LogError = coord.LogError
)

// LogEntry is something the engine wants logged (bad peer input, lost
// data...). The engine never logs itself: the outer ring writes these with
// zerolog, so Handle stays pure and tests can assert on them.
type LogEntry struct {
	Level  LogLevel
	Msg    string
	Key    protocol.Key
	Worker string
	Client string
}

func (s *State) logf(level LogLevel, key protocol.Key, worker, client, format string, args ...any) {
	if s.out == nil {
		return
	}
	s.out.Logs = append(s.out.Logs, LogEntry{Level: level, Msg: fmt.Sprintf(format, args...), Key: key, Worker: worker, Client: client})
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
