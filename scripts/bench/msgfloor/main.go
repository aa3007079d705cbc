// Command msgfloor measures the floor of what the Go scheduler's I/O stack
// costs per stream message, with no scheduling engine behind it: the CPU
// (user + system) this process spends to read one small op from a stock
// Python peer and send one compute-task-sized op back.
//
// The scheduler with stock workers spends 100–200 µs of CPU per task while
// its zero-worker figure is ~23 µs, and profiles put ~37 % of it in the
// kernel (read, writev, epoll, context switches). This program keeps only
// that part: the real daskgo/comm stack configured as dask-go-scheduler
// configures it (GOMAXPROCS 1, comm.Server, a taken-over stream read with
// Conn.Read, replies through a BatchedSend at SchedulerToWorkerInterval),
// so what it costs per message is a lower bound for the scheduler's cost.
//
// Data flow, one goroutine per stream plus its BatchedSend writer:
//
//	peer ── {"op": "floor-stream"} ─► comm.Server ─► floor.stream (TakeOver)
//	peer ── [op, op, …] ─► Conn.Read ─► count ─► BatchedSend.Send(reply) ─► peer
//	peer ── [{"op": "close-stream"}] ─► flush, return (the server closes the conn)
//
// Protocol with the driver (scripts/bench/msgfloor.py): the first stdout line
// is the listen address; on SIGTERM/SIGINT or EOF on stdin the program shuts
// the server down and prints one JSON line of counters, then exits.
//
// The CPU window opens at the first message received (startup, the
// handshakes and the floor-stream requests are excluded) and closes when the
// last open stream has ended; later streams reopen it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"daskgo/comm"
	"daskgo/protocol"
)

type config struct {
	listen   string
	interval time.Duration
	payload  int
	logLevel string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.listen, "listen", "tcp://127.0.0.1:0", "address to listen on (port 0: any free port)")
	flag.DurationVar(&cfg.interval, "interval", 0, "BatchedSend interval of the reply stream (0: flush on idle, as the scheduler writes)")
	flag.IntVar(&cfg.payload, "payload", 100, "bytes of the run_spec bytes value in each reply")
	flag.StringVar(&cfg.logLevel, "log-level", "warn", "debug, info, warn or error (stderr)")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "msgfloor: %v\n", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	level, err := zerolog.ParseLevel(cfg.logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := zerolog.New(os.Stderr).Level(level).With().Timestamp().Logger()
	// dask-go-scheduler's runtimeDefaults: one P, so a stream reader handing
	// a message to the batched writer does not wake a second thread.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	lis, err := comm.Listen(ctx, cfg.listen, nil)
	if err != nil {
		return err
	}
	f := &floor{meter: &meter{}, interval: cfg.interval, runSpec: runSpec(cfg.payload)}
	srv := &comm.Server{
		Handlers: map[string]comm.Handler{"floor-stream": f.stream},
		Name:     "msgfloor",
		Logger:   log,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }() // owner: run; exits when Shutdown closes lis
	if _, err := fmt.Println(lis.Addr()); err != nil {
		srv.Close()
		<-served
		return fmt.Errorf("print address: %w", err)
	}

	stdinEOF, stopStdin := watchStdin()
	select {
	case <-ctx.Done():
	case <-stdinEOF:
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	shutErr := srv.Shutdown(shutCtx)
	cancel()
	if err := <-served; !errors.Is(err, comm.ErrServerClosed) {
		log.Warn().Err(err).Msg("serve ended early")
	}
	stopStdin()
	if shutErr != nil {
		log.Warn().Err(shutErr).Msg("shutdown timed out; connections were closed")
	}
	if err := json.NewEncoder(os.Stdout).Encode(f.meter.report()); err != nil {
		return fmt.Errorf("print report: %w", err)
	}
	return nil
}

// runSpec stands in for compute-task's run_spec: a bytes value of n bytes,
// varied so that no codec could shrink it (none is negotiated on one host).
func runSpec(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131 + 7)
	}
	return b
}

// watchStdin reports EOF on stdin (the driver closing its end) on the
// returned channel. stop ends the reader goroutine and waits for it. A
// terminal is not watched: making it non-blocking would change the shell's
// terminal too; SIGINT/SIGTERM still stop the program.
func watchStdin() (eof <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	if fi, err := os.Stdin.Stat(); err != nil || fi.Mode()&os.ModeCharDevice != 0 {
		return ch, func() {}
	}
	// Non-blocking, so that os.NewFile hands the descriptor to the runtime
	// poller and Close wakes the Read below: the goroutine gets an exit. If
	// that fails (a regular file), Read returns at once anyway.
	_ = syscall.SetNonblock(0, true)
	in := os.NewFile(0, "stdin")
	exited := make(chan struct{})
	go func() { // owner: run, through stop
		defer close(exited)
		_, _ = io.Copy(io.Discard, in)
		close(ch)
	}()
	return ch, func() {
		in.Close()
		<-exited
	}
}

// floor serves the "floor-stream" op.
type floor struct {
	meter    *meter
	interval time.Duration
	runSpec  []byte
}

// stream is registerWorker without the engine: take the connection over,
// reply through a BatchedSend, read batches until close-stream or EOF.
func (f *floor) stream(ctx context.Context, req *comm.Request) (any, error) {
	conn := req.TakeOver()
	// Shutdown cancels ctx but cannot interrupt Conn.Read; closing the
	// connection does, so this handler (and Shutdown) always finish.
	stopClosing := context.AfterFunc(ctx, func() { conn.Close() })
	defer stopClosing()
	b := comm.NewBatchedSend(conn, f.interval, func(err error) {
		req.Log.Debug().Err(err).Msg("reply stream write failed")
	})
	f.meter.opened()
	graceful, err := f.serve(conn, b)
	flushCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	if cerr := b.Close(flushCtx); cerr != nil && err == nil && graceful {
		err = fmt.Errorf("flush replies to %s: %w", conn.Peer(), cerr)
	}
	cancel()
	f.meter.closed(b.Stats())
	if err != nil {
		req.Log.Warn().Err(err).Msg("floor stream failed")
	}
	return nil, err
}

// serve is readStream's loop: each op dict (but close-stream) gets one
// reply. It reports whether the peer ended with close-stream.
func (f *floor) serve(conn *comm.Conn, b *comm.BatchedSend) (graceful bool, err error) {
	var seq int64
	for {
		msg, err := conn.Read()
		if err != nil {
			if errors.Is(err, comm.ErrClosed) {
				return false, nil
			}
			return false, fmt.Errorf("read stream: %w", err)
		}
		batch, ok := msg.([]any)
		if !ok {
			batch = []any{msg}
		}
		f.meter.received(countOps(batch))
		for _, item := range batch {
			m, ok := item.(*protocol.Map)
			if !ok {
				continue
			}
			if op, _ := m.Get("op").(string); op == "close-stream" {
				return true, nil
			}
			seq++
			if err := b.Send(f.reply(m.Get("key"), seq)); err != nil {
				return false, fmt.Errorf("reply %d: %w", seq, err)
			}
		}
	}
}

// countOps counts the op dicts of a batch that get a reply.
func countOps(batch []any) int {
	n := 0
	for _, item := range batch {
		if m, ok := item.(*protocol.Map); ok && m.Get("op") != "close-stream" {
			n++
		}
	}
	return n
}

// reply has compute-task's twelve fields (scheduler/messages.go), with the
// run_spec blob replaced by a plain bytes value of the same order of size.
func (f *floor) reply(key any, seq int64) *protocol.Map {
	return protocol.NewMap(
		"op", "compute-task",
		"key", key,
		"run_id", seq,
		"priority", []any{int64(0), int64(0), seq},
		"stimulus_id", "compute-task-"+strconv.FormatFloat(float64(time.Now().UnixMicro())/1e6, 'f', 6, 64),
		"who_has", protocol.NewMap(),
		"nbytes", protocol.NewMap(),
		"run_spec", f.runSpec,
		"resource_restrictions", protocol.NewMap(),
		"actor", false,
		"annotations", protocol.NewMap(),
		"span_id", nil,
	)
}

// meter counts messages and samples this process's CPU and context switches
// at the edges of the measurement window. Safe for concurrent use.
type meter struct {
	mu          sync.Mutex
	open        bool   // a message has arrived since the last stream ended
	start, end  sample // end is valid while !open and first is set
	first, last time.Time
	active      int // streams being served
	messagesIn  int
	batchesIn   int
	messagesOut int
	batchesOut  int
}

// sample is the process's CPU clock and context switch counters at one time.
type sample struct {
	at        time.Time
	user, sys time.Duration
	// ru_nvcsw/ru_nivcsw count exited threads too; the /proc sums (reported
	// as voluntary_ctxt_switches) do not, but the runtime rarely ends a
	// thread, so the two agree in practice.
	nvcsw, nivcsw          int64
	taskVolun, taskInvolun int64
	threads                int
}

func (m *meter) opened() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active++
}

// received counts one batch of n replied-to ops; the first op opens the
// window. A batch of only close-stream counts as a batch, not a message.
func (m *meter) received(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batchesIn++
	if n == 0 {
		return
	}
	now := time.Now()
	if !m.open {
		m.open = true
		if m.first.IsZero() {
			m.start = takeSample(false)
			m.first = now
		}
	}
	m.messagesIn += n
	m.last = now
}

// closed adds a finished stream's reply counters; when it was the last
// stream, the window closes.
func (m *meter) closed(messages, batches int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active--
	m.messagesOut += messages
	m.batchesOut += batches
	if m.active == 0 && m.open {
		m.end, m.open = takeSample(true), false
	}
}

// Report is the JSON line printed at exit.
type Report struct {
	MessagesIn     int     `json:"messages_in"`
	MessagesOut    int     `json:"messages_out"`
	BatchesIn      int     `json:"batches_in"`
	BatchesOut     int     `json:"batches_out"`
	CPUUserS       float64 `json:"cpu_user_s"`
	CPUSysS        float64 `json:"cpu_sys_s"`
	VoluntaryCtx   int64   `json:"voluntary_ctxt_switches"`
	InvoluntaryCtx int64   `json:"nonvoluntary_ctxt_switches"`
	RusageNvcsw    int64   `json:"rusage_nvcsw"`
	RusageNivcsw   int64   `json:"rusage_nivcsw"`
	WallS          float64 `json:"wall_s"`   // first message to last message
	WindowS        float64 `json:"window_s"` // the CPU window: first message to last stream end
	Threads        int     `json:"threads"`
	GOMAXPROCS     int     `json:"gomaxprocs"`
}

func (m *meter) report() Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := Report{
		MessagesIn: m.messagesIn, MessagesOut: m.messagesOut,
		BatchesIn: m.batchesIn, BatchesOut: m.batchesOut,
		GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
	if m.first.IsZero() {
		return r
	}
	end := m.end
	if m.open { // a stream was still open at shutdown
		end = takeSample(true)
	}
	r.CPUUserS = (end.user - m.start.user).Seconds()
	r.CPUSysS = (end.sys - m.start.sys).Seconds()
	r.VoluntaryCtx = end.taskVolun - m.start.taskVolun
	r.InvoluntaryCtx = end.taskInvolun - m.start.taskInvolun
	r.RusageNvcsw = end.nvcsw - m.start.nvcsw
	r.RusageNivcsw = end.nivcsw - m.start.nivcsw
	r.WallS = m.last.Sub(m.first).Seconds()
	r.WindowS = end.at.Sub(m.start.at).Seconds()
	r.Threads = end.threads
	return r
}

// takeSample reads getrusage and /proc/self/task/*/status. The cheap CPU
// clock is read innermost, so that reading /proc falls outside the window:
// last at the start, first at the end.
func takeSample(atEnd bool) sample {
	var s sample
	if atEnd {
		s.readRusage()
		s.readTasks()
	} else {
		s.readTasks()
		s.readRusage()
	}
	s.at = time.Now()
	return s
}

func (s *sample) readRusage() {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return // Linux never fails RUSAGE_SELF; zero counters would show it
	}
	s.user = time.Duration(ru.Utime.Nano())
	s.sys = time.Duration(ru.Stime.Nano())
	s.nvcsw, s.nivcsw = ru.Nvcsw, ru.Nivcsw
}

// readTasks sums voluntary_ctxt_switches and nonvoluntary_ctxt_switches
// over this process's threads (left at zero where /proc is missing).
func (s *sample) readTasks() {
	dirs, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	s.threads = len(dirs)
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/self/task/" + d.Name() + "/status")
		if err != nil {
			continue // the thread exited meanwhile
		}
		s.taskVolun += statusField(b, "voluntary_ctxt_switches:")
		s.taskInvolun += statusField(b, "nonvoluntary_ctxt_switches:")
	}
}

// statusField is the integer after name at the start of a line of a
// /proc status file, or 0.
func statusField(status []byte, name string) int64 {
	for line := range bytes.Lines(status) {
		if rest, ok := bytes.CutPrefix(line, []byte(name)); ok {
			v, _ := strconv.ParseInt(string(bytes.TrimSpace(rest)), 10, 64)
			return v
		}
	}
	return 0
}
