package scheduler

import (
	"math"
	"strings"
	"time"

	"daskgo/protocol"
)

// Worker statuses (distributed.core.Status names) a worker may report.
var workerStatuses = map[string]bool{
	"undefined": true, "created": true, "init": true, "starting": true, "running": true,
	"paused": true, "stopping": true, "stopped": true, "closing": true,
	"closing_gracefully": true, "closed": true, "failed": true, "dont_reply": true,
}

// WorkerState mirrors distributed.scheduler.WorkerState.
type WorkerState struct {
	Address string
	Name    string // str(name): what names are compared and logged as
	// NameValue is the name as the worker sent it (distributed keeps an
	// int name an int: SpecCluster and LocalCluster name workers 0, 1, ...
	// and match them to their specs by value). The address when it sent none.
	NameValue      any
	Host           string
	NThreads       int
	MemoryLimit    int64
	Resources      map[string]float64
	Nanny          string
	Services       *protocol.Map
	LocalDirectory string
	PID            int64
	ServerID       string
	Extra          *protocol.Map
	Versions       *protocol.Map

	status   string
	lastSeen time.Time
	metrics  any          // the last heartbeat's, unread (scheduler_info)
	mem      workerMemory // the heartbeats' memory figures (memory.go)
	closed   bool         // removed from the cluster; stale pointers see this
	// ttlRestarting: worker-ttl asked its nanny to restart it (handleTick)
	ttlRestarting bool
	// outPos is the worker's place in the Outbox's Workers of the Handle
	// numbered outSeq (State.toWorker)
	outPos int32
	outSeq uint64

	processing  taskSet
	longRunning oset[*TaskState]
	hasWhat     taskSet
	actors      oset[*TaskState]
	executing   map[protocol.Key]float64
	// needsWhat counts processing tasks needing a dependency this worker
	// lacks; networkOcc is the bytes of those dependencies.
	needsWhat  replicaNeeds // worker_needs.go
	networkOcc int64
	nbytes     int64
	// prefixCount counts non-long-running processing tasks per prefix, for
	// occupancy. A slice, not a map, so float sums are deterministic.
	prefixCount   []prefixCount
	usedResources map[string]float64

	// setPos is 1 + the worker's index in each of the State's worker sets
	// (workerset.go; 0: absent).
	setPos [numWorkerRoles]int32
	// slotPos is 1 + the worker's index in State.slots (0: absent);
	// coRuns are the co-assignment runs it owns (coassign.go).
	slotPos int
	slot    slotEntry // ws's entry in State.slots while slotPos > 0
	coRuns  *ixheap[*coRun]
	// coRootBytes: the outputs of co-assigned roots it holds (coassign_pace.go)
	coRootBytes int64
	// steal is the worker's work-stealing state (steal.go); nil while
	// stealing is off.
	steal *stealWorker
}

type prefixCount struct {
	tp *TaskPrefix
	n  int
}

// Status is the worker's distributed.core.Status name.
func (ws *WorkerState) Status() string { return ws.status }

func addPrefixCount(pcs []prefixCount, tp *TaskPrefix, d int) []prefixCount {
	for i := range pcs {
		if pcs[i].tp == tp {
			pcs[i].n += d
			if pcs[i].n == 0 {
				pcs[i] = pcs[len(pcs)-1]
				pcs = pcs[:len(pcs)-1]
			}
			return pcs
		}
	}
	return append(pcs, prefixCount{tp, d})
}

// hostOf extracts the host of "tcp://host:port" (or "[v6]:port").
func hostOf(addr string) string {
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	if strings.HasPrefix(addr, "[") {
		if j := strings.Index(addr, "]"); j > 0 {
			return addr[1:j]
		}
	}
	if j := strings.LastIndex(addr, ":"); j >= 0 {
		return addr[:j]
	}
	return addr
}

// addToProcessing mirrors WorkerState.add_to_processing.
func (s *State) wsAddToProcessing(ws *WorkerState, ts *TaskState) {
	ws.prefixCount = addPrefixCount(ws.prefixCount, ts.prefix, 1)
	s.prefixCountGlobal = addPrefixCount(s.prefixCountGlobal, ts.prefix, 1)
	ws.processing.Add(ts)
	for _, dts := range ts.dependencies.Items() {
		if !dts.whoHas.Has(ws) {
			s.incNeedsReplica(ws, dts)
		}
	}
}

func (s *State) wsAddToLongRunning(ws *WorkerState, ts *TaskState) {
	ws.prefixCount = addPrefixCount(ws.prefixCount, ts.prefix, -1)
	s.prefixCountGlobal = addPrefixCount(s.prefixCountGlobal, ts.prefix, -1)
	ws.longRunning.Add(ts)
}

// wsRemoveFromProcessing mirrors WorkerState.remove_from_processing.
func (s *State) wsRemoveFromProcessing(ws *WorkerState, ts *TaskState) {
	if !ws.longRunning.Remove(ts) {
		ws.prefixCount = addPrefixCount(ws.prefixCount, ts.prefix, -1)
		s.prefixCountGlobal = addPrefixCount(s.prefixCountGlobal, ts.prefix, -1)
	}
	ws.processing.Remove(ts)
	if ws.needsWhat.Len() == 0 {
		return
	}
	for _, dts := range ts.dependencies.Items() {
		if ws.needsWhat.get(dts) > 0 {
			s.decNeedsReplica(ws, dts)
		}
	}
}

func (s *State) incNeedsReplica(ws *WorkerState, dts *TaskState) {
	if !ws.needsWhat.inc(dts) {
		return
	}
	nb := s.getNBytes(dts)
	ws.networkOcc += nb
	s.networkOccGlobal += nb
}

func (s *State) decNeedsReplica(ws *WorkerState, dts *TaskState) {
	if !ws.needsWhat.dec(dts) {
		return
	}
	s.dropNetworkOcc(ws, s.getNBytes(dts))
}

func (s *State) dropNetworkOcc(ws *WorkerState, nb int64) {
	ws.networkOcc -= min(nb, ws.networkOcc)
	s.networkOccGlobal -= min(nb, s.networkOccGlobal)
}

// addReplica mirrors SchedulerState.add_replica / WorkerState.add_replica.
func (s *State) addReplica(ts *TaskState, ws *WorkerState) {
	if ts.whoHas.Has(ws) { // == ws.hasWhat.Has(ts), probing the small side
		return
	}
	nb := s.getNBytes(ts)
	if ws.needsWhat.remove(ts) {
		s.dropNetworkOcc(ws, nb)
	}
	ts.whoHas.addNew(ws) // absent: who_has mirrors has_what, checked above
	ws.nbytes += nb
	s.coRootHeld(ts, ws, nb)
	ws.hasWhat.addNew(ts)
	if ts.whoHas.Len() == 2 {
		s.replicated.Add(ts)
	}
}

func (s *State) removeReplica(ts *TaskState, ws *WorkerState) {
	nb := s.getNBytes(ts)
	ws.nbytes -= nb
	s.coRootHeld(ts, ws, -nb)
	ws.hasWhat.Remove(ts)
	if ts.whoHas.Remove(ws) && ts.whoHas.Len() == 1 {
		s.replicated.Remove(ts)
	}
}

func (s *State) removeAllReplicas(ts *TaskState) {
	nb := s.getNBytes(ts)
	if ts.whoHas.Len() > 1 {
		s.replicated.Remove(ts)
	}
	for _, ws := range ts.whoHas.Items() {
		ws.nbytes -= nb
		s.coRootHeld(ts, ws, -nb)
		ws.hasWhat.Remove(ts)
	}
	ts.whoHas.Clear()
}

// prefixDuration mirrors SchedulerState._get_prefix_duration.
func (s *State) prefixDuration(tp *TaskPrefix) float64 {
	if tp.durationAverage >= 0 {
		return tp.durationAverage
	}
	if tp.maxExecTime > 0 {
		return 2 * tp.maxExecTime
	}
	return s.cfg.UnknownTaskDuration.Seconds()
}

// calcOccupancy mirrors SchedulerState._calc_occupancy.
func (s *State) calcOccupancy(pcs []prefixCount, networkOcc int64) float64 {
	res := 0.0
	for _, pc := range pcs {
		res += s.prefixDuration(pc.tp) * float64(pc.n)
	}
	return math.Max(res+float64(networkOcc)/s.bandwidth, 0)
}

func (s *State) occupancy(ws *WorkerState) float64 {
	return s.calcOccupancy(ws.prefixCount, ws.networkOcc)
}

func (s *State) totalOccupancy() float64 {
	return s.calcOccupancy(s.prefixCountGlobal, s.networkOccGlobal)
}

// taskSlotsAvailable mirrors _task_slots_available (saturation finite).
func taskSlotsAvailable(ws *WorkerState, sat float64) int {
	return max(int(math.Ceil(sat*float64(ws.NThreads))), 1) - (ws.processing.Len() - ws.longRunning.Len())
}

func workerFull(ws *WorkerState, sat float64) bool {
	if math.IsInf(sat, 1) {
		return false
	}
	return taskSlotsAvailable(ws, sat) <= 0
}

// checkIdleSaturated mirrors SchedulerState.check_idle_saturated: keeps the
// idle, saturated and idle_task_count sets current for ws.
func (s *State) checkIdleSaturated(ws *WorkerState) { s.checkIdleSaturatedOcc(ws, -1) }

// checkIdleSaturatedOcc is check_idle_saturated(ws, occ): work stealing
// passes the occupancy its in-flight requests leave the worker with; a
// negative occ means the worker's own.
func (s *State) checkIdleSaturatedOcc(ws *WorkerState, occ float64) {
	if s.totalNThreads == 0 || ws.closed {
		return
	}
	if occ < 0 {
		occ = s.occupancy(ws)
	}
	p := ws.processing.Len()
	s.saturated.Remove(ws)
	switch {
	case ws.status != "running":
		s.idle.Remove(ws)
	case s.isUnoccupied(ws, occ, p):
		s.idle.Add(ws)
	default:
		s.idle.Remove(ws)
		nc := ws.NThreads
		if p > nc {
			pending := occ * float64(p-nc) / float64(p*nc)
			if 0.4 < pending && pending > 1.9*(s.totalOccupancy()/float64(s.totalNThreads)) {
				s.saturated.Add(ws)
			}
		}
	}
	if !workerFull(ws, s.cfg.WorkerSaturation) && ws.status == "running" {
		s.idleTaskCount.Add(ws)
	} else {
		s.idleTaskCount.Remove(ws)
	}
	s.slotUpdate(ws)
}

func (s *State) isUnoccupied(ws *WorkerState, occ float64, p int) bool {
	nt := ws.NThreads
	return p < nt || occ < float64(nt)*(s.totalOccupancy()/float64(s.totalNThreads))/2
}

func (s *State) acquireResources(ts *TaskState, ws *WorkerState) {
	if ts.extra == nil {
		return // skip the range: a map iterator costs even when empty
	}
	for r, q := range ts.x().resourceRestrictions {
		if ws.usedResources == nil {
			ws.usedResources = map[string]float64{}
		}
		ws.usedResources[r] += q
	}
}

func (s *State) releaseResources(ts *TaskState, ws *WorkerState) {
	if ts.extra == nil {
		return // skip the range: a map iterator costs even when empty
	}
	for r, q := range ts.x().resourceRestrictions {
		if ws.usedResources != nil {
			ws.usedResources[r] -= q
		}
	}
}

// nameValue is the name as the worker sent it, or its str() for a worker
// made without one (tests).
func (ws *WorkerState) nameValue() any {
	if ws.NameValue != nil {
		return ws.NameValue
	}
	return ws.Name
}
