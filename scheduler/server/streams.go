package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

var errShuttingDown = errors.New("scheduler is shutting down")

// registerClient is Scheduler.add_client: stream-start alone in its own
// batch (the client asserts it), then the client's batched stream.
func (s *Server) registerClient(ctx context.Context, req *comm.Request) (any, error) {
	conn := req.TakeOver()
	id, _ := req.Args.Get("client").(string)
	if id == "" {
		return nil, fmt.Errorf("register-client without a client id")
	}
	log := req.Log.With().Str("client", id).Logger()
	start := []any{protocol.NewMap("op", "stream-start", "warning", "", "error", "")}
	if err := conn.Write(start); err != nil {
		return nil, fmt.Errorf("stream-start to client %s: %w", id, err)
	}
	b := comm.NewBatchedSend(conn, 0, func(err error) {
		log.Debug().Err(err).Msg("client stream write failed")
	})
	s.mu.Lock()
	old := s.clients[id]
	s.clients[id] = b
	s.mu.Unlock()
	if old != nil { // the client reconnected: its old stream goes
		old.Abort()
	}
	if err := s.loop.submitWait(ctx, &scheduler.AddClient{Base: s.base("add-client"), Client: id}); err != nil {
		b.Abort()
		return nil, err
	}
	log.Info().Msg("client connected")
	s.counters.clientsAdded.Add(1)

	closed := s.readStream(conn, func(m *protocol.Map, now time.Time) (scheduler.Stimulus, bool, error) {
		st, ok, err := clientStimulus(id, m, now)
		if err != nil && s.forwardStreamOp(m, "client", id) {
			return nil, false, nil
		}
		return st, ok, err
	}, func(item []byte, now time.Time) (scheduler.Stimulus, bool) {
		return clientOpFast(id, item, now)
	}, log)

	if s.detach(s.clients, id, b) {
		s.loop.submit(&scheduler.RemoveClient{Base: s.base("client-stream-closed"), Client: id})
	}
	flushCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = b.Close(flushCtx)
	cancel()
	s.counters.clientsRemoved.Add(1)
	log.Info().Bool("clean", closed).Msg("client disconnected")
	return nil, nil
}

// streamOp converts one op of a stream into a stimulus; ok is false for ops
// the engine need not see.
type streamOp func(m *protocol.Map, now time.Time) (st scheduler.Stimulus, ok bool, err error)

// fastOp reads one raw op of a batch straight into a stimulus
// (lazydecode.go); ok is false when it does not handle that op.
type fastOp func(item []byte, now time.Time) (st scheduler.Stimulus, ok bool)

// readStream reads batches (lists of op dicts) until close-stream, EOF or
// an unreadable message, and runs each batch's stimuli through the engine
// on this goroutine (loop.handleBatch). Ops that fast reads (nil: none) skip
// the generic decoder; a traced Conn decodes everything, so that the trace
// sees each message. Bad ops are logged and skipped: one malformed op must
// not cost a client its results. It reports whether the peer closed the
// stream with close-stream.
func (s *Server) readStream(conn *comm.Conn, convert streamOp, fast fastOp, log zerolog.Logger) bool {
	if conn.Tracing() {
		fast = nil
	}
	for {
		b, err := readBatch(conn, fast != nil)
		if err != nil {
			if !errors.Is(err, comm.ErrClosed) {
				log.Debug().Err(err).Msg("stream ended")
			}
			return false
		}
		now := s.clock.Now()
		stims := make([]scheduler.Stimulus, 0, b.len())
		for i := range b.len() {
			if fast != nil {
				if st, ok := fast(b.raws[i], now); ok {
					stims = append(stims, st)
					continue
				}
			}
			item, err := b.value(i)
			if err != nil {
				log.Debug().Err(err).Msg("stream ended: unreadable message")
				return false
			}
			if item == "OK" {
				continue
			}
			m, ok := item.(*protocol.Map)
			if !ok {
				log.Warn().Str("msg", protocol.String(item)).Msg("stream message is not a dict; ignored")
				continue
			}
			if op, _ := m.Get("op").(string); op == "close-stream" {
				s.submitStimuli(stims)
				return true
			}
			st, ok, err := convert(m, now)
			if err != nil {
				log.Warn().Err(err).Msg("bad stream message ignored")
			} else if ok {
				stims = append(stims, st)
			}
		}
		s.submitStimuli(stims)
	}
}

// batch is one stream message's items: decoded (vals), or with lazy
// reading raw msgpack views into the Conn's scratch (raws, valid until the
// next read), each decoded by value when the fast path does not take it.
type batch struct {
	vals   []any
	raws   [][]byte
	frames [][]byte
	from   int64 // the next blob frame (protocol.DecodeElement)
}

// readBatch reads one stream message. Without lazy it is decoded whole
// (Conn.Read, which traces it).
func readBatch(conn *comm.Conn, lazy bool) (*batch, error) {
	if !lazy {
		msg, err := conn.Read()
		if err != nil {
			return nil, err
		}
		vals, ok := msg.([]any)
		if !ok {
			vals = []any{msg}
		}
		return &batch{vals: vals}, nil
	}
	frames, err := conn.ReadTransient()
	if err != nil {
		return nil, err
	}
	raws, err := protocol.SplitBatch(frames[0])
	if err != nil {
		return nil, fmt.Errorf("read from %s: %w", conn.Peer(), err)
	}
	return &batch{raws: raws, frames: frames, from: 1}, nil
}

func (b *batch) len() int {
	if b.raws != nil {
		return len(b.raws)
	}
	return len(b.vals)
}

// value decodes item i (in order: blobs claim frames in order).
func (b *batch) value(i int) (any, error) {
	if b.raws == nil {
		return b.vals[i], nil
	}
	return protocol.DecodeElement(b.frames, b.raws[i], &b.from)
}

func (s *Server) submitStimuli(stims []scheduler.Stimulus) {
	if len(stims) > 0 {
		s.loop.handleBatch(stims)
	}
}

// registerWorker is Scheduler.add_worker followed by handle_worker.
func (s *Server) registerWorker(ctx context.Context, req *comm.Request) (any, error) {
	conn := req.TakeOver()
	aw, err := addWorkerStimulus(req.Args, s.clock.Now())
	if err != nil {
		_ = conn.Write(protocol.NewMap("status", "error", "message", err.Error(), "time", s.unixNow()))
		return nil, err
	}
	log := req.Log.With().Str("worker", aw.Address).Logger()
	var refused error
	var nWorkers int
	var plugins *protocol.Map
	if err := s.loop.query(ctx, func(st *scheduler.State) {
		refused = st.CheckNewWorker(aw.Address, aw.Name)
		nWorkers = st.NumWorkers() // not len(WorkerAddresses()): O(1), not a slice per registration
		plugins = st.Plugins(scheduler.WorkerPlugin)
	}); err != nil {
		return nil, err
	}
	if refused != nil {
		log.Warn().Err(refused).Msg("register-worker refused")
		return nil, conn.Write(protocol.NewMap("status", "error", "message", refused.Error(), "time", s.unixNow()))
	}
	reply := protocol.NewMap("status", "OK", "time", s.unixNow(),
		"heartbeat-interval", scheduler.HeartbeatInterval(nWorkers+1),
		"worker-plugins", s.workerPlugins(plugins), "warning", "", "error", "")
	if err := conn.Write(reply); err != nil {
		return nil, fmt.Errorf("register-worker reply to %s: %w", aw.Address, err)
	}
	b := comm.NewBatchedSend(conn, 0, func(err error) {
		log.Debug().Err(err).Msg("worker stream write failed")
	})
	s.mu.Lock()
	s.workers[aw.Address] = b
	s.mu.Unlock()
	if err := s.loop.submitWait(ctx, aw); err != nil {
		b.Abort()
		return nil, err
	}
	log.Info().Str("name", aw.Name).Int("nthreads", aw.NThreads).Msg("worker registered")

	reuse := &streamReuse{}
	graceful := s.readStream(conn, func(m *protocol.Map, now time.Time) (scheduler.Stimulus, bool, error) {
		st, ok, err := workerStimulus(aw.Address, m, now)
		if err != nil && s.forwardStreamOp(m, "worker", aw.Address) {
			return nil, false, nil
		}
		return st, ok, err
	}, func(item []byte, now time.Time) (scheduler.Stimulus, bool) {
		return workerOpFast(aw.Address, item, now, reuse)
	}, log)

	s.detach(s.workers, aw.Address, b)
	b.Abort()
	s.pool.Remove(aw.Address)
	s.loop.submit(&scheduler.RemoveWorker{Base: s.base("handle-worker-cleanup"), Worker: aw.Address,
		Reason: "worker-stream-closed"})
	log.Info().Bool("close-stream", graceful).Msg("worker stream closed")
	return nil, nil
}

// detach removes the stream registered under id if it is still b (a
// reconnected peer may have replaced it) and reports whether it was.
func (s *Server) detach(streams map[string]*comm.BatchedSend, id string, b *comm.BatchedSend) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if streams[id] != b {
		return false
	}
	delete(streams, id)
	return true
}

// streamDrain is how long a stream being shut may take to write what it
// has queued (a worker's close op) before its connection is closed anyway:
// a worker that stopped reading must not keep its connection.
const streamDrain = time.Second

// dropWorkerStream shuts a worker's stream after the engine removed it
// (worker-ttl, restart, unregister): the close op it queued is written by
// the stream's writer within s.drain, then the connection closes and
// its reader's removal is a no-op. It never waits, so a holder of the
// engine's lock may call it (doc.go).
func (s *Server) dropWorkerStream(addr string) {
	s.mu.Lock()
	b := s.workers[addr]
	delete(s.workers, addr)
	s.mu.Unlock()
	if b != nil {
		b.Shut(s.drain)
	}
}

// registerNanny is Scheduler.add_nanny: reply with the stored nanny
// plugins, then read the nanny's one status message; the handler's return
// (None) is the final reply.
func (s *Server) registerNanny(ctx context.Context, req *comm.Request) (any, error) {
	conn := req.Conn
	var plugins *protocol.Map
	if err := s.loop.query(ctx, func(st *scheduler.State) { plugins = st.Plugins(scheduler.NannyPlugin) }); err != nil {
		return nil, err
	}
	if err := conn.Write(protocol.NewMap("status", "OK", "nanny-plugins", plugins)); err != nil {
		return nil, fmt.Errorf("register_nanny reply: %w", err)
	}
	// a socket deadline is wall time, whatever the clock
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Minute)); err != nil {
		return nil, err
	}
	msg, err := conn.Read()
	_ = conn.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, fmt.Errorf("register_nanny status from %s: %w", conn.Peer(), err)
	}
	req.Log.Debug().Str("status", protocol.String(msg)).Msg("nanny started its worker")
	return nil, nil
}

func addWorkerStimulus(m *protocol.Map, now time.Time) (*scheduler.AddWorker, error) {
	f := &fields{op: "register-worker", m: m}
	aw := &scheduler.AddWorker{
		Base:           f.base(now),
		Address:        f.str("address"),
		NThreads:       int(f.int("nthreads")),
		MemoryLimit:    f.int("memory_limit"),
		Nanny:          f.str("nanny"),
		Services:       f.mapOf("services"),
		LocalDirectory: f.str("local_directory"),
		PID:            f.int("pid"),
		ServerID:       f.str("server_id"),
		Status:         f.str("status"),
		Extra:          f.mapOf("extra"),
		Versions:       f.mapOf("versions"),
		Metrics:        m.Get("metrics"), Memory: heartbeatMemory(f.mapOf("metrics")),
	}
	switch name := m.Get("name").(type) {
	case string:
		aw.Name, aw.NameValue = name, name
	case nil:
		aw.Name, aw.NameValue = aw.Address, aw.Address
	default:
		aw.Name, aw.NameValue = protocol.String(name), name
	}
	aw.Resources = map[string]float64{}
	for _, e := range f.mapOf("resources").Items() {
		k, _ := e.Key.(string)
		switch q := e.Value.(type) {
		case float64:
			aw.Resources[k] = q
		case int64:
			aw.Resources[k] = float64(q)
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	if aw.Address == "" {
		return nil, fmt.Errorf("register-worker without an address")
	}
	return aw, nil
}

func (s *Server) base(prefix string) scheduler.Base {
	return stimulusBase("", prefix, s.clock.Now())
}

func (s *Server) unixNow() float64 { return float64(s.clock.Now().UnixNano()) / 1e9 }
