package scheduler

import (
	"cmp"
	"fmt"
	"time"

	"daskgo/compat/pickle"
	"daskgo/protocol"
)

// This file is the contract between the engine (the inner ring, package
// scheduler) and the outer ring (package scheduler/server) that owns sockets,
// clocks and the materializer helper. The outer ring decodes wire messages
// into these stimuli, calls State.Handle on its single engine goroutine, and
// sends the returned Outbox. Field names follow the wire ops they come from.

// Stimulus is one input to the engine.
type Stimulus interface {
	base() *Base
}

// Base carries what every stimulus has: distributed's stimulus_id and the
// logical time at which it happened (tests set it; production uses the
// arrival time).
type Base struct {
	ID string
	At time.Time
}

func (b *Base) base() *Base { return b }

// StartStop is one entry of task-finished's startstops.
type StartStop struct {
	Action      string
	Start, Stop float64
	Source      string
}

// ---- workers -------------------------------------------------------------

// AddWorker is register-worker. The worker is not schedulable until a
// WorkerStatusChange to "running" arrives (distributed registers it as init).
type AddWorker struct {
	Base
	Address        string
	Name           string // str(name); distributed allows ints
	NThreads       int
	MemoryLimit    int64
	Resources      map[string]float64
	Nanny          string
	Services       *protocol.Map
	LocalDirectory string
	PID            int64
	ServerID       string
	Status         string // the status the worker registered with ("init", "running")
	Extra          *protocol.Map
	Versions       *protocol.Map
}

// WorkerStatusChange is worker-status-change from a worker stream.
type WorkerStatusChange struct {
	Base
	Worker string
	Status string
}

// RemoveWorker: the worker's stream closed (for any reason), unregister,
// missed heartbeats, or a retire. Expected = graceful (no suspicion counted).
type RemoveWorker struct {
	Base
	Worker   string
	Expected bool
	Reason   string
	// Close: also send the worker {"op":"close"} and list it in
	// Outbox.Disconnect (distributed's remove_worker(close=True)). Leave it
	// false when the stream is already gone.
	Close bool
}

// WorkerHeartbeat is the heartbeat_worker RPC.
type WorkerHeartbeat struct {
	Base
	Worker    string
	Metrics   *protocol.Map
	Executing map[protocol.Key]float64
	ReplyTo   int64
}

// TaskFinished is task-finished from a worker.
type TaskFinished struct {
	Base
	Worker     string
	Key        protocol.Key
	RunID      int64
	NBytes     int64
	Type       []byte // pickle of the result's class, forwarded to clients
	TypeName   string
	StartStops []StartStop
	Thread     any // the worker's thread id (int or None), for the task stream
}

// TaskErred is task-erred from a worker. Exception and Traceback are opaque
// (a *protocol.Blob, raw pickle bytes, or a string) and forwarded as is.
type TaskErred struct {
	Base
	Worker        string
	Key           protocol.Key
	RunID         int64
	Exception     any
	Traceback     any
	ExceptionText string
	TracebackText string
	StartStops    []StartStop // for the task stream
	Thread        any
}

// ReleaseWorkerData: the worker dropped its replica of Key.
type ReleaseWorkerData struct {
	Base
	Worker string
	Key    protocol.Key
}

// AddKeys: the worker holds replicas it fetched as dependencies.
type AddKeys struct {
	Base
	Worker string
	Keys   []protocol.Key
}

// LongRunning: the task seceded from the worker's thread pool.
type LongRunning struct {
	Base
	Worker string
	Key    protocol.Key
	RunID  int64
	// ComputeDuration is in seconds; negative means the worker sent None.
	ComputeDuration float64
}

// Reschedule: the task raised Reschedule on the worker.
type Reschedule struct {
	Base
	Worker string
	Key    protocol.Key
}

// RequestRefreshWhoHas: the worker cannot find holders for these keys.
type RequestRefreshWhoHas struct {
	Base
	Worker string
	Keys   []protocol.Key
}

// ---- clients -------------------------------------------------------------

// AddClient is register-client; the outer ring has already sent stream-start.
type AddClient struct {
	Base
	Client string
}

// RemoveClient is close-client or a client stream that closed.
type RemoveClient struct {
	Base
	Client string
}

// UpdateGraph is update-graph from a client stream. Msg is the op dict as
// decoded (expr_ser, keys, internal_priority, annotations... with blobs
// intact); the engine forwards it to the materializer in a HelperRequest and
// holds the client's later stimuli until the matching GraphMaterialized.
type UpdateGraph struct {
	Base
	Client string
	Msg    *protocol.Map
}

// GraphTask is one task of a materialized graph (see compat).
type GraphTask struct {
	Key          protocol.Key
	Deps         []protocol.Key
	Order        int64
	Kind         string // Task, Alias, DataNode, List, ..., P2PBarrierTask
	DataProducer bool
	Annotations  *protocol.Map // msgpack-safe, callables evaluated
	RunSpec      RunSpec
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
	Err       *ErrorInfo
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

// ClientDesiresKeys is client-desires-keys. Client is who desires the
// keys: usually the sender, but fire_and_forget names the pseudo-client
// "fire-and-forget". Stream is the client whose stream carried the op
// (empty: Client's); the op is ordered behind that stream's pending
// update-graph, which is what defines the keys.
type ClientDesiresKeys struct {
	Base
	Client string
	Stream string
	Keys   []protocol.Key
}

func (x *ClientDesiresKeys) stream() string { return cmp.Or(x.Stream, x.Client) }

// ClientReleasesKeys is client-releases-keys; Client and Stream as for
// ClientDesiresKeys.
type ClientReleasesKeys struct {
	Base
	Client string
	Stream string
	Keys   []protocol.Key
}

func (x *ClientReleasesKeys) stream() string { return cmp.Or(x.Stream, x.Client) }

// CancelKeys is cancel-keys; Reason and Msg are relayed to clients as is.
type CancelKeys struct {
	Base
	Client string
	Keys   []protocol.Key
	Force  bool
	Reason any
	Msg    any
}

// HeartbeatClient is heartbeat-client.
type HeartbeatClient struct {
	Base
	Client string
}

// Retry is the retry RPC; the reply is the list of keys retried.
type Retry struct {
	Base
	Client  string
	Keys    []protocol.Key
	ReplyTo int64
}

// UpdateData registers data that now lives on workers: scatter through the
// scheduler (after the outer ring's update_data RPCs) or the update_data RPC
// of a direct scatter. Client may be empty.
type UpdateData struct {
	Base
	Client  string
	WhoHas  map[protocol.Key][]string
	NBytes  map[protocol.Key]int64
	ReplyTo int64
}

// Tick lets time-based rules run (worker-ttl, unrunnable timeouts).
type Tick struct {
	Base
}

// ---- outputs -------------------------------------------------------------

// HelperRequest asks the materializer to turn an update-graph into tasks.
type HelperRequest struct {
	ID     int64
	Client string
	Msg    *protocol.Map
}

// Reply answers the RPC whose stimulus carried ReplyTo.
type Reply struct {
	To    int64
	Value any
}

// Outbox is everything one Handle call wants sent: the explicit form of
// distributed's (client_msgs, worker_msgs). Stream messages keep their order
// per peer. The outer ring sends it after Handle returns; the engine never
// touches a socket.
type Outbox struct {
	Workers map[string][]*protocol.Map
	Clients map[string][]*protocol.Map
	Helper  []HelperRequest
	// ShuffleRuns asks the helper to build P2P shuffle runs; each answer
	// comes back as a ShuffleRunCreated stimulus.
	ShuffleRuns []ShuffleRunRequest
	Replies     []Reply
	// Disconnect lists workers whose streams the outer ring must close
	// after sending their messages (worker-ttl, RemoveWorker.Close).
	Disconnect []string
	// RestartViaNanny asks the outer ring to have these workers' nannies
	// kill them (a nanny starts a fresh worker process); a worker whose
	// nanny does not answer is then removed with RemoveWorker{Close: true}
	// (check_worker_ttl → restart_workers).
	RestartViaNanny []NannyRestart
	// Logs is what the engine wants logged (bad peer input, lost data);
	// the engine itself never logs.
	Logs []LogEntry
}

// NannyRestart is one worker to restart through its nanny.
type NannyRestart struct {
	Worker, Nanny, Reason string
}

// ToWorker appends a stream message for the worker at addr.
func (o *Outbox) ToWorker(addr string, msg *protocol.Map) {
	if o.Workers == nil {
		o.Workers = map[string][]*protocol.Map{}
	}
	o.Workers[addr] = append(o.Workers[addr], msg)
}

// ToClient appends a stream message for client id.
func (o *Outbox) ToClient(id string, msg *protocol.Map) {
	if o.Clients == nil {
		o.Clients = map[string][]*protocol.Map{}
	}
	o.Clients[id] = append(o.Clients[id], msg)
}
