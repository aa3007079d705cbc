package compat

import (
	"fmt"

	"daskgo/protocol"
)

// handleResponse routes one helper answer to the request it answers.
// Answers are logged and dropped, never trusted, when they make no sense.
func (m *Materializer) handleResponse(inc *incarnation, v any) {
	resp, head, err := parseHead(v)
	if err != nil {
		m.log.Warn().Int("helper_pid", inc.pid).Err(err).Msg("materializer helper sent an unusable answer; ignored")
		return
	}
	m.mu.Lock()
	j := inc.pending[head.id]
	m.mu.Unlock()
	if j == nil {
		m.log.Warn().Int("helper_pid", inc.pid).Int64("id", head.id).
			Msg("materializer helper answered an unknown request; ignored")
		return
	}
	switch {
	case head.status == "error":
		m.finish(inc, j)
		if j.versions != nil {
			j.versions <- versionsReply{err: fmt.Errorf("helper versions: %v", resp.Get("exception_text"))}
			return
		}
		if j.feed != nil {
			j.feed.answer(nil, errorInfo(resp), "")
			return
		}
		m.deliver(m.errorResult(j, errorInfo(resp)))
	case head.status != "OK":
		m.finish(inc, j)
		m.fail(j, fmt.Sprintf("materializer helper answered with status %s", protocol.String(resp.Get("status"))))
	case j.shuffle != nil:
		m.finish(inc, j)
		m.answerShuffleRun(j, resp)
	case j.feed != nil:
		m.finish(inc, j)
		j.feed.answer(resp, nil, "")
	case j.versions != nil:
		m.finish(inc, j)
		a, err := parseVersionsAnswer(resp)
		if err != nil {
			j.versions <- versionsReply{err: err}
			return
		}
		m.mu.Lock()
		m.versions = a.versions
		m.mu.Unlock()
		j.versions <- versionsReply{m: a.versions}
	default:
		m.addChunk(j, resp, head.done)
		if !head.done {
			return
		}
		m.finish(inc, j)
		m.finishGraph(inc, j)
	}
}

// finish unbinds j from inc: its answer is complete.
func (m *Materializer) finish(inc *incarnation, j *job) {
	m.mu.Lock()
	delete(inc.pending, j.wireID)
	m.closeIfRetiredLocked(inc)
	m.mu.Unlock()
}

// addChunk converts one chunk; after the first malformed one the rest of
// the answer is only drained.
func (m *Materializer) addChunk(j *job, resp *protocol.Map, done bool) {
	if j.bad != nil {
		return
	}
	if j.graph == nil {
		j.graph = newGraphBuilder(m.cfg.HashSeed)
	}
	c, err := parseGraphChunk(resp, done)
	if err == nil {
		err = j.graph.add(c)
	}
	if err != nil {
		j.bad = err
		j.graph = nil
	}
}

// finishGraph culls, orders (and checks the order) and delivers the graph.
func (m *Materializer) finishGraph(inc *incarnation, j *job) {
	if j.bad != nil {
		m.fail(j, fmt.Sprintf("materializer helper returned a malformed graph: %v", j.bad))
		return
	}
	b := j.graph
	j.graph = nil
	tasks, keys, chk, err := b.finish(j.req.Keys)
	if err != nil {
		m.fail(j, fmt.Sprintf("materialized graph: %v", err))
		return
	}
	// run_spec_bytes is what the engine holds of this graph's specs (the
	// benchmarks subtract it to get the scheduler's own bytes per task)
	m.log.Info().Int64("request", j.req.ID).Int("tasks", len(tasks)).Int64("run_spec_bytes", b.specBytes).
		Msg("graph materialized")
	for _, w := range b.warnings {
		m.log.Warn().Int64("request", j.req.ID).Msg(w)
	}
	if chk.checked {
		m.mu.Lock()
		m.orderChecks++
		m.orderCheckedTasks += int64(chk.tasks)
		if chk.mismatches > 0 {
			m.orderMismatches++
		}
		m.mu.Unlock()
		if chk.mismatches > 0 {
			m.log.Error().Int64("request", j.req.ID).Int("tasks", chk.tasks).Int("mismatches", chk.mismatches).
				Str("first", chk.detail).Msg("dask.order check: Go's priorities differ from dask.order.order")
		} else {
			m.log.Info().Int64("request", j.req.ID).Int("tasks", chk.tasks).
				Msg("dask.order check: Go's priorities equal dask.order.order")
		}
	}
	st := m.result(j)
	st.Tasks, st.Keys = tasks, keys
	m.deliver(st)
	// after the delivery, off the graph's path (reading /proc costs tens of
	// µs, a few percent of a small graph's trip through the helper); the
	// helper sent its last chunk after freeing the graph
	m.noteHelperRSS(inc, processRSS(inc.pid))
}

// OrderChecks reports the dask.order checks so far (Config.CheckOrder):
// graphs checked, tasks in them, graphs with a mismatch.
func (m *Materializer) OrderChecks() (graphs, tasks, mismatched int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.orderChecks, m.orderCheckedTasks, m.orderMismatches
}

func truncate(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
