package compat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"daskgo/protocol"
)

// The supervised-process piece, part 1: starting a Python process and
// ending it. A Python process of the scheduler's (the scheduler-side host;
// the graph helpers' bootstrap has the same shape) is `python -c BOOTSTRAP`
// with its sources sent through fd 3, framed messages on stdin/stdout
// (proc_pipe.go) and stderr turned into log lines. proc_supervise.go starts
// one when it is needed and notices when it dies.

// pySource is one Python module a process runs: all but the last are
// installed as modules under Name before the last runs as __main__.
type pySource struct {
	Name, Text string
}

// procSpec is how to start one kind of Python process.
type procSpec struct {
	What     string // "scheduler-side Python host": for logs and errors
	PIDField string // the log field of the process's pid, e.g. "host_pid"
	Python   string
	Env      []string // appended to the inherited environment
	Dir      string
	Sources  []pySource
	Log      zerolog.Logger
}

// proc is one running process. Set before any goroutine sees it, except
// the fields under mu.
type proc struct {
	spec   *procSpec
	cmd    *exec.Cmd
	pid    int
	stdin  io.WriteCloser // an *os.File from os.Pipe, so that writes can take deadlines
	stdout io.ReadCloser
	stderr *stderrLog

	mu     sync.Mutex
	reason string // why Go killed the process, if it did
}

// sourcesBootstrap reads NUL-separated "name\n" + text records from fd 3
// and runs them (pySource).
//
// Its first statement drops the working directory ("", which `python -c`
// puts first on sys.path) before anything else is imported, the bootstrap's
// own imports included: like the `dask scheduler` console script, a
// process of ours never imports from the directory the scheduler was
// started in, where a stray collections.py or types.py would shadow the
// stdlib (collections and types are not loaded at interpreter startup).
// Every process goes through here, so no module it runs has to repeat it;
// sys is built in, so importing it cannot be shadowed.
const sourcesBootstrap = `import sys
if sys.path and sys.path[0] == "":
    del sys.path[0]
import os, types
with os.fdopen(3, "rb") as _f:
    _recs = _f.read().decode().split("\0")
for _r in _recs[:-1]:
    _n, _t = _r.split("\n", 1)
    _m = types.ModuleType(_n)
    _m.__file__ = _n + ".py"
    sys.modules[_n] = _m
    exec(compile(_t, _n + ".py", "exec"), _m.__dict__)
_n, _t = _recs[-1].split("\n", 1)
del _f, _recs
exec(compile(_t, _n + ".py", "exec"))
`

// spawnProc starts the process. It does not wait for it to be ready: the
// caller's handshake (proc_supervise.go) does.
func spawnProc(spec *procSpec) (*proc, error) {
	cmd := exec.Command(spec.Python, "-c", sourcesBootstrap)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Dir = spec.Dir
	cmd.WaitDelay = exitGrace // bounds Wait if a grandchild keeps stderr open
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%s stdin: %w", spec.What, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("%s stdout: %w", spec.What, err)
	}
	progR, progW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("%s program pipe: %w", spec.What, err)
	}
	errLog := &stderrLog{log: spec.Log, field: spec.PIDField}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errLog
	cmd.ExtraFiles = []*os.File{progR} // fd 3
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, progR, progW)
		return nil, fmt.Errorf("start %s %q: %w", spec.What, spec.Python, err)
	}
	closeAll(inR, outW, progR) // the child's ends
	p := &proc{spec: spec, cmd: cmd, pid: cmd.Process.Pid, stdin: inW, stdout: bufferedPipe(outR), stderr: errLog}
	errLog.setPID(p.pid)
	// the sources go through a pipe, not argv (a long command line fills
	// every ps listing); the writer ends when the child has read them or
	// is gone (EPIPE)
	go func() {
		defer progW.Close()
		_, _ = io.WriteString(progW, joinSources(spec.Sources))
	}()
	return p, nil
}

func joinSources(srcs []pySource) string {
	parts := make([]string, len(srcs))
	for i, s := range srcs {
		parts[i] = s.Name + "\n" + s.Text
	}
	return strings.Join(parts, "\x00")
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// kill SIGKILLs the process, remembering the first reason for the failure
// text of the requests it owed.
func (p *proc) kill(reason string) {
	p.mu.Lock()
	if p.reason == "" {
		p.reason = reason
	}
	p.mu.Unlock()
	_ = p.cmd.Process.Kill()
}

// wait reaps the process (SIGKILL if it lingers exitGrace after its output
// closed) and describes how it ended: "signal: killed", "exit status 2",
// with Go's reason for killing it when there was one.
func (p *proc) wait() string {
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	var err error
	t := time.NewTimer(exitGrace)
	select {
	case err = <-done:
	case <-t.C:
		p.kill("still running after closing its output")
		err = <-done
	}
	t.Stop()
	for _, c := range []io.Closer{p.stdin, p.stdout} {
		if c != nil {
			_ = c.Close()
		}
	}
	p.stderr.flush()
	status := "unknown status"
	if ps := p.cmd.ProcessState; ps != nil {
		status = ps.String()
	} else if err != nil {
		status = err.Error()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason != "" {
		status += "; " + p.reason
	}
	return status
}

// writeFrames writes one message to the process. A write the process takes
// no byte of for writeStall kills it: a process that stopped reading is as
// good as dead, and its callers learn so from its exit.
func (p *proc) writeFrames(frames [][]byte) error {
	if d, ok := p.stdin.(interface{ SetWriteDeadline(time.Time) error }); ok {
		_ = d.SetWriteDeadline(time.Now().Add(writeStall))
	}
	err := protocol.WriteFrames(p.stdin, frames) // a small message in one write
	if errors.Is(err, os.ErrDeadlineExceeded) {
		p.kill(fmt.Sprintf("it took no input for %s", writeStall))
	}
	return err
}

// bufferedPipe reads the process's stdout through a buffer: a framed
// message is read as its prelude, its frame lengths and its frames, each a
// read of its own straight from the pipe; buffered, a small message is one
// read(2). Frames bigger than the buffer are still read into place.
func bufferedPipe(r io.ReadCloser) io.ReadCloser {
	return struct {
		*bufio.Reader
		io.Closer
	}{bufio.NewReaderSize(r, pipeReadBuffer), r}
}

// pipeReadBuffer is bufferedPipe's size: a message from the process up to
// it (a host call, a small graph's answer) is one read(2) when it is in the
// pipe whole.
const pipeReadBuffer = 64 << 10

// readMessages reads framed messages from the process until its stdout
// closes, decoding each with decode and handing it to handle. A message
// that cannot be read or decoded means the stream is lost: the process is
// killed (what reason says, with the error), which fails everything it
// owed: never a hang.
func (p *proc) readMessages(lim protocol.Limits, reason string, decode func([][]byte) (any, error), handle func(any)) {
	for {
		frames, err := protocol.ReadFrames(p.stdout, lim)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				p.kill(fmt.Sprintf("unreadable %s: %v", reason, err))
			}
			return
		}
		v, err := decode(frames)
		if err != nil {
			p.kill(fmt.Sprintf("undecodable %s: %v", reason, err))
			return
		}
		handle(v)
	}
}

// stderrLog turns a process's stderr into log lines (with its pid field)
// and keeps the last few for startup error messages.
type stderrLog struct {
	mu    sync.Mutex
	log   zerolog.Logger
	field string // the pid's log field; "helper_pid" when empty
	pid   int
	buf   []byte
	lines []string
}

const stderrTail = 10

func (s *stderrLog) setPID(pid int) {
	s.mu.Lock()
	s.pid = pid
	s.mu.Unlock()
}

func (s *stderrLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			break
		}
		s.emit(string(s.buf[:i]))
		s.buf = s.buf[i+1:]
	}
	return len(p), nil
}

func (s *stderrLog) emit(line string) {
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return
	}
	field := s.field
	if field == "" {
		field = "helper_pid"
	}
	s.log.Warn().Int(field, s.pid).Msg(line)
	s.lines = append(s.lines, line)
	if len(s.lines) > stderrTail {
		s.lines = s.lines[len(s.lines)-stderrTail:]
	}
}

func (s *stderrLog) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) > 0 {
		s.emit(string(s.buf))
		s.buf = nil
	}
}

// tail renders the last stderr lines for an error message.
func (s *stderrLog) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lines) == 0 {
		return ""
	}
	return "; stderr:\n" + strings.Join(s.lines, "\n")
}
