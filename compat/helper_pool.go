package compat

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// HelperPool runs the materializer helpers: one always, and a spare while
// the ones running are all busy. distributed materializes a graph inside
// the scheduler's event loop, so a graph that takes long to unpickle holds
// every other client there too. Here a graph waits in the pool's queue only
// until a helper is free, and when every helper has been busy for
// SpareAfter with work waiting, another starts (about a second of imports)
// and takes the queue; a spare idle for SpareIdle is closed. The spare is
// there so that a helper stalled on one client's graph does not hold
// another client's small computation behind it.
//
// The engine keeps at most one graph per client in the helpers (graph.go
// holds a client's later stimuli until its graph is answered), so a client
// that floods graphs has one in a helper at a time and the queue is FIFO:
// another client's graph waits for at most one of the flood's.
//
// Each helper is a Materializer given one job at a time; its answers go
// through a forwarder goroutine (one per helper, ending when the helper's
// Results closes) that marks the helper free and hands out the next job.
// Every Submit and SubmitShuffleRun gets exactly one answer on Results,
// except what is still queued at Close.
type HelperPool struct {
	cfg     Config // each helper's; Results is the pool's
	log     zerolog.Logger
	out     chan scheduler.Stimulus
	ownsOut bool

	mu         sync.Mutex
	helpers    []*pooledHelper // helpers[0] is the first, never retired
	queue      []poolJob
	starting   bool
	spareTimer *time.Timer
	closed     bool
	done       chan struct{} // closed by Close
	forwarders sync.WaitGroup
}

// Pool sizing defaults.
const (
	DefaultMaxHelpers = 2
	defaultSpareAfter = 200 * time.Millisecond
	defaultSpareIdle  = 30 * time.Second
)

type pooledHelper struct {
	m      *Materializer
	busy   bool
	retire *time.Timer // a spare's idle timer
}

// poolJob is a graph or a shuffle run waiting for a helper.
type poolJob struct {
	graph   *scheduler.HelperRequest
	shuffle *scheduler.ShuffleRunRequest
}

// StartPool starts the first helper (as Start does) and returns the pool.
func StartPool(ctx context.Context, cfg Config) (*HelperPool, error) {
	cfg.setDefaults()
	p := &HelperPool{cfg: cfg, log: cfg.Log.With().Str("component", "helper-pool").Logger(), out: cfg.Results,
		done: make(chan struct{})}
	if p.out == nil {
		p.out = make(chan scheduler.Stimulus, resultsSize)
		p.ownsOut = true
	}
	first, err := p.startHelper(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.addLocked(first)
	p.mu.Unlock()
	return p, nil
}

// startHelper starts one Materializer whose answers the pool forwards.
func (p *HelperPool) startHelper(ctx context.Context) (*pooledHelper, error) {
	cfg := p.cfg
	cfg.Results = nil // its own channel, closed by its Close: the forwarder's end
	m, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &pooledHelper{m: m}, nil
}

// addLocked makes h available and starts its forwarder.
func (p *HelperPool) addLocked(h *pooledHelper) {
	p.helpers = append(p.helpers, h)
	p.forwarders.Add(1)
	go p.forward(h)
	p.dispatchLocked()
}

// Results is where GraphMaterialized and ShuffleRunCreated stimuli arrive.
func (p *HelperPool) Results() <-chan scheduler.Stimulus { return p.out }

// Submit queues a graph for the first free helper.
func (p *HelperPool) Submit(req scheduler.HelperRequest) error {
	return p.enqueue(poolJob{graph: &req})
}

// SubmitShuffleRun queues a shuffle_run request for the first free helper.
func (p *HelperPool) SubmitShuffleRun(req scheduler.ShuffleRunRequest) error {
	return p.enqueue(poolJob{shuffle: &req})
}

func (p *HelperPool) enqueue(j poolJob) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.queue = append(p.queue, j)
	p.dispatchLocked()
	return nil
}

// dispatchLocked hands queued jobs to free helpers, and arms the spare
// timer when work waits and every helper is busy.
func (p *HelperPool) dispatchLocked() {
	for len(p.queue) > 0 {
		h := p.freeLocked()
		if h == nil {
			break
		}
		j := p.popLocked()
		h.busy = true
		if h.retire != nil {
			h.retire.Stop()
			h.retire = nil
		}
		var err error
		if j.graph != nil {
			err = h.m.Submit(*j.graph)
		} else {
			err = h.m.SubmitShuffleRun(*j.shuffle)
		}
		if err != nil { // closing: the pool's Close drops what is left
			h.busy = false
			return
		}
	}
	if len(p.queue) > 0 && !p.starting && p.spareTimer == nil && len(p.helpers) < p.maxHelpers() {
		p.spareTimer = time.AfterFunc(p.spareAfter(), p.startSpare)
	}
}

// popLocked takes the oldest queued job and clears its slot: the queue's
// backing array outlives the slice (p.queue[1:] of a one-job queue still
// points at it), and a job left there held its graph's update-graph
// message, 7 MB of the client's frames on a 200k-task tree, until the
// next graph came.
func (p *HelperPool) popLocked() poolJob {
	j := p.queue[0]
	p.queue[0] = poolJob{}
	p.queue = p.queue[1:]
	return j
}

func (p *HelperPool) freeLocked() *pooledHelper {
	for _, h := range p.helpers {
		if !h.busy {
			return h
		}
	}
	return nil
}

// startSpare starts another helper if work still waits for a busy one.
func (p *HelperPool) startSpare() {
	p.mu.Lock()
	p.spareTimer = nil
	if p.closed || len(p.queue) == 0 || p.freeLocked() != nil || len(p.helpers) >= p.maxHelpers() || p.starting {
		p.mu.Unlock()
		return
	}
	p.starting = true
	waiting := len(p.queue)
	p.mu.Unlock()
	p.log.Info().Int("waiting", waiting).Msg("every materializer helper is busy; starting a spare")
	h, err := p.startHelper(context.Background())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting = false
	if err != nil {
		p.log.Error().Err(err).Msg("spare materializer helper did not start; the queue waits for the others")
		return
	}
	if p.closed {
		go h.m.Close()
		return
	}
	p.addLocked(h)
}

// forward passes h's answers on, frees h for the next job, and closes a
// spare that stays idle.
func (p *HelperPool) forward(h *pooledHelper) {
	defer p.forwarders.Done()
	for st := range h.m.Results() {
		p.deliver(st)
		p.mu.Lock()
		h.busy = false
		p.dispatchLocked()
		if !h.busy && h != p.helpers[0] && !p.closed {
			h.retire = time.AfterFunc(p.spareIdle(), func() { p.retireSpare(h) })
		}
		p.mu.Unlock()
	}
}

// retireSpare closes h if it is still idle.
func (p *HelperPool) retireSpare(h *pooledHelper) {
	p.mu.Lock()
	if p.closed || h.busy {
		p.mu.Unlock()
		return
	}
	for i, x := range p.helpers {
		if x == h {
			p.helpers = append(p.helpers[:i], p.helpers[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
	p.log.Info().Int("helper_pid", h.m.PID()).Msg("spare materializer helper idle; closing it")
	_ = h.m.Close()
}

// deliver hands an answer on; after Close nobody may be reading.
func (p *HelperPool) deliver(st scheduler.Stimulus) {
	select {
	case p.out <- st:
	case <-p.done:
	}
}

func (p *HelperPool) first() *Materializer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.helpers[0].m
}

// Versions is the first helper's distributed.versions.get_versions().
func (p *HelperPool) Versions(ctx context.Context) (*protocol.Map, error) {
	return p.first().Versions(ctx)
}

// WorkerPlugins is the first helper's worker plugins (see Materializer).
func (p *HelperPool) WorkerPlugins() *protocol.Map { return p.first().WorkerPlugins() }

// PID is the first helper's process id (0 between restarts).
func (p *HelperPool) PID() int { return p.first().PID() }

// PIDs lists every running helper's process id.
func (p *HelperPool) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, 0, len(p.helpers))
	for _, h := range p.helpers {
		out = append(out, h.m.PID())
	}
	return out
}

// Recycled is how many helpers were replaced for their memory.
func (p *HelperPool) Recycled() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, h := range p.helpers {
		n += h.m.Recycled()
	}
	return n
}

// OrderChecks sums the helpers' dask.order checks (Materializer.OrderChecks).
func (p *HelperPool) OrderChecks() (graphs, tasks, mismatched int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.helpers {
		g, t, m := h.m.OrderChecks()
		graphs, tasks, mismatched = graphs+g, tasks+t, mismatched+m
	}
	return
}

// Close stops every helper and waits for the forwarders. Queued jobs get
// no answer. Idempotent.
func (p *HelperPool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.queue = nil
	if p.spareTimer != nil {
		p.spareTimer.Stop()
	}
	helpers := append([]*pooledHelper(nil), p.helpers...)
	for _, h := range helpers {
		if h.retire != nil {
			h.retire.Stop()
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range helpers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.m.Close()
		}()
	}
	wg.Wait()
	p.forwarders.Wait()
	if p.ownsOut {
		close(p.out)
	}
	return nil
}

func (p *HelperPool) maxHelpers() int {
	if p.cfg.MaxHelpers > 0 {
		return p.cfg.MaxHelpers
	}
	return DefaultMaxHelpers
}

func (p *HelperPool) spareAfter() time.Duration {
	if p.cfg.SpareAfter > 0 {
		return p.cfg.SpareAfter
	}
	return defaultSpareAfter
}

func (p *HelperPool) spareIdle() time.Duration {
	if p.cfg.SpareIdle > 0 {
		return p.cfg.SpareIdle
	}
	return defaultSpareIdle
}
