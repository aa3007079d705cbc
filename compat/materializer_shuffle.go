package compat

import (
	"fmt"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// The P2P side of the helper (dask-protocol.md §3.5 items 3 and 4): the
// worker plugin pickle, made once per helper start, and shuffle_run, which
// runs the Python methods of a shuffle's spec (output_partitions,
// pick_worker) and pickles the ShuffleRunSpec that workers load. The engine
// keeps everything else about a run.

// WorkerPlugins is the "worker-plugins" dict of every register-worker
// reply: {"shuffle": <pickle of ShuffleWorkerPlugin()>}, as the Python
// scheduler's shuffle extension registers it. Without it every P2P task
// fails on the worker. The map is shared: do not modify.
func (m *Materializer) WorkerPlugins() *protocol.Map {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plugins == nil {
		return &protocol.Map{}
	}
	return m.plugins
}

// workerPlugins checks the helper's worker_plugins answer: names to pickle
// bytes, which the worker unpickles as they are.
func workerPlugins(v any) (*protocol.Map, error) {
	pm, ok := v.(*protocol.Map)
	if !ok {
		return nil, fmt.Errorf("versions answer lacks a worker_plugins dict: %s", truncate(protocol.String(v)))
	}
	for _, e := range pm.Entries {
		if _, ok := e.Key.(string); !ok {
			return nil, fmt.Errorf("worker plugin name %s is not a str", protocol.String(e.Key))
		}
		if _, ok := e.Value.([]byte); !ok {
			return nil, fmt.Errorf("worker plugin %v is %s, not pickle bytes", e.Key, truncate(protocol.String(e.Value)))
		}
	}
	return pm, nil
}

// SubmitShuffleRun queues a shuffle_run request; its answer arrives on
// Results as a *scheduler.ShuffleRunCreated (success, Python exception, or
// helper crash), after the answers of everything submitted before it.
func (m *Materializer) SubmitShuffleRun(req scheduler.ShuffleRunRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.enqueueLocked(&job{shuffle: &req})
	return nil
}

func encodeShuffleRun(j *job) ([][]byte, error) {
	r := j.shuffle
	existing := r.Existing
	if existing == nil {
		existing = []any{}
	}
	return protocol.Encode(protocol.NewMap("op", "shuffle_run", "id", j.wireID,
		"shuffle_id", r.ShuffleID, "run_id", r.RunID, "barrier", r.Barrier,
		"workers", r.Workers, "existing", existing, "span_id", nil), nil)
}

func (m *Materializer) shuffleResult(j *job) *scheduler.ShuffleRunCreated {
	return &scheduler.ShuffleRunCreated{
		Base:      scheduler.Base{ID: fmt.Sprintf("shuffle-run-created-%d", j.shuffle.RunID), At: m.cfg.Now()},
		ShuffleID: j.shuffle.ShuffleID,
		RunID:     j.shuffle.RunID,
	}
}

// answerShuffleRun delivers an OK shuffle_run response; a malformed one
// becomes an error result (the worker sees a RuntimeError), never a run
// the engine would hand out half-built.
func (m *Materializer) answerShuffleRun(j *job, resp *protocol.Map) {
	st := m.shuffleResult(j)
	if err := parseShuffleRun(st, resp); err != nil {
		text := fmt.Sprintf("materializer helper returned a malformed shuffle run: %v", err)
		m.log.Error().Str("shuffle_id", st.ShuffleID).Msg(text)
		m.fail(j, text)
		return
	}
	m.deliver(st)
}

func parseShuffleRun(st *scheduler.ShuffleRunCreated, resp *protocol.Map) error {
	rs, ok := resp.Get("run_spec").(*protocol.Blob)
	if !ok || !rs.Pickled {
		return fmt.Errorf("run_spec is %s, not a __Pickled__ blob", truncate(protocol.String(resp.Get("run_spec"))))
	}
	pairs, ok := resp.Get("worker_for").([]any)
	if !ok {
		return fmt.Errorf("worker_for is %s, not a list", truncate(protocol.String(resp.Get("worker_for"))))
	}
	for i, p := range pairs {
		pair, ok := p.([]any)
		if !ok || len(pair) != 2 {
			return fmt.Errorf("worker_for[%d] is %s, not a [partition, worker] pair", i, truncate(protocol.String(p)))
		}
		if _, ok := pair[1].(string); !ok {
			return fmt.Errorf("worker_for[%d] names worker %s", i, truncate(protocol.String(pair[1])))
		}
	}
	raw, ok := resp.Get("workers").([]any)
	if !ok || len(raw) == 0 {
		return fmt.Errorf("workers is %s, not a non-empty list", truncate(protocol.String(resp.Get("workers"))))
	}
	workers := make([]string, len(raw))
	for i, w := range raw {
		if workers[i], ok = w.(string); !ok {
			return fmt.Errorf("workers[%d] is %s, not a str", i, truncate(protocol.String(w)))
		}
	}
	st.RunSpec, st.WorkerFor, st.Workers = rs, pairs, workers
	return nil
}
