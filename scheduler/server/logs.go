package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"daskgo/comm"
	"daskgo/protocol"
)

// Logs for Client.get_scheduler_logs and get_worker_logs. distributed's
// ServerNode keeps its recent log records in a DequeHandler
// (distributed.admin.log-length) and Node.get_logs returns them newest
// first as (levelname, formatted message) tuples. logRing is that deque
// for our zerolog records: a zerolog hook copies each record's level and
// message into a bounded ring.

// logLength is distributed.admin.log-length's default.
const logLength = 10000

type logRecord struct {
	at    time.Time
	level zerolog.Level
	msg   string
}

// logRing is safe for concurrent use: every goroutine logs.
type logRing struct {
	mu    sync.Mutex
	buf   []logRecord
	head  int
	max   int
	clock Clock
}

func newLogRing(n int, clock Clock) *logRing { return &logRing{max: n, clock: clock} }

// Run implements zerolog.Hook.
func (r *logRing) Run(_ *zerolog.Event, level zerolog.Level, msg string) {
	if msg == "" {
		return
	}
	rec := logRecord{at: r.clock.Now(), level: level, msg: msg}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < r.max {
		r.buf = append(r.buf, rec)
		return
	}
	r.buf[r.head] = rec
	r.head = (r.head + 1) % r.max
}

// recent mirrors Node.get_logs(start, n, timestamps): newest first, at
// most n (0: all), none created before start.
func (r *logRing) recent(start float64, n int, timestamps bool) []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []any{}
	for i := len(r.buf) - 1; i >= 0; i-- {
		rec := r.buf[(r.head+i)%len(r.buf)]
		created := float64(rec.at.UnixNano()) / 1e9
		if (n > 0 && len(out) >= n) || created < start {
			break
		}
		level := pyLevel(rec.level)
		line := fmt.Sprintf("%s - distributed.scheduler - %s - %s", rec.at.Format("2006-01-02 15:04:05,000"), level, rec.msg)
		if timestamps {
			out = append(out, []any{created, level, line})
		} else {
			out = append(out, []any{level, line})
		}
	}
	return out
}

// pyLevel is logging's levelname for a zerolog level.
func pyLevel(l zerolog.Level) string {
	switch l {
	case zerolog.WarnLevel:
		return "WARNING"
	case zerolog.ErrorLevel:
		return "ERROR"
	case zerolog.FatalLevel, zerolog.PanicLevel:
		return "CRITICAL"
	default:
		return strings.ToUpper(l.String())
	}
}

// logs is the logs / get_logs RPC (Node.get_logs).
func (s *Server) logs(_ context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	start, n, ts := f.float("start"), f.int("n"), f.bool("timestamps")
	if f.err != nil {
		return nil, f.err
	}
	return s.logRing.recent(start, int(n), ts), nil
}

// workerLogs is Scheduler.get_worker_logs: get_logs broadcast to workers
// (or their nannies), {address: [(level, message), ...]}.
func (s *Server) workerLogs(ctx context.Context, req *comm.Request) (any, error) {
	nanny, _ := req.Args.Get("nanny").(bool)
	msg := protocol.NewMap("op", "get_logs", "n", req.Args.Get("n"))
	return s.broadcastMsg(ctx, msg, optionalStrings(req.Args.Get("workers")), nanny, "raise")
}
