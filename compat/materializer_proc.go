package compat

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"daskgo/protocol"
)

// incarnation is one run of the helper process: a proc (proc_spawn.go:
// spawn, kill, wait, the framed pipe's reads and writes) and what the
// materializer binds to it. Its pending map and retiring flag are guarded
// by Materializer.mu; the rest is set before its goroutines start.
type incarnation struct {
	*proc
	m       *Materializer
	stop    chan struct{}  // closed by end: the writer returns
	wg      sync.WaitGroup // the writer
	pending map[int64]*job // written (or being written) to this process
	// retiring: take no more requests; close stdin once pending is empty
	// (helper_recycle.go). Guarded by Materializer.mu.
	retiring bool
	startRSS int64       // bytes, after the startup handshake; 0 if unknown
	retired  atomic.Bool // it exited because Go retired it
}

// procSpec is how a helper process starts (proc_spawn.go).
func (m *Materializer) procSpec() procSpec {
	return procSpec{
		What: "materializer helper", PIDField: "helper_pid", Python: m.cfg.Python, Dir: m.cfg.Dir, Log: m.log,
		Env: append(slices.Clone(m.cfg.Env),
			"DASKGO_MATERIALIZER_CHUNK="+strconv.Itoa(m.cfg.ChunkTasks),
			// dask.order iterates sets: with ordering=python and for the
			// check, the helper's priorities must come from the seed Go
			// orders with
			"PYTHONHASHSEED="+strconv.FormatUint(uint64(m.cfg.HashSeed), 10)),
		// materializer.py imports the others; the last source runs as __main__
		Sources: []pySource{{"helper_wire", helperWireScript}, {"uploads", uploadsPy}, {"helper_feed", helperFeedScript},
			{"materializer_shuffle", materializerShuffleScript}, {"spec_pickling", specPicklingScript},
			{"materializer", materializerScript}},
	}
}

// open completes a spawned helper's startup handshake (a versions
// request), so that a broken interpreter or environment is reported at
// start, with the helper's last stderr lines (supervisor.start), instead
// of as a failed graph later; then the incarnation is the current helper.
func (m *Materializer) open(p *proc) (session, error) {
	inc := &incarnation{proc: p, m: m, pending: map[int64]*job{}, stop: make(chan struct{})}
	versions, plugins, err := m.handshake(context.Background(), inc)
	if err != nil {
		return nil, err
	}
	inc.startRSS = processRSS(inc.pid)
	m.mu.Lock()
	m.versions = versions
	m.plugins = plugins
	m.cur = inc
	m.mu.Unlock()
	m.log.Debug().Int("helper_pid", inc.pid).Int64("rss", inc.startRSS).Msg("materializer helper started")
	return inc, nil
}

// run serves the helper: one goroutine writes queued requests, this one
// reads the answers until the helper's output ends.
func (inc *incarnation) run() {
	inc.wg.Add(1)
	go func() {
		defer inc.wg.Done()
		inc.m.writeLoop(inc, inc.stop)
	}()
	inc.m.readLoop(inc)
}

// end stops the writer once the helper is reaped and fails every request
// it had taken, naming status. A retired helper's exit is planned.
func (inc *incarnation) end(status string) bool {
	close(inc.stop)
	_ = inc.stdin.Close()
	inc.wg.Wait()
	inc.m.failPending(inc, status)
	return inc.isRetired()
}

// handshake asks for versions (and the worker plugins, which come with
// them) and waits for the answer, killing the helper if it takes longer
// than StartTimeout or Close is called.
func (m *Materializer) handshake(ctx context.Context, inc *incarnation) (versions, plugins *protocol.Map, err error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	defer cancel()
	go func() {
		select {
		case <-m.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	stop := context.AfterFunc(ctx, func() { inc.kill("no answer to the startup request") })
	defer stop()
	frames, err := encodeVersionsRequest(0)
	if err != nil {
		return nil, nil, err
	}
	if err := inc.writeFrames(frames); err != nil {
		return nil, nil, fmt.Errorf("write versions request: %w", err)
	}
	frames, err = protocol.ReadFrames(inc.stdout, m.cfg.Limits)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("startup: %w", ctx.Err())
		}
		return nil, nil, fmt.Errorf("read versions answer: %w", err)
	}
	v, err := protocol.Decode(frames)
	if err != nil {
		return nil, nil, fmt.Errorf("decode versions answer: %w", err)
	}
	resp, head, err := parseHead(v)
	if err != nil || head.status != "OK" {
		return nil, nil, fmt.Errorf("unexpected versions answer %s", truncate(protocol.String(v)))
	}
	a, err := parseVersionsAnswer(resp)
	if err != nil {
		return nil, nil, err
	}
	return a.versions, a.plugins, nil
}

// writeLoop takes queued requests in order, binds each to inc (pending)
// before writing it, and writes it. A request whose write fails stays
// pending and is failed when the process's exit is seen.
func (m *Materializer) writeLoop(inc *incarnation, stop <-chan struct{}) {
	for {
		j := m.take(inc, stop)
		if j == nil {
			return
		}
		frames, err := m.encodeRequest(j)
		if err != nil {
			m.mu.Lock()
			delete(inc.pending, j.wireID)
			m.mu.Unlock()
			m.fail(j, fmt.Sprintf("cannot pass the request to the materializer: %v", err))
			continue
		}
		if err := inc.writeFrames(frames); err != nil {
			if !m.isClosed() {
				inc.kill(fmt.Sprintf("request write failed: %v", err))
			}
			return
		}
	}
}

// take pops the oldest queued request and makes inc its owner, or returns
// nil once stop is closed.
func (m *Materializer) take(inc *incarnation, stop <-chan struct{}) *job {
	for {
		m.mu.Lock()
		if inc.retiring {
			m.mu.Unlock()
			return nil
		}
		if len(m.queue) > 0 && !m.closed {
			j := m.queue[0]
			m.queue[0] = nil
			m.queue = m.queue[1:]
			inc.pending[j.wireID] = j
			m.mu.Unlock()
			return j
		}
		m.mu.Unlock()
		select {
		case <-m.wake:
		case <-stop:
			return nil
		}
	}
}

func (m *Materializer) encodeRequest(j *job) ([][]byte, error) {
	switch {
	case j.shuffle != nil:
		return encodeShuffleRunRequest(j.wireID, j.shuffle)
	case j.versions != nil:
		return encodeVersionsRequest(j.wireID)
	case j.feed != nil:
		return encodeFeedSetupRequest(j.wireID, &j.feed.req)
	}
	return encodeMaterializeRequest(j.wireID, j.req.Msg, m.cfg.Ordering, m.cfg.CheckOrder)
}

// readLoop reads responses until the helper's stdout closes; one that
// cannot be framed or decoded kills the helper (proc.readMessages).
func (m *Materializer) readLoop(inc *incarnation) {
	// task records are read in place (parseWireTasks); ReadFrames gives
	// every message buffers of its own, as DecodeKeepingRaw requires
	inc.readMessages(m.cfg.Limits, "response", func(frames [][]byte) (any, error) {
		return protocol.DecodeKeepingRaw(frames, "tasks")
	}, func(v any) { m.handleResponse(inc, v) })
}

// takePending empties inc's pending map, oldest request first. Caller
// holds m.mu.
func (inc *incarnation) takePending() []*job {
	ids := make([]int64, 0, len(inc.pending))
	for id := range inc.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]*job, len(ids))
	for i, id := range ids {
		out[i] = inc.pending[id]
	}
	clear(inc.pending)
	return out
}
