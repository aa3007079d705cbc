package sim

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"daskgo/protocol"
)

// Task is one task of a simulated graph: its dask key, dask.order's
// priority, its dependencies (indices into Graph.Tasks) and the model's
// estimates. Transient is working memory held only while the task runs
// (a root generating its input chunk, a job allocating before it sleeps).
type Task struct {
	Key       protocol.Key
	Order     int64
	Deps      []int32
	Duration  float64 // seconds
	NBytes    int64   // output size
	Transient int64
}

// Graph is a workload's task graph as scripts/export-graph.py writes it, or
// a synthetic one (synthetic.go).
type Graph struct {
	Workload  string
	Scale     string
	DataBytes int64
	Tasks     []Task
}

// header is the first line of an exported graph file.
type header struct {
	Format    string `json:"format"`
	Workload  string `json:"workload"`
	Scale     string `json:"scale"`
	NTasks    int    `json:"n_tasks"`
	DataBytes int64  `json:"data_bytes"`
}

const graphFormat = "daskgo-sim-graph/1"

// LoadGraph reads a gzip JSON-lines graph file.
func LoadGraph(path string) (*Graph, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open graph: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", path, err)
	}
	g, err := ReadGraph(zr)
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", path, err)
	}
	return g, nil
}

// ReadGraph decodes the uncompressed JSON-lines form. Every dependency
// index must point at another line; keys must be valid dask keys.
func ReadGraph(r io.Reader) (*Graph, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	if !sc.Scan() {
		return nil, fmt.Errorf("empty graph file: %w", orEOF(sc.Err()))
	}
	var h header
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if h.Format != graphFormat {
		return nil, fmt.Errorf("header: format %q, want %q", h.Format, graphFormat)
	}
	g := &Graph{Workload: h.Workload, Scale: h.Scale, DataBytes: h.DataBytes, Tasks: make([]Task, 0, h.NTasks)}
	for line := 2; sc.Scan(); line++ {
		t, err := parseTask(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		g.Tasks = append(g.Tasks, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if err := g.Check(); err != nil {
		return nil, err
	}
	return g, nil
}

func orEOF(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}

func parseTask(line []byte) (Task, error) {
	var raw [6]json.RawMessage
	var t Task
	if err := json.Unmarshal(line, &raw); err != nil {
		return t, fmt.Errorf("task: %w", err)
	}
	var key any
	d := json.NewDecoder(strings.NewReader(string(raw[0])))
	d.UseNumber()
	if err := d.Decode(&key); err != nil {
		return t, fmt.Errorf("key: %w", err)
	}
	k, err := protocol.KeyOf(jsonKey(key))
	if err != nil {
		return t, fmt.Errorf("key %s: %w", raw[0], err)
	}
	t.Key = k
	for i, dst := range []any{&t.Order, &t.Deps, &t.Duration, &t.NBytes, &t.Transient} {
		if raw[i+1] == nil {
			return t, fmt.Errorf("task %s: %d fields, want 6", k, i+1)
		}
		if err := json.Unmarshal(raw[i+1], dst); err != nil {
			return t, fmt.Errorf("task %s field %d: %w", k, i+1, err)
		}
	}
	return t, nil
}

// jsonKey turns a decoded JSON key into what protocol.KeyOf takes: lists
// are tuples, integral numbers int64.
func jsonKey(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonKey(e)
		}
		return out
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// Check rejects what would make a simulation meaningless: dependency
// indices out of range, cycles, duplicate keys, negative estimates.
func (g *Graph) Check() error {
	seen := make(map[protocol.Key]struct{}, len(g.Tasks))
	for i, t := range g.Tasks {
		if _, dup := seen[t.Key]; dup {
			return fmt.Errorf("graph: duplicate key %s", t.Key)
		}
		seen[t.Key] = struct{}{}
		if t.Duration < 0 || t.NBytes < 0 || t.Transient < 0 {
			return fmt.Errorf("graph: task %s has a negative estimate", t.Key)
		}
		for _, d := range t.Deps {
			if d < 0 || int(d) >= len(g.Tasks) || int(d) == i {
				return fmt.Errorf("graph: task %s depends on index %d of %d", t.Key, d, len(g.Tasks))
			}
		}
	}
	return g.checkAcyclic()
}

// checkAcyclic is Kahn's algorithm: every task must be reachable from
// the roots through finished dependencies.
func (g *Graph) checkAcyclic() error {
	missing := make([]int32, len(g.Tasks))
	dependents := make([][]int32, len(g.Tasks))
	var ready []int32
	for i, t := range g.Tasks {
		missing[i] = int32(len(t.Deps))
		for _, d := range t.Deps {
			dependents[d] = append(dependents[d], int32(i))
		}
		if len(t.Deps) == 0 {
			ready = append(ready, int32(i))
		}
	}
	done := 0
	for len(ready) > 0 {
		t := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		done++
		for _, x := range dependents[t] {
			if missing[x]--; missing[x] == 0 {
				ready = append(ready, x)
			}
		}
	}
	if done != len(g.Tasks) {
		return fmt.Errorf("graph: %d of %d tasks are on a dependency cycle", len(g.Tasks)-done, len(g.Tasks))
	}
	return nil
}

// Sinks are the tasks nobody depends on: the keys the client wants.
func (g *Graph) Sinks() []int32 {
	has := make([]bool, len(g.Tasks))
	for _, t := range g.Tasks {
		for _, d := range t.Deps {
			has[d] = true
		}
	}
	var out []int32
	for i := range g.Tasks {
		if !has[i] {
			out = append(out, int32(i))
		}
	}
	return out
}
