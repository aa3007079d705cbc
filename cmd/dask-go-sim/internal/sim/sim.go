package sim

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// Modes are the engine configurations a run can use (scheduler/WITHHOLDING.md):
// off = worker-saturation inf and root tasks placed like any task (no
// withholding, no co-location: Config.SpreadRootsWithoutQueue);
// main = worker-saturation inf with distributed's co-location of root groups
// (what the design discussion called "main"); withholding = 1.1;
// coassign = 1.1 with root-task-co-assignment.
var Modes = []string{"off", "main", "withholding", "coassign"}

// Config describes one simulated cluster.
type Config struct {
	Workers     int
	Threads     int     // per worker; default 2 (the originals' m6i.large)
	MemoryLimit int64   // per worker; default 8 GiB
	Bandwidth   float64 // bytes/s of each worker link, each direction; default 1 GB/s
	Latency     float64 // seconds added to every message and transfer; default 1 ms
	Mode        string
	Seed        uint64
	// CoFamilyDepth is the engine's scheduler.Config.CoFamilyDepth.
	CoFamilyDepth int
	// EngineClock times the engine: "wall-scaled" (the default) or
	// "thread" (engineclock.go).
	EngineClock string
	// Validate turns on the engine's invariant checks after every Handle
	// (tests; slow on big graphs).
	Validate bool
	// TracePeak records what the cluster held at its peak (Result.PeakTrace).
	TracePeak bool
	// Digest hashes every outbox and the final transition log
	// (Result.OutboxDigest, digest.go).
	Digest bool
	// record, when set, is given every stimulus in the order the engine
	// handles it: a replay of them into a new engine repeats the run's
	// engine work without the simulator (BenchmarkEngineReplay).
	record func(scheduler.Stimulus)
	// Stealing turns the engine's work stealing on: a StealTick every
	// StealInterval seconds (default 1, distributed's work-stealing-interval)
	// and workers that answer steal-request as stock workers do. Off, the
	// engine runs with work-stealing false.
	Stealing      bool
	StealInterval float64
	// NoAMM turns the engine's active memory manager (ReduceReplicas,
	// scheduler/amm.go) off; on, as in distributed and the real Go
	// scheduler by default, an AMMTick every AMMInterval seconds (default
	// 2) drops replicas no waiter needs, and workers drop them on
	// remove-replicas.
	NoAMM       bool
	AMMInterval float64
	// NoSpill turns the workers' spilling to disk off (spill.go; on, as
	// stock workers do by default).
	NoSpill bool
	// MonitorInterval: seconds between two checks of the workers' memory
	// monitor (spill.go; default 0.1, distributed's
	// worker.memory.monitor-interval).
	MonitorInterval float64
	// SampleInterval: Result.PeakClusterSampledBytes is the cluster's
	// memory sampled every this many seconds (default 0.1), as the
	// benchmark's Sampler (scripts/bench/procs.py) samples the workers'
	// RSS: the figure to hold against a measured peak.
	SampleInterval float64
	// Cores > 0: all executing tasks of the cluster share this many cores
	// (processor sharing, cpu.go), and a task's Duration is CPU work; 0:
	// every thread has a core of its own (the full-scale default).
	Cores float64
	// NoGIL: with shared cores, every job (task or transfer) is a share of
	// the cores of its own; by default a worker's transfers share its task
	// threads' shares, as a stock worker's event loop and task threads
	// share one interpreter lock (cpu.go).
	NoGIL bool
	// TaskOverhead: seconds of work added to every task: the worker's own
	// per-task cost (its event loop, messages, the result's sizeof),
	// measured as worker CPU outside task execution.
	TaskOverhead float64
	// TransferCPU, TransferCPUPerByte: with shared cores, a transfer is CPU
	// work on them (serialization, copies through loopback, page faults of
	// the receive buffer) instead of time on a network link: this many
	// seconds per transfer plus per byte. Without shared cores they are
	// unused and Bandwidth governs transfers.
	TransferCPU, TransferCPUPerByte float64
	// TransferWait: with shared cores, seconds every transfer waits besides
	// its CPU work: the two event loops each waiting for a time slice on
	// an oversubscribed machine (a 100-byte transfer takes ~10 ms there).
	TransferWait float64
	// DurationSpread > 0: every execution's Duration is multiplied by a
	// log-normal factor of mean 1 and this sigma (a pure function of Seed,
	// the task and the run, so a run is reproducible). Real durations of
	// one prefix spread, and the spread breaks the occupancy ties between
	// workers that identical durations leave to the address order.
	DurationSpread float64
	// WorkerSpeedSpread > 0: each worker runs all its tasks this much
	// slower or faster: its work is multiplied by a log-normal factor of
	// mean 1 and this sigma, drawn once per worker from Seed. Workers on
	// shared cores do not run at one speed (scripts/sim/calibrate.py,
	// worker_speed), and without withholding the difference lets them
	// drift apart: a consumer whose inputs were computed on two workers
	// holds the first until the second is done.
	WorkerSpeedSpread float64
	// Memory terms beyond task outputs (memory.go).
	Mem MemoryModel
	// Calibration names the file the costs came from (recorded only).
	Calibration string
}

func (c *Config) fill() error {
	if c.Workers < 1 {
		return fmt.Errorf("sim config: %d workers", c.Workers)
	}
	if c.Threads <= 0 {
		c.Threads = 2
	}
	if c.MemoryLimit <= 0 {
		c.MemoryLimit = 8 << 30
	}
	if c.Bandwidth <= 0 {
		c.Bandwidth = 1e9
	}
	for _, d := range []struct {
		name string
		v    *float64
		def  float64
	}{
		{"latency", &c.Latency, 0.001}, {"steal interval", &c.StealInterval, 1}, {"AMM interval", &c.AMMInterval, 2},
		{"memory monitor interval", &c.MonitorInterval, 0.1}, {"sample interval", &c.SampleInterval, 0.1},
	} {
		if *d.v < 0 || math.IsNaN(*d.v) {
			return fmt.Errorf("sim config: %s %v", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.Cores < 0 || math.IsNaN(c.Cores) || math.IsInf(c.Cores, 0) {
		return fmt.Errorf("sim config: cores %v", c.Cores)
	}
	for _, v := range []float64{c.TaskOverhead, c.TransferCPU, c.TransferCPUPerByte, c.TransferWait, c.WorkerSpeedSpread} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("sim config: negative or invalid cost %v", v)
		}
	}
	if err := c.Mem.check(); err != nil {
		return err
	}
	_, err := EngineConfig(c.Mode, c.Bandwidth)
	return err
}

// EngineConfig is the scheduler.Config of a mode.
func EngineConfig(mode string, bandwidth float64) (scheduler.Config, error) {
	cfg := scheduler.Config{Bandwidth: bandwidth, TransitionLogSize: 1024}
	switch mode {
	case "off":
		cfg.WorkerSaturation = math.Inf(1)
		cfg.SpreadRootsWithoutQueue = true
	case "main":
		cfg.WorkerSaturation = math.Inf(1)
	case "withholding":
		cfg.WorkerSaturation = 1.1
	case "coassign":
		cfg.WorkerSaturation = 1.1
		cfg.RootTaskCoAssignment = true
	default:
		return cfg, fmt.Errorf("sim config: unknown mode %q (want off, main, withholding or coassign)", mode)
	}
	return cfg, nil
}

// ErrStuck: the event queue ran dry before the client had its results.
var ErrStuck = errors.New("sim: stuck")

// engineConfig is the engine's configuration for a filled cfg.
func (c *Config) engineConfig() scheduler.Config {
	ecfg, _ := EngineConfig(c.Mode, c.Bandwidth)
	ecfg.ValidateInvariants = c.Validate
	ecfg.NoWorkStealing = !c.Stealing
	ecfg.NoActiveMemoryManager = c.NoAMM
	ecfg.CoFamilyDepth = c.CoFamilyDepth
	if c.CoFamilyDepth < 0 { // the flag's "negative": contiguous priority runs
		ecfg.CoFamilyDepth = scheduler.Off
	}
	return ecfg
}

// Sim is one run: the real engine, simulated workers, one client.
type Sim struct {
	cfg     Config
	g       *Graph
	eng     *scheduler.State
	clk     clock
	epoch   time.Time
	workers []*worker
	byAddr  map[string]*worker
	index   map[protocol.Key]int32
	rng     uint64 // splitmix64 state: holder choice among replicas

	client    string
	wanted    map[int32]bool
	remaining int
	makespan  float64
	failed    error

	clusterMem, peakCluster int64
	peakSampled             int64 // the largest clusterMem at a sample (Config.SampleInterval)
	transferred             int64
	clock                   *engineClock // times every Handle (with the Recycle before it) and the last Recycle
	handles                 int64
	pending                 scheduler.Outbox // handleRecycled's outbox, recycled by the next handle
	hasPending              bool
	engineLogs              int
	anomalies               int // holder lists that did not match the workers' data
	replicasDropped         int64
	spilledBytes            int64
	ticks                   int // periodic events in the queue (scheduleTick)

	cpu *cpu // Config.Cores > 0: the shared cores; nil: a core per thread

	trace    *PeakTrace       // Config.TracePeak
	digest   *outboxDigest    // Config.Digest
	prefixes map[int32]string // task -> key prefix, filled lazily by the trace
}

// Run simulates g on the cluster of cfg until the client holds every sink
// and has released them again.
func Run(g *Graph, cfg Config) (*Result, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	// The engine clock reads this thread's CPU clock.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	wall := time.Now()
	s := &Sim{cfg: cfg, g: g, eng: scheduler.New(cfg.engineConfig()), epoch: time.Unix(1_700_000_000, 0),
		byAddr: map[string]*worker{}, index: make(map[protocol.Key]int32, len(g.Tasks)),
		rng: cfg.Seed*0x9E3779B97F4A7C15 + 1, client: "Client-sim"}
	for i, t := range g.Tasks {
		s.index[t.Key] = int32(i)
	}
	if cfg.Cores > 0 {
		s.cpu = newCPU(cfg.Cores, !cfg.NoGIL)
	}
	if cfg.Digest {
		s.digest = newOutboxDigest()
	}
	clock, err := newEngineClock(cfg.EngineClock)
	if err != nil {
		return nil, err
	}
	s.clock = clock
	s.start()
	for e := s.clk.next(); e != nil && s.failed == nil; e = s.clk.next() {
		s.step(e)
	}
	if s.hasPending {
		c0 := s.clock.start()
		s.recycle()
		s.clock.stop(c0)
	}
	if s.failed != nil {
		return nil, s.failed
	}
	if s.remaining > 0 {
		return nil, fmt.Errorf("%w: %d of %d wanted keys never reached memory (t=%.3fs)",
			ErrStuck, s.remaining, len(s.wanted), s.clk.now)
	}
	r := s.result(time.Since(wall))
	if s.digest != nil {
		if r.OutboxDigest, err = s.digest.sum(s.eng); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (s *Sim) at(t float64) time.Time { return s.epoch.Add(time.Duration(t * float64(time.Second))) }

func (s *Sim) base(t float64) scheduler.Base { return scheduler.Base{ID: "sim", At: s.at(t)} }

// start registers the workers and the client and submits the graph, all at
// t=0 (the graph's materialization is not simulated).
func (s *Sim) start() {
	for i := range s.cfg.Workers {
		addr := fmt.Sprintf("tcp://10.%d.%d.%d:8000", i>>16&255, i>>8&255, i&255)
		w := newWorker(int32(i), addr, s.cfg.Threads, s.cfg.MemoryLimit)
		w.speed = s.workerSpeed(i)
		s.workers = append(s.workers, w)
		s.byAddr[addr] = w
		s.handle(&scheduler.AddWorker{Base: s.base(0), Address: addr, Name: strconv.Itoa(i),
			NThreads: s.cfg.Threads, MemoryLimit: s.cfg.MemoryLimit, Status: "running"})
	}
	s.handle(&scheduler.AddClient{Base: s.base(0), Client: s.client})
	sinks := s.g.Sinks()
	s.wanted = make(map[int32]bool, len(sinks))
	keys := make([]protocol.Key, len(sinks))
	for i, t := range sinks {
		s.wanted[t] = false
		keys[i] = s.g.Tasks[t].Key
	}
	s.remaining = len(sinks)
	out := s.handle(&scheduler.UpdateGraph{Base: s.base(0), Client: s.client, Keys: keys,
		FifoTimeout: 100 * time.Millisecond})
	if len(out.Helper) != 1 {
		s.failed = fmt.Errorf("sim: update-graph gave %d helper requests, want 1", len(out.Helper))
		return
	}
	// resolved here, as compat resolves a materialized graph's keys
	// before the engine sees it (a replay then applies it as the real
	// scheduler's engine does)
	tasks := s.graphTasks()
	s.handle(&scheduler.GraphMaterialized{Base: s.base(0), RequestID: out.Helper[0].ID,
		Client: s.client, Tasks: tasks, Keys: scheduler.IndexGraph(tasks)})
	if s.cfg.Stealing {
		s.scheduleTick(evStealTick, 0, s.cfg.StealInterval)
	}
	if !s.cfg.NoAMM {
		s.scheduleTick(evAMMTick, 0, s.cfg.AMMInterval)
	}
	s.scheduleTick(evSample, 0, s.cfg.SampleInterval)
	if !s.cfg.NoSpill {
		// Each worker's monitor runs on its own phase, as the periodic
		// callbacks of processes started apart do: checks in step would
		// let every worker overshoot at the same instant.
		for i := range s.workers {
			phase := s.cfg.MonitorInterval * float64(i+1) / float64(len(s.workers))
			s.scheduleTick(evMemoryMonitor, int32(i), phase)
		}
	}
}

var runSpec = scheduler.BlobSpec{Blob: &protocol.Blob{Pickled: true, Header: []byte{0x80}, Frames: [][]byte{[]byte("sim")}}}

func (s *Sim) graphTasks() []scheduler.GraphTask {
	out := make([]scheduler.GraphTask, len(s.g.Tasks))
	for i, t := range s.g.Tasks {
		deps := make([]protocol.Key, len(t.Deps))
		for j, d := range t.Deps {
			deps[j] = s.g.Tasks[d].Key
		}
		out[i] = scheduler.GraphTask{Key: t.Key, Deps: deps, Order: t.Order, Kind: "Task", RunSpec: runSpec}
	}
	return out
}

// handle runs one stimulus through the engine, timing it on the engine
// clock (engineclock.go), and dispatches the outbox. The outbox that
// handleRecycled left is recycled first, in the same interval (see
// handleRecycled).
func (s *Sim) handle(st scheduler.Stimulus) scheduler.Outbox {
	if s.cfg.record != nil {
		s.cfg.record(st)
	}
	c0 := s.clock.start()
	s.recycle()
	// every earlier outbox is dispatched, its reusable messages copied out
	// (detachReused): the engine may build new ones in them, as the
	// scheduler's loop lets it once its streams have encoded them
	s.eng.MessagesWritten()
	out := s.eng.Handle(st)
	s.clock.stop(c0)
	s.handles++
	if s.digest != nil {
		s.digest.outbox(&out)
	}
	s.dispatch(out)
	return out
}

// handleRecycled is handle for callers that keep nothing of the outbox:
// it is handed back to the engine (State.Recycle) as the real scheduler's
// loop does, so that the engine's CPU per task is production's.
//
// Recycle is engine work the real loop does after every batch, so it is
// timed as the engine's too (records before 2026-12-05 10:30 UTC left it
// out). It runs at the start of the next handle, inside that Handle's
// interval: one pair of clock reads per stimulus instead of two (records
// before 2026-12-05 18:00 UTC timed it apart).
func (s *Sim) handleRecycled(st scheduler.Stimulus) {
	s.pending = s.handle(st)
	s.hasPending = true
}

// recycle hands the outbox handleRecycled kept back to the engine.
func (s *Sim) recycle() {
	if s.hasPending {
		s.eng.Recycle(&s.pending)
		s.pending, s.hasPending = scheduler.Outbox{}, false
	}
}

// dispatch delivers worker messages after the link latency (per worker,
// in address order so that runs are reproducible) and reads the client's.
func (s *Sim) dispatch(out scheduler.Outbox) {
	s.engineLogs += len(out.Logs)
	if len(out.Workers) > 0 {
		for _, p := range out.Workers.Sorted() {
			if w := s.byAddr[p.Peer]; w != nil {
				// a copy: the outbox's slices go back to the engine (handleRecycled),
				// and its compute-tasks and free-keys are rebuilt by later Handles
				msgs := append([]*protocol.Map(nil), p.Msgs...)
				for i, m := range msgs {
					msgs[i] = detachReused(m)
				}
				s.clk.schedule(&event{at: s.clk.now + s.cfg.Latency, kind: evToWorker, w: w.idx, msgs: msgs})
			}
		}
	}
	for _, m := range out.Clients.Of(s.client) {
		s.clientMsg(m)
	}
}

func (s *Sim) clientMsg(m *protocol.Map) {
	switch m.Get("op") {
	case "key-in-memory":
		k, _ := m.Get("key").(protocol.Key)
		t, ok := s.index[k]
		if done, want := s.wanted[t]; ok && want && !done {
			s.wanted[t] = true
			s.remaining--
			if s.remaining == 0 {
				s.finish()
			}
		}
	case "task-erred":
		s.failed = fmt.Errorf("sim: task %v erred", m.Get("key"))
	}
}

// finish: the client has every result. Like a client whose futures go out
// of scope, it releases them; the run ends when the engine has freed
// everything and the queue is empty.
func (s *Sim) finish() {
	s.makespan = s.clk.now
	keys := make([]protocol.Key, 0, len(s.wanted))
	for _, t := range s.g.Sinks() {
		keys = append(keys, s.g.Tasks[t].Key)
	}
	s.toScheduler(&scheduler.ClientReleasesKeys{Base: s.base(s.clk.now + s.cfg.Latency), Client: s.client, Keys: keys})
}

// toScheduler sends a stimulus that arrives after the link latency.
func (s *Sim) toScheduler(st scheduler.Stimulus) {
	s.clk.schedule(&event{at: s.clk.now + s.cfg.Latency, kind: evToScheduler, st: st})
}

func (s *Sim) step(e *event) {
	switch e.kind {
	case evToScheduler:
		s.handleRecycled(e.st)
	case evToWorker:
		s.workerMsgs(s.workers[e.w], e.msgs)
	case evTaskDone:
		s.taskDone(s.workers[e.w], e.task, e.run, e.at-s.taskWork(e.task, e.run))
	case evCPU:
		if uint64(e.run) == s.cpu.gen {
			for _, j := range s.cpu.finished(s.clk.now) {
				if j.transfer {
					s.clk.schedule(&event{at: s.clk.now + s.cfg.TransferWait + s.cfg.Latency, kind: evTransferDone,
						w: j.w, task: j.task})
					continue
				}
				s.taskDone(s.workers[j.w], j.task, j.run, j.start)
			}
			s.scheduleCPU()
		}
	case evTransferDone:
		s.transferDone(s.workers[e.w], e.task)
	case evStealTick, evAMMTick, evMemoryMonitor, evSample:
		s.tick(e.kind, e.w)
	}
}

// tick runs one of the periodic callbacks (the engine's stimuli, worker
// w's memory monitor) and schedules the next while the graph runs; a stuck
// run (nothing else queued) must still end.
func (s *Sim) tick(kind eventKind, w int32) {
	var every float64
	switch kind {
	case evStealTick:
		s.handleRecycled(&scheduler.StealTick{Base: s.base(s.clk.now)})
		every = s.cfg.StealInterval
	case evAMMTick:
		s.handleRecycled(&scheduler.AMMTick{Base: s.base(s.clk.now)})
		every = s.cfg.AMMInterval
	case evMemoryMonitor:
		s.monitorMemory(s.workers[w])
		every = s.cfg.MonitorInterval
	default:
		s.peakSampled = max(s.peakSampled, s.clusterMem)
		every = s.cfg.SampleInterval
	}
	s.ticks--
	if s.remaining > 0 && len(s.clk.q) > s.ticks {
		s.scheduleTick(kind, w, s.clk.now+every)
	}
}

// scheduleTick queues a periodic callback; Sim.ticks counts them, so that
// ticks alone (a stuck run) do not keep each other going.
func (s *Sim) scheduleTick(kind eventKind, w int32, at float64) {
	s.ticks++
	s.clk.schedule(&event{at: at, kind: kind, w: w})
}

// mem changes a worker's memory and tracks the cluster's peak.
func (s *Sim) mem(w *worker, d int64) {
	s.clusterMem += w.addMem(d)
	if d > 0 {
		s.clusterMem += s.spill(w)
	}
	if s.clusterMem > s.peakCluster {
		s.peakCluster = s.clusterMem
		if s.cfg.TracePeak {
			s.tracePeak()
		}
	}
}

// taskWork is the work of one execution of task t: its Duration (times the
// spread factor, Config.DurationSpread) plus the per-task overhead.
func (s *Sim) taskWork(t int32, run int64) float64 {
	d := s.g.Tasks[t].Duration
	if sigma := s.cfg.DurationSpread; sigma > 0 && d > 0 {
		d *= logNormal(sigma, s.cfg.Seed^uint64(t)<<20^uint64(run)*0xD6E8FEB86659FD93)
	}
	return d + s.cfg.TaskOverhead
}

// workerSpeed is worker i's factor on its tasks' work
// (Config.WorkerSpeedSpread).
func (s *Sim) workerSpeed(i int) float64 {
	if s.cfg.WorkerSpeedSpread <= 0 {
		return 1
	}
	return logNormal(s.cfg.WorkerSpeedSpread, s.cfg.Seed*0x2545F4914F6CDD1D^uint64(i))
}

// logNormal is a log-normal factor of mean 1 and the given sigma, a pure
// function of x (Box-Muller on two uniforms hashed from it).
func logNormal(sigma float64, x uint64) float64 {
	u1 := unitFloat(mix64(x))
	u2 := unitFloat(mix64(x ^ 0xA5A5A5A5A5A5A5A5))
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	return math.Exp(sigma*z - sigma*sigma/2)
}

// mix64 is splitmix64's finalizer.
func mix64(z uint64) uint64 {
	z += 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// unitFloat maps a hash to (0, 1].
func unitFloat(h uint64) float64 { return (float64(h>>11) + 1) / (1 << 53) }

// rand is splitmix64: a deterministic stream for the seed.
func (s *Sim) rand(n int) int {
	s.rng += 0x9E3779B97F4A7C15
	z := s.rng
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return int((z ^ (z >> 31)) % uint64(n))
}
