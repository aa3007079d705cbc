package compat

import (
	"fmt"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// handleResponse routes one helper response to the request it answers.
// Responses are logged and dropped, never trusted, when they make no sense.
func (m *Materializer) handleResponse(inc *incarnation, v any) {
	resp, ok := v.(*protocol.Map)
	if !ok {
		m.log.Warn().Int("helper_pid", inc.pid).Str("response", truncate(protocol.String(v))).
			Msg("materializer helper sent a non-dict response; ignored")
		return
	}
	id, _ := resp.Get("id").(int64)
	m.mu.Lock()
	j := inc.pending[id]
	m.mu.Unlock()
	if j == nil {
		m.log.Warn().Int("helper_pid", inc.pid).Str("id", protocol.String(resp.Get("id"))).
			Msg("materializer helper answered an unknown request; ignored")
		return
	}
	status, _ := resp.Get("status").(string)
	done, _ := resp.Get("done").(bool)
	if j.shuffle != nil && status == "OK" {
		m.finish(inc, j)
		m.answerShuffleRun(j, resp)
		return
	}
	switch {
	case status == "error":
		m.finish(inc, j)
		if j.versions != nil {
			j.versions <- versionsReply{err: fmt.Errorf("helper versions: %v", resp.Get("exception_text"))}
			return
		}
		m.deliver(m.errorResult(j, errorInfo(resp)))
	case status != "OK":
		m.finish(inc, j)
		m.fail(j, fmt.Sprintf("materializer helper answered with status %s", protocol.String(resp.Get("status"))))
	case j.versions != nil:
		m.finish(inc, j)
		vm, ok := resp.Get("versions").(*protocol.Map)
		if !ok {
			j.versions <- versionsReply{err: fmt.Errorf("helper versions answer lacks a versions dict")}
			return
		}
		m.mu.Lock()
		m.versions = vm
		m.mu.Unlock()
		j.versions <- versionsReply{m: vm}
	default:
		m.addChunk(j, resp)
		if !done {
			return
		}
		m.finish(inc, j)
		if j.bad != nil {
			m.fail(j, fmt.Sprintf("materializer helper returned a malformed graph: %v", j.bad))
			return
		}
		st := m.result(j)
		st.Tasks = j.tasks
		j.tasks = nil
		m.deliver(st)
	}
}

// finish unbinds j from inc: its answer is complete.
func (m *Materializer) finish(inc *incarnation, j *job) {
	m.mu.Lock()
	delete(inc.pending, j.wireID)
	m.mu.Unlock()
}

// addChunk converts one chunk of tasks; after the first malformed task the
// rest of the answer is only drained.
func (m *Materializer) addChunk(j *job, resp *protocol.Map) {
	if j.bad != nil {
		return
	}
	items, ok := resp.Get("tasks").([]any)
	if !ok && resp.Get("tasks") != nil {
		j.bad = fmt.Errorf("tasks is %s, not a list", protocol.String(resp.Get("tasks")))
		return
	}
	for i, it := range items {
		t, err := graphTask(it)
		if err != nil {
			j.bad = fmt.Errorf("task %d of a chunk: %w", i, err)
			j.tasks = nil
			return
		}
		j.tasks = append(j.tasks, t)
	}
}

// graphTask converts one helper task dict (see materializer.py: materialize).
func graphTask(v any) (scheduler.GraphTask, error) {
	var t scheduler.GraphTask
	d, ok := v.(*protocol.Map)
	if !ok {
		return t, fmt.Errorf("task is %s, not a dict", truncate(protocol.String(v)))
	}
	key, err := protocol.KeyOf(d.Get("key"))
	if err != nil {
		return t, fmt.Errorf("key: %w", err)
	}
	t.Key = key
	if t.Deps, err = protocol.KeysOf(d.Get("deps")); err != nil {
		return t, fmt.Errorf("deps of %s: %w", key, err)
	}
	switch o := d.Get("order").(type) {
	case int64:
		t.Order = o
	case nil:
		// A client-supplied internal_priority that misses the key: distributed
		// leaves such a task without priority; 0 is the closest order.
	default:
		return t, fmt.Errorf("order of %s is %s, not an int", key, protocol.String(o))
	}
	if t.Kind, ok = d.Get("kind").(string); !ok {
		return t, fmt.Errorf("kind of %s is %s, not a str", key, protocol.String(d.Get("kind")))
	}
	if t.DataProducer, ok = d.Get("data_producer").(bool); !ok {
		return t, fmt.Errorf("data_producer of %s is not a bool", key)
	}
	switch a := d.Get("annotations").(type) {
	case *protocol.Map:
		t.Annotations = a
	case nil:
	default:
		return t, fmt.Errorf("annotations of %s are %s, not a dict", key, truncate(protocol.String(a)))
	}
	rs, ok := d.Get("run_spec").(*protocol.Blob)
	if !ok || !rs.Pickled {
		return t, fmt.Errorf("run_spec of %s is %s, not a __Pickled__ blob", key, truncate(protocol.String(d.Get("run_spec"))))
	}
	t.RunSpec = rs
	return t, nil
}

// errorInfo takes distributed.core.error_message's fields as they are: the
// exception and traceback stay opaque Serialized blobs for task-erred.
func errorInfo(resp *protocol.Map) *scheduler.ErrorInfo {
	info := &scheduler.ErrorInfo{
		Exception: resp.Get("exception"),
		Traceback: resp.Get("traceback"),
	}
	info.ExceptionText, _ = resp.Get("exception_text").(string)
	info.TracebackText, _ = resp.Get("traceback_text").(string)
	return info
}

func truncate(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
