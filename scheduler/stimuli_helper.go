package scheduler

import (
	"daskgo/protocol"
	"daskgo/protocol/pickle"
	"fmt"
)

// What the materializer helpers answer (a graph's tasks, a P2P run's spec)
// and what the engine asks them (Outbox.Helper, Outbox.ShuffleRuns).

// GraphTask is one task of a materialized graph (see compat).
type GraphTask struct {
	Key     protocol.Key
	Deps    []protocol.Key
	Order   int64
	Kind    string // Task, Alias, DataNode, List, ..., P2PBarrierTask
	RunSpec RunSpec
	// Annotations: nil when the task has none, as most have. By pointer,
	// the GraphTask is 96 bytes instead of 200 (TestTaskStateSize): a
	// graph's GraphTasks are all alive together while the materializer's
	// answer is assembled and applied, at the Go process's peak; on a
	// 200k-task tree that is 21 MB less live heap there.
	Annotations  *Annotations
	DataProducer bool
}

// Annotations are a task's annotations as the helper reports them (global
// and layer annotations merged, callables evaluated), decoded by compat.
// The zero value is "none".
type Annotations struct {
	// Verbatim is the annotations dict, relayed unread in compute-task.
	Verbatim any
	// Priority: the priority annotation (user priority, higher first).
	Priority    float64
	HasPriority bool
	// Workers: the workers= (or restrictions=) entries, each an address,
	// a worker name or a host; LooseRestrictions: allow_other_workers.
	Workers           []string
	LooseRestrictions bool
	// Resources: resources=, decoded; ResourcesVerbatim as sent, for
	// compute-task's resource_restrictions.
	Resources         map[string]float64
	ResourcesVerbatim any
	// Retries: retries=, when HasRetries.
	Retries    int
	HasRetries bool
	// Span: the span annotation (distributed.span), nil when none.
	Span *SpanAnnotation
}

// RunSpec is a task's run_spec: opaque to the engine, which relays it to
// workers in compute-task (and a P2P barrier's to the helper). compat's
// implementation assembles the pickle only when it is sent, so that what
// the engine holds per task stays small.
type RunSpec interface {
	// Payload is the ToPickle blob compute-task carries.
	Payload() *protocol.Blob
}

// BlobSpec is a RunSpec that is one ready blob.
type BlobSpec struct{ Blob *protocol.Blob }

// Payload implements RunSpec.
func (b BlobSpec) Payload() *protocol.Blob { return b.Blob }

// GraphMaterialized is the helper's answer to a HelperRequest. On failure
// Err holds the error_message-style fields to send as task-erred per key.
type GraphMaterialized struct {
	Base
	RequestID int64
	Client    string
	Tasks     []GraphTask
	// Keys: Tasks' keys and dependencies resolved where the graph was
	// received (IndexGraph), or nil for the engine to resolve them.
	Keys *GraphKeys
	Err  *ErrorInfo
}

// ErrorInfo is an exception as distributed ships it: Exception and
// Traceback opaque (Blob, pickle bytes or string).
type ErrorInfo struct {
	Exception     any
	Traceback     any
	ExceptionText string
	TracebackText string
}

// RuntimeErrorInfo is the ErrorInfo of a RuntimeError(text) raised on the
// scheduler's side, without a traceback: what a client or worker sees when
// the materializer helper fails or is gone.
func RuntimeErrorInfo(text string) *ErrorInfo {
	return &ErrorInfo{
		Exception:     pickle.Exception("builtins", "RuntimeError", text),
		ExceptionText: fmt.Sprintf("RuntimeError(%q)", text),
	}
}

// HelperRequest asks the materializer to turn an update-graph into tasks.
type HelperRequest struct {
	ID     int64
	Client string
	Keys   []protocol.Key // UpdateGraph.Keys
	Msg    any            // UpdateGraph.Payload
}

// ShuffleRunCreated is the helper's answer to a ShuffleRunRequest: the
// pickled ShuffleRunSpec, its partition -> worker pairs, and the distinct
// workers among them; or Err.
type ShuffleRunCreated struct {
	Base
	ShuffleID string
	RunID     int64
	RunSpec   *protocol.Blob
	WorkerFor []any // [partition, worker] pairs, as the helper sent them
	Workers   []string
	Err       *ErrorInfo
}

// ShuffleRunRequest asks the helper to build a run (its shuffle_run, the
// Python half of ShuffleSchedulerPlugin._create): ShuffleSpec.pick_worker over Workers for every output
// partition not in Existing, then ShuffleRunSpec with RunID.
type ShuffleRunRequest struct {
	ShuffleID string
	RunID     int64
	Barrier   *protocol.Blob // the barrier task's pickled P2PBarrierTask
	Workers   []string
	// Existing are the [partition, worker] pairs of active shuffles that
	// share output tasks with this one (hash joins): their outputs must land
	// on the same workers.
	Existing []any
}
