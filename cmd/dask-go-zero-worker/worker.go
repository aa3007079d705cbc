package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"daskgo/comm"
	"daskgo/protocol"
)

// workerToSchedulerInterval is distributed's Worker batched-stream interval.
const workerToSchedulerInterval = 2 * time.Millisecond

// intTypePickle is pickle.dumps(int) from the venv (protocol 4, with the
// frame opcode): the "type" of every result we report.
var intTypePickle = []byte("\x80\x04\x95\x14\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x03int\x94\x93\x94.")

// zeroPickle is pickle.dumps(0, protocol=4): the value get_data serves.
var zeroPickle = []byte("\x80\x04K\x00.")

// resultNbytes is sizeof(0) as distributed reports it for a small int.
const resultNbytes = 28

type workerConfig struct {
	scheduler   string
	host        string
	name        string
	nthreads    int
	memoryLimit int64
	versions    any
	firstTask   *firstTask
	duration    time.Duration // > 0: tasks run on nthreads "threads", this long each
	flood       int           // > 0: this many connections each send heartbeats back to back
	log         zerolog.Logger
	// heartbeats gives the worker its heartbeat connection: its own
	// (dialOwn) or one of the process's shared ones (sharedConns)
	heartbeats func(ctx context.Context) (heartbeatCaller, error)
}

// worker is one fake worker. The read loop owns the scheduler stream's
// reading side; held is shared with get_data handlers, hence the mutex.
type worker struct {
	cfg     workerConfig
	address string // our listener, as the scheduler will dial it
	started time.Time
	stream  *comm.BatchedSend

	mu   sync.Mutex
	held map[protocol.Key]struct{}

	finished       atomic.Int64 // tasks answered
	heartbeatsSent atomic.Int64
	served         atomic.Int64 // keys served by get_data

	ready chan *protocol.Map // compute-tasks waiting for a thread (duration > 0)
}

// runWorker lives until ctx ends, the scheduler closes the worker, or the
// connection fails. Every goroutine it starts has exited when it returns.
func runWorker(ctx context.Context, cfg workerConfig) error {
	l, err := comm.Listen(ctx, "tcp://"+net.JoinHostPort(cfg.host, "0"), nil)
	if err != nil {
		return fmt.Errorf("worker %s: %w", cfg.name, err)
	}
	w := &worker{cfg: cfg, address: l.Addr(), started: time.Now(), held: map[protocol.Key]struct{}{}}
	srv := &comm.Server{
		Handlers: map[string]comm.Handler{"get_data": w.getData},
		Name:     "dask-go-zero-worker",
		Logger:   cfg.log,
	}
	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		_ = srv.Serve(l)
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		<-serveDone
	}()

	conn, err := comm.Dial(ctx, cfg.scheduler, nil)
	if err != nil {
		return fmt.Errorf("worker %s: connect to scheduler: %w", cfg.name, err)
	}
	defer conn.Close()
	interval, err := w.register(ctx, conn)
	if err != nil {
		return fmt.Errorf("worker %s: %w", cfg.name, err)
	}
	w.stream = comm.NewBatchedSend(conn, workerToSchedulerInterval, nil)
	defer w.stream.Abort()
	if err := w.stream.Send(statusChange("running")); err != nil {
		return fmt.Errorf("worker %s: %w", cfg.name, err)
	}
	cfg.log.Info().Str("address", w.address).Str("scheduler", cfg.scheduler).Msg("registered")

	hbCtx, hbCancel := context.WithCancel(ctx)
	hbDone := make(chan error, 1)
	go func() { hbDone <- w.heartbeats(hbCtx, interval) }()
	var threads sync.WaitGroup
	if cfg.duration > 0 {
		w.ready = make(chan *protocol.Map, 1<<16)
		for range cfg.nthreads {
			threads.Add(1)
			go func() { defer threads.Done(); w.thread(hbCtx) }()
		}
	}
	for range cfg.flood {
		threads.Add(1)
		go func() { defer threads.Done(); w.flood(hbCtx) }()
	}
	defer threads.Wait() // after hbCancel below ends them
	// On SIGTERM leave like a stock worker: "closing", then close-stream.
	stopLeave := context.AfterFunc(ctx, func() { w.leave(conn) })

	loopErr := w.readLoop(conn)
	stopLeave()
	hbCancel()
	hbErr := <-hbDone
	cfg.log.Info().Int64("tasks", w.finished.Load()).Int64("served", w.served.Load()).
		Int64("heartbeats", w.heartbeatsSent.Load()).Msg("worker done")
	if ctx.Err() != nil || loopErr == nil {
		return nil // we were asked to stop, or the scheduler closed us
	}
	return fmt.Errorf("worker %s: %w", cfg.name, errors.Join(loopErr, hbErr))
}

// register is Worker._register_with_scheduler: the same fields a stock
// worker sends, then the scheduler's reply on the same comm, which becomes
// the batched stream. It returns the heartbeat interval the scheduler asked for.
func (w *worker) register(ctx context.Context, conn *comm.Conn) (time.Duration, error) {
	now := unixNow()
	msg := protocol.NewMap(
		"op", "register-worker",
		"reply", false,
		"address", w.address,
		"status", "init",
		"nthreads", w.cfg.nthreads,
		"name", w.cfg.name,
		"now", now,
		"resources", protocol.NewMap(),
		"memory_limit", w.cfg.memoryLimit,
		"local_directory", os.TempDir(),
		"services", protocol.NewMap(),
		"nanny", nil,
		"pid", os.Getpid(),
		"versions", w.cfg.versions,
		"metrics", w.metrics(),
		"extra", protocol.NewMap(),
		"stimulus_id", fmt.Sprintf("worker-connect-%f", now),
		"server_id", "Worker-zero-"+w.cfg.name+"-"+fmt.Sprint(os.Getpid()),
	)
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	if err := conn.Write(msg); err != nil {
		return 0, fmt.Errorf("register-worker: %w", err)
	}
	reply, err := conn.Read()
	if err != nil {
		return 0, fmt.Errorf("register-worker reply: %w", err)
	}
	m, ok := reply.(*protocol.Map)
	if !ok || m.Get("status") != "OK" {
		return 0, fmt.Errorf("register-worker refused: %s", protocol.String(reply))
	}
	if warning, _ := m.Get("warning").(string); warning != "" {
		w.cfg.log.Warn().Str("warning", warning).Msg("scheduler warning at registration")
	}
	return heartbeatInterval(m.Get("heartbeat-interval"), 500*time.Millisecond), nil
}

// readLoop handles the scheduler's batches until the stream ends. nil means
// the scheduler told us to close.
func (w *worker) readLoop(conn *comm.Conn) error {
	for {
		msg, err := conn.Read()
		if err != nil {
			return fmt.Errorf("scheduler stream: %w", err)
		}
		batch, ok := msg.([]any)
		if !ok {
			batch = []any{msg}
		}
		for _, item := range batch {
			done, err := w.handle(item)
			if err != nil {
				return err
			}
			if done {
				return nil
			}
		}
	}
}

// handle dispatches one op (Worker.__init__ stream_handlers). true = close.
func (w *worker) handle(item any) (bool, error) {
	m, ok := item.(*protocol.Map)
	if !ok {
		if item == "OK" { // legacy end-of-batch marker
			return false, nil
		}
		return false, fmt.Errorf("scheduler stream: expected an op dict, got %s", protocol.String(item))
	}
	op, _ := m.Get("op").(string)
	switch op {
	case "compute-task":
		return false, w.computeTask(m)
	case "free-keys":
		w.forget(m.Get("keys"))
	case "remove-replicas":
		w.removeReplicas(m)
	case "acquire-replicas":
		w.acquireReplicas(m)
	case "steal-request":
		w.stealRequest(m)
	case "close", "close-stream":
		w.leave(nil)
		return true, nil
	case "remove-worker", "worker-status-change", "refresh-who-has", "cancel-compute", "shuffle-fail":
		// Nothing to do for a worker that holds no real data.
	default:
		return false, fmt.Errorf("scheduler stream: unknown op %q (a stock worker would shut down)", op)
	}
	return false, nil
}

// thread runs queued tasks one at a time, each taking cfg.duration, until
// ctx ends.
func (w *worker) thread(ctx context.Context) {
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case m := <-w.ready:
			t.Reset(w.cfg.duration)
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			if err := w.finish(m); err != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// computeTask "runs" the task: it is finished as soon as it arrives, or
// queued for a thread with --task-duration.
func (w *worker) computeTask(m *protocol.Map) error {
	w.cfg.firstTask.mark(w.cfg.log)
	if w.ready != nil {
		select {
		case w.ready <- m:
			return nil
		default:
			return errors.New("compute-task: more than 65536 tasks queued on one fake worker")
		}
	}
	return w.finish(m)
}

// finish reports the task finished.
func (w *worker) finish(m *protocol.Map) error {
	key, err := protocol.KeyOf(m.Get("key"))
	if err != nil {
		return fmt.Errorf("compute-task: %w", err)
	}
	w.mu.Lock()
	w.held[key] = struct{}{}
	w.mu.Unlock()
	n := w.finished.Add(1)
	now := unixNow()
	return w.stream.Send(protocol.NewMap(
		"op", "task-finished",
		"key", key,
		"run_id", m.Get("run_id"),
		"nbytes", resultNbytes,
		"type", intTypePickle,
		"typename", "int",
		"metadata", protocol.NewMap(),
		"thread", 1+n%int64(w.cfg.nthreads),
		// A zero duration would make the Python scheduler's work stealing
		// assert (stealing.py: steal_time_ratio): report one microsecond.
		"startstops", []any{protocol.NewMap("action", "compute", "start", now-1e-6, "stop", now)},
		"status", "OK",
		"stimulus_id", fmt.Sprintf("task-finished-%f", now),
	))
}

func (w *worker) forget(keys any) []protocol.Key {
	list, _ := keys.([]any)
	var dropped []protocol.Key
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range list {
		if k, err := protocol.KeyOf(v); err == nil {
			if _, ok := w.held[k]; ok {
				delete(w.held, k)
				dropped = append(dropped, k)
			}
		}
	}
	return dropped
}

// removeReplicas releases held keys and says so, as a stock worker's
// memory→released transition does (release-worker-data).
func (w *worker) removeReplicas(m *protocol.Map) {
	for _, k := range w.forget(m.Get("keys")) {
		_ = w.stream.Send(protocol.NewMap("op", "release-worker-data", "key", k,
			"stimulus_id", fmt.Sprintf("remove-replicas-%f", unixNow())))
	}
}

// acquireReplicas pretends the fetch succeeded at once (add-keys).
func (w *worker) acquireReplicas(m *protocol.Map) {
	who, _ := m.Get("who_has").(*protocol.Map)
	var keys []any
	w.mu.Lock()
	for _, e := range who.Items() {
		if k, err := protocol.KeyOf(e.Key); err == nil {
			w.held[k] = struct{}{}
			keys = append(keys, k)
		}
	}
	w.mu.Unlock()
	if len(keys) > 0 {
		_ = w.stream.Send(protocol.NewMap("op", "add-keys", "keys", keys,
			"stimulus_id", fmt.Sprintf("gather-dep-success-%f", unixNow())))
	}
}

// stealRequest: every task we were given is already finished ("memory"),
// or already forgotten (None), so a steal is always refused.
func (w *worker) stealRequest(m *protocol.Map) {
	var state any
	if k, err := protocol.KeyOf(m.Get("key")); err == nil {
		w.mu.Lock()
		if _, ok := w.held[k]; ok {
			state = "memory"
		}
		w.mu.Unlock()
	}
	_ = w.stream.Send(protocol.NewMap("op", "steal-response", "key", m.Get("key"),
		"state", state, "stimulus_id", m.Get("stimulus_id")))
}

// leave sends a stock worker's goodbye and flushes it. conn, when given,
// is closed afterwards to end the read loop.
func (w *worker) leave(conn *comm.Conn) {
	_ = w.stream.Send(statusChange("closing"), protocol.NewMap("op", "close-stream"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = w.stream.Close(ctx)
	cancel()
	if conn != nil {
		conn.Close()
	}
}

func statusChange(status string) *protocol.Map {
	return protocol.NewMap("op", "worker-status-change", "status", status,
		"stimulus_id", fmt.Sprintf("worker-status-change-%f", unixNow()))
}

func unixNow() float64 { return float64(time.Now().UnixNano()) / 1e9 }
