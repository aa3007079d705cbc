package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// Cluster dumps (Client.dump_cluster_state): Scheduler.get_cluster_state
// sends the dump to the client, which writes it; dump_cluster_state_to_url
// writes it from the scheduler (distributed.cluster_dump.write_state);
// dump_state is the scheduler's own section (Server._to_dict). A dump is
// {"scheduler": ..., "workers": {address: the worker's dump_state, or the
// error's text}, "versions": {"scheduler": ..., "workers": {...}}}, which
// distributed.cluster_dump.DumpArtefact reads.
//
// The engine's lock is held only to copy its state (State.DumpState, a
// few flat arrays); the workers' dump_state and versions run meanwhile,
// and the dump is encoded and written outside the lock, from the calling
// goroutine, which yields the processor as it goes (the scheduler runs on
// one: cmd/dask-go-scheduler's runtime.go) so that other clients' requests
// are served while a 100k-task dump is written.

// dumpFormats are write_state's formats and the suffix each appends.
var dumpFormats = map[string]string{"msgpack": ".msgpack.gz", "yaml": ".yaml"}

// clusterState is what a dump is built from.
type clusterState struct {
	sched *scheduler.ClusterDump
	// copied is how long the engine's copy held its lock
	copied         time.Duration
	workers        []callResult // dump_state
	workerVersions []callResult
	versions       any
	exclude        map[string]bool
}

// getClusterState is Scheduler.get_cluster_state: the dump, as msgpack
// written once (protocol.Raw) rather than as a value tree.
func (s *Server) getClusterState(ctx context.Context, req *comm.Request) (any, error) {
	exclude, err := dumpExclude(req)
	if err != nil {
		return nil, err
	}
	ctx, stop := callerContext(ctx, req.Conn) // the workers' dump_state answer to a caller still there
	defer stop()
	cs, err := s.collectClusterState(ctx, exclude)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var buf bytes.Buffer
	if err := cs.writeMsgpack(&buf); err != nil {
		return nil, fmt.Errorf("get_cluster_state: %w", err)
	}
	cs.logDone(req, "cluster state sent", "", buf.Len(), time.Since(t0))
	return protocol.Raw(buf.Bytes()), nil
}

// dumpState is Server._to_dict: the scheduler's section of a dump.
func (s *Server) dumpState(ctx context.Context, req *comm.Request) (any, error) {
	exclude, err := dumpExclude(req)
	if err != nil {
		return nil, err
	}
	var d *scheduler.ClusterDump
	if err := s.loop.query(ctx, func(st *scheduler.State) { d = st.DumpState() }); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	e := newDumpEncoder(yielding{&buf}, d, exclude)
	e.schedulerSection()
	if e.flush(); e.err != nil {
		return nil, fmt.Errorf("dump_state: %w", e.err)
	}
	return protocol.Raw(buf.Bytes()), nil
}

// dumpClusterStateToURL is Scheduler.dump_cluster_state_to_url: the file
// is opened first, as write_state opens it before it gathers the state,
// so that a bad path fails at once.
func (s *Server) dumpClusterStateToURL(ctx context.Context, req *comm.Request) (any, error) {
	exclude, err := dumpExclude(req)
	if err != nil {
		return nil, err
	}
	format, _ := req.Args.Get("format").(string)
	url, _ := req.Args.Get("url").(string)
	suffix, ok := dumpFormats[format]
	if !ok {
		return pyError("ValueError", "Unsupported format %q. Possible values are 'msgpack' or 'yaml'.", format), nil
	}
	path, autoMkdir, err := dumpPath(url, suffix, req.Args)
	if err != nil {
		return pyError("NotImplementedError", "%v", err), nil
	}
	if autoMkdir {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("dump_cluster_state_to_url: %w", err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("dump_cluster_state_to_url: %w", err)
	}
	ctx, stop := callerContext(ctx, req.Conn)
	defer stop()
	cs, err := s.collectClusterState(ctx, exclude)
	t0 := time.Now()
	if err == nil {
		err = cs.writeFile(f, format)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("dump_cluster_state_to_url %s: %w", path, err)
	}
	size := 0
	if fi, err := os.Stat(path); err == nil {
		size = int(fi.Size())
	}
	cs.logDone(req, "cluster state dumped", path, size, time.Since(t0))
	return nil, nil
}

// logDone logs a dump: its size, and how long the engine's copy held the
// lock against how long the encoding and writing took outside it.
func (cs *clusterState) logDone(req *comm.Request, msg, path string, bytes int, written time.Duration) {
	ev := req.Log.Info().Int("tasks", len(cs.sched.Tasks)).Int("bytes", bytes).
		Float64("locked_ms", float64(cs.copied.Microseconds())/1e3).
		Float64("written_ms", float64(written.Microseconds())/1e3)
	if path != "" {
		ev = ev.Str("path", path)
	}
	ev.Msg(msg)
}

// dumpPath resolves write_state's url for the local filesystem, the one
// fsspec filesystem this scheduler writes to: a path or a file:// URL,
// with the format's suffix appended unless present. Of the local
// filesystem's storage options only auto_mkdir is taken.
func dumpPath(url, suffix string, args *protocol.Map) (path string, autoMkdir bool, err error) {
	for _, e := range args.Items() {
		switch e.Key {
		case "url", "exclude", "format":
		case "auto_mkdir":
			autoMkdir, _ = e.Value.(bool)
		default:
			return "", false, fmt.Errorf("storage option %s is not supported by dask-go-scheduler, which writes "+
				"dumps to its local filesystem only; use Client.dump_cluster_state(..., write_from_scheduler=False) "+
				"to write the dump from the client with fsspec", protocol.String(e.Key))
		}
	}
	if scheme, rest, found := strings.Cut(url, "://"); found {
		if scheme != "file" {
			return "", false, fmt.Errorf("dask-go-scheduler writes cluster dumps to local paths and file:// URLs only, "+
				"not %s:// (an fsspec filesystem of Python); use Client.dump_cluster_state(%q, "+
				"write_from_scheduler=False) to write it from the client", scheme, url)
		}
		url = rest
	}
	if url == "" {
		return "", false, fmt.Errorf("dump_cluster_state_to_url: an empty path")
	}
	if !strings.HasSuffix(url, suffix) {
		url += suffix
	}
	return url, autoMkdir, nil
}

// dumpExclude reads exclude (a list of attribute names).
func dumpExclude(req *comm.Request) (map[string]bool, error) {
	f := &fields{op: req.Op, m: req.Args}
	names := f.strings("exclude")
	if f.err != nil {
		return nil, f.err
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}

// collectClusterState is get_cluster_state's gathering: the workers'
// dump_state (a failure becomes its text, as on_error="return" and repr
// make it) and versions (failures left out) run while the engine's state
// is copied.
func (s *Server) collectClusterState(ctx context.Context, exclude map[string]bool) (*clusterState, error) {
	var workers []string
	if err := s.loop.query(ctx, func(st *scheduler.State) { workers = st.WorkerAddresses() }); err != nil {
		return nil, err
	}
	cs := &clusterState{exclude: exclude}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range exclude {
			if !yield(n) {
				return
			}
		}
	})
	done := make(chan struct{})
	go func() { // joined below, before any return
		defer close(done)
		cs.workers = s.callEach(ctx, sameMsg(workers, protocol.NewMap("op", "dump_state", "exclude", names)))
		cs.workerVersions = s.callEach(ctx, sameMsg(workers, protocol.NewMap("op", "versions")))
	}()
	err := s.loop.query(ctx, func(st *scheduler.State) {
		t0 := time.Now()
		cs.sched = st.DumpState()
		cs.copied = time.Since(t0)
	})
	if err == nil {
		cs.versions, err = s.mat.Versions(ctx)
	}
	<-done
	if err != nil {
		return nil, err
	}
	return cs, nil
}

// writeFile writes the dump as write_state's writers do: gzipped msgpack
// (gzip at its fastest level: the dump is for reading once, and its
// compression competes with the scheduler for the processor), or YAML.
func (cs *clusterState) writeFile(f *os.File, format string) error {
	w := bufio.NewWriterSize(f, 1<<20)
	if format == "yaml" {
		var buf bytes.Buffer
		if err := cs.writeMsgpack(&buf); err != nil {
			return err
		}
		if err := msgpackToYAML(buf.Bytes(), w); err != nil {
			return err
		}
		return w.Flush()
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	if err := cs.writeMsgpack(zw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return w.Flush()
}

// writeMsgpack writes the whole dump.
func (cs *clusterState) writeMsgpack(w io.Writer) error {
	e := newDumpEncoder(yielding{w}, cs.sched, cs.exclude)
	e.mapLen(3)
	e.str("scheduler")
	e.schedulerSection()
	e.str("workers")
	e.mapLen(len(cs.workers))
	for _, r := range cs.workers {
		e.str(r.worker)
		if r.err != nil {
			e.str(r.err.Error())
		} else {
			e.value(r.reply)
		}
		e.maybeFlush()
	}
	e.str("versions")
	e.mapLen(2)
	e.str("scheduler")
	e.value(cs.versions)
	e.str("workers")
	ok := 0
	for _, r := range cs.workerVersions {
		if r.err == nil {
			ok++
		}
	}
	e.mapLen(ok)
	for _, r := range cs.workerVersions {
		if r.err == nil {
			e.str(r.worker)
			e.value(r.reply)
		}
	}
	e.flush()
	return e.err
}

// yielding lets the rest of the scheduler run after each write of the
// encoder's buffer (every dumpFlushAt bytes of msgpack, a fraction of a
// millisecond of encoding). It sleeps rather than calling
// runtime.Gosched: with the scheduler's one processor (runtime.go), a
// goroutine that only yields is taken straight back from the run queue
// before the network is polled, so other clients' messages waited for
// the runtime's 10 ms background poll at every hop (a 100k-task dump made
// submit().result() 5x slower). Sleeping leaves the processor idle, which
// polls the network and runs whatever it woke first.
type yielding struct{ w io.Writer }

func (y yielding) Write(p []byte) (int, error) {
	n, err := y.w.Write(p)
	time.Sleep(dumpYield)
	return n, err
}

// dumpYield is the pause after each written buffer.
const dumpYield = 50 * time.Microsecond
