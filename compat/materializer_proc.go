package compat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"daskgo/protocol"
)

// incarnation is one run of the helper process. Its pending map is guarded
// by Materializer.mu; the rest is set before its goroutines start.
type incarnation struct {
	cmd     *exec.Cmd
	pid     int
	stdin   io.WriteCloser
	stdout  io.ReadCloser
	stderr  *stderrLog
	pending map[int64]*job // written (or being written) to this process
	// retiring: take no more requests; close stdin once pending is empty
	// (helper_recycle.go). Guarded by Materializer.mu.
	retiring bool
	startRSS int64 // bytes, after the startup handshake; 0 if unknown

	mu      sync.Mutex
	reason  string // why Go killed the process, if it did
	retired bool   // it exited because Go retired it
}

// spawn starts a helper and completes its startup handshake (a versions
// request), so that a broken interpreter or environment is reported here,
// with the helper's last stderr lines, instead of as a failed graph later.
func (m *Materializer) spawn(ctx context.Context) (*incarnation, error) {
	cmd := exec.Command(m.cfg.Python, "-c", helperBootstrap)
	cmd.Env = append(os.Environ(), m.cfg.Env...)
	cmd.Env = append(cmd.Env, "DASKGO_MATERIALIZER_CHUNK="+strconv.Itoa(m.cfg.ChunkTasks))
	// dask.order iterates sets: with ordering=python and for the check,
	// the helper's priorities must come from the seed Go orders with
	cmd.Env = append(cmd.Env, "PYTHONHASHSEED="+strconv.FormatUint(uint64(m.cfg.HashSeed), 10))
	cmd.Dir = m.cfg.Dir
	// WaitDelay bounds Wait if a grandchild keeps the stderr pipe open.
	cmd.WaitDelay = exitGrace
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("materializer helper stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("materializer helper stdout: %w", err)
	}
	errLog := &stderrLog{log: m.log}
	cmd.Stderr = errLog
	progR, progW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("materializer helper program pipe: %w", err)
	}
	cmd.ExtraFiles = []*os.File{progR} // fd 3 in the helper
	if err := cmd.Start(); err != nil {
		progR.Close()
		progW.Close()
		return nil, fmt.Errorf("start materializer helper %q: %w", m.cfg.Python, err)
	}
	progR.Close()
	// The sources go through a pipe, not argv: a 40 kB command line would
	// fill every `ps` listing. The writer ends when the helper has read them
	// or is gone (EPIPE); spawn joins it before returning.
	progDone := make(chan struct{})
	go func() {
		defer close(progDone)
		defer progW.Close()
		_, _ = io.WriteString(progW, helperWireScript+"\x00"+materializerScript)
	}()
	defer func() { <-progDone }()
	inc := &incarnation{
		cmd: cmd, pid: cmd.Process.Pid, stdin: stdin, stdout: stdout,
		stderr: errLog, pending: map[int64]*job{},
	}
	errLog.setPID(inc.pid)
	versions, plugins, err := m.handshake(ctx, inc)
	if err != nil {
		inc.kill("startup failed")
		status := inc.wait()
		tail := errLog.tail()
		return nil, fmt.Errorf("materializer helper %q (pid %d, %s) did not start: %w%s",
			m.cfg.Python, inc.pid, status, err, tail)
	}
	inc.startRSS = processRSS(inc.pid)
	m.mu.Lock()
	m.versions = versions
	m.plugins = plugins
	m.mu.Unlock()
	m.log.Debug().Int("helper_pid", inc.pid).Int64("rss", inc.startRSS).Msg("materializer helper started")
	return inc, nil
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
	if err := protocol.WriteFrames(inc.stdin, frames); err != nil {
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

// runIncarnation serves inc until its process is gone and returns its exit
// status. The calling (supervisor) goroutine reads; one goroutine writes.
func (m *Materializer) runIncarnation(inc *incarnation) string {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.writeLoop(inc, stop)
	}()
	m.readLoop(inc)
	status := inc.wait()
	close(stop)
	_ = inc.stdin.Close()
	wg.Wait()
	return status
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
		if err := protocol.WriteFrames(inc.stdin, frames); err != nil {
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
	}
	return encodeMaterializeRequest(j.wireID, j.req.Msg, m.cfg.Ordering, m.cfg.CheckOrder)
}

// helperBootstrap is the helper's `python -c` text. It reads the two
// sources from fd 3 (helper_wire.py NUL materializer.py), installs the first
// as the module helper_wire (registered before it runs: dataclasses look
// their module up), then runs the second as __main__.
const helperBootstrap = `import os, sys, types
with os.fdopen(3, "rb") as _f:
    _wire_src, _main_src = _f.read().decode().split("\0", 1)
_wire = types.ModuleType("helper_wire")
sys.modules["helper_wire"] = _wire
exec(compile(_wire_src, "helper_wire.py", "exec"), _wire.__dict__)
del _f, _wire, _wire_src
exec(compile(_main_src, "materializer.py", "exec"))
`

// readLoop reads responses until the helper's stdout closes. A response
// that cannot be framed or decoded means the stream is lost: the helper is
// killed, which fails everything it owed (never a hang).
func (m *Materializer) readLoop(inc *incarnation) {
	for {
		frames, err := protocol.ReadFrames(inc.stdout, m.cfg.Limits)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				inc.kill(fmt.Sprintf("unreadable response: %v", err))
			}
			return
		}
		// task records are read in place (parseWireTasks); ReadFrames gives
		// every message buffers of its own, as DecodeKeepingRaw requires
		v, err := protocol.DecodeKeepingRaw(frames, "tasks")
		if err != nil {
			inc.kill(fmt.Sprintf("undecodable response: %v", err))
			return
		}
		m.handleResponse(inc, v)
	}
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

// kill SIGKILLs the process, remembering the first reason for the failure
// text of the requests it owed.
func (inc *incarnation) kill(reason string) {
	inc.mu.Lock()
	if inc.reason == "" {
		inc.reason = reason
	}
	inc.mu.Unlock()
	_ = inc.cmd.Process.Kill()
}

// wait reaps the process (SIGKILL if it lingers after closing stdout) and
// describes how it ended, e.g. "signal: killed" or "exit status 2".
func (inc *incarnation) wait() string {
	done := make(chan error, 1)
	go func() { done <- inc.cmd.Wait() }()
	var err error
	t := time.NewTimer(exitGrace)
	select {
	case err = <-done:
	case <-t.C:
		inc.kill("still running after closing its output")
		err = <-done
	}
	t.Stop()
	inc.stderr.flush()
	status := "unknown status"
	if ps := inc.cmd.ProcessState; ps != nil {
		status = ps.String()
	} else if err != nil {
		status = err.Error()
	}
	inc.mu.Lock()
	defer inc.mu.Unlock()
	if inc.reason != "" {
		status += "; " + inc.reason
	}
	return status
}
