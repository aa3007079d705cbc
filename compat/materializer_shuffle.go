package compat

import (
	_ "embed"
	"fmt"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// The P2P side of the helper (distributed/shuffle/_scheduler_plugin.py:
// ShuffleSchedulerPlugin.start and _create): the
// worker plugin pickle, made once per helper start, and shuffle_run, which
// runs the Python methods of a shuffle's spec (output_partitions,
// pick_worker) and pickles the ShuffleRunSpec that workers load. The engine
// keeps everything else about a run.

// materializerShuffleScript is the helper's side: worker_plugins and
// shuffle_run.
//
//go:embed materializer_shuffle.py
var materializerShuffleScript string

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
