package server

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"daskgo/protocol"
)

// The scheduler's system monitor: distributed.system_monitor.SystemMonitor
// (Scheduler.monitor), the series performance_report's "System" tab and
// the host's dask_scheduler.monitor read. Every sysMonitorInterval it
// records time, cpu (percent of one core), memory (resident bytes),
// num_fds and the host's network rates (host_net_io.read_bps /
// write_bps), keeping the last sysMonitorLength samples, with distributed's
// names and its count / range_query semantics.
//
// The scheduler's cost is the Go process and every Python process it
// runs, so cpu and memory sum the Go process, the materializer helpers
// and the host; num_fds is the Go process's.
//
// It starts on first read (performance_report's __aenter__ reads
// monitor.count) and then runs until the server stops: nothing samples for
// a scheduler nobody asks. Its goroutine is the Server's (goRun).

const (
	sysMonitorInterval = 500 * time.Millisecond // distributed.admin.system-monitor.interval
	sysMonitorLength   = 7200                   // distributed.admin.system-monitor.log-length
	clockTicks         = 100                    // USER_HZ: /proc's CPU times are in 1/100 s on Linux
)

// sysMonitorNames are the series, in distributed's order.
var sysMonitorNames = []string{"cpu", "memory", "time", "host_net_io.read_bps", "host_net_io.write_bps", "num_fds"}

type sysMonitor struct {
	mu      sync.Mutex // guards everything below
	started bool
	count   int64       // samples taken, ever
	series  [][]float64 // per name, the last sysMonitorLength values
	// the previous sample's counters, for the rates
	lastAt         time.Time
	lastCPU        float64 // seconds of CPU of the processes
	lastRx, lastTx float64
}

// monitor starts the monitor if it is not running; the first sample is
// taken now.
func (s *Server) monitor() *sysMonitor {
	m := &s.sysmon
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		m.started = true
		m.series = make([][]float64, len(sysMonitorNames))
		m.sampleLocked(s.monitoredPIDs())
		s.goRun(func() { s.runMonitor(m) })
	}
	return m
}

func (s *Server) runMonitor(m *sysMonitor) {
	t := s.clock.NewTicker(sysMonitorInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C():
		}
		pids := s.monitoredPIDs()
		m.mu.Lock()
		m.sampleLocked(pids)
		m.mu.Unlock()
	}
}

// monitoredPIDs are the processes whose CPU and memory the monitor sums.
func (s *Server) monitoredPIDs() []int {
	pids := append([]int{os.Getpid()}, s.mat.PIDs()...)
	if s.host != nil {
		if p := s.host.PID(); p > 0 {
			pids = append(pids, p)
		}
	}
	return pids
}

// sampleLocked is SystemMonitor.update.
func (m *sysMonitor) sampleLocked(pids []int) {
	now := time.Now()
	var cpu, rss float64
	for _, pid := range pids {
		c, r := procUsage(pid)
		cpu, rss = cpu+c, rss+r
	}
	rx, tx := netBytes()
	var cpuPct, rxBps, txBps float64
	if dt := now.Sub(m.lastAt).Seconds(); !m.lastAt.IsZero() && dt > 0 {
		cpuPct = max(0, (cpu-m.lastCPU)/dt*100)
		rxBps, txBps = max(0, (rx-m.lastRx)/dt), max(0, (tx-m.lastTx)/dt)
	}
	m.lastAt, m.lastCPU, m.lastRx, m.lastTx = now, cpu, rx, tx
	values := []float64{cpuPct, rss, float64(now.UnixNano()) / 1e9, rxBps, txBps, float64(openFDs())}
	for i, v := range values {
		sr := append(m.series[i], v)
		if len(sr) > sysMonitorLength {
			sr = append(sr[:0], sr[len(sr)-sysMonitorLength:]...)
		}
		m.series[i] = sr
	}
	m.count++
}

// query answers the host's "monitor" call: {"count", "quantities": {name:
// [values]}} with every kept value, or with range_query(start)'s when start
// is given (SystemMonitor.range_query: the values since sample number
// start, None where they are no longer kept).
func (m *sysMonitor) query(start *int64) *protocol.Map {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := &protocol.Map{}
	for i, name := range sysMonitorNames {
		q.Entries = append(q.Entries, protocol.Entry{Key: name, Value: m.rangeLocked(i, start)})
	}
	return protocol.NewMap("count", m.count, "quantities", q)
}

func (m *sysMonitor) rangeLocked(i int, start *int64) []any {
	v := m.series[i]
	if start == nil {
		out := make([]any, len(v))
		for j, x := range v {
			out[j] = x
		}
		return out
	}
	if *start >= m.count {
		return []any{}
	}
	// istart = min(-1, max(-len(v), start - count)); values v[istart:],
	// as range_query (which yields None past the deque's start)
	n := min(int64(len(v)), m.count-*start)
	out := make([]any, 0, n)
	for j := int64(len(v)) - n; j < int64(len(v)); j++ {
		out = append(out, v[j])
	}
	return out
}

// monitorService is the host's "monitor" call: {"start": int or None,
// "sample": bool}; sample takes one now (SystemMonitor.update).
func (s *Server) monitorService(_ context.Context, args *protocol.Map) (any, error) {
	m := s.monitor()
	if b, _ := args.Get("sample").(bool); b {
		pids := s.monitoredPIDs()
		m.mu.Lock()
		m.sampleLocked(pids)
		m.mu.Unlock()
	}
	var start *int64
	if v, ok := args.Get("start").(int64); ok {
		start = &v
	}
	return m.query(start), nil
}

// procUsage is a process's CPU time (seconds) and resident memory (bytes)
// from /proc; zeros where there is none.
func procUsage(pid int) (cpu, rss float64) {
	dir := "/proc/" + strconv.Itoa(pid)
	if b, err := os.ReadFile(dir + "/stat"); err == nil {
		// fields after the command's closing parenthesis: state is 3rd,
		// utime 14th, stime 15th of the whole line
		if i := bytes.LastIndexByte(b, ')'); i >= 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 12 {
				u, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				cpu = (u + st) / clockTicks
			}
		}
	}
	if b, err := os.ReadFile(dir + "/statm"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			pages, _ := strconv.ParseFloat(f[1], 64)
			rss = pages * float64(os.Getpagesize())
		}
	}
	return cpu, rss
}

// netBytes is the host's bytes received and sent over every interface,
// as psutil.net_io_counters() sums them.
func netBytes() (rx, tx float64) {
	f, err := os.Open("/proc/net/dev")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) < 9 {
			continue
		}
		r, _ := strconv.ParseFloat(fs[0], 64)
		t, _ := strconv.ParseFloat(fs[8], 64)
		rx, tx = rx+r, tx+t
	}
	return rx, tx
}
