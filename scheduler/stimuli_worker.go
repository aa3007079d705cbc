package scheduler

import "daskgo/protocol"

// Stimuli from workers: membership (register, status, heartbeat, removal),
// what their streams report about tasks, and their answers to steal
// requests. Handled in membership.go, task_events.go and steal_races.go.

// StartStop is one entry of task-finished's startstops.
type StartStop struct {
	Action      string
	Start, Stop float64
	Source      string
}

// AddWorker is register-worker. The worker is not schedulable until a
// WorkerStatusChange to "running" arrives (distributed registers it as init).
type AddWorker struct {
	Base
	Address        string
	Name           string // str(name); distributed allows ints
	NameValue      any    // the name as sent (a str or an int); the address when none
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
	// Metrics and Memory: the metrics the worker registered with, as
	// WorkerHeartbeat carries them (Memory nil: none)
	Metrics any
	Memory  *HeartbeatMemory
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

// WorkerHeartbeat is the heartbeat_worker RPC. Metrics is the worker's
// metrics dict, kept unread for scheduler_info (a *protocol.Map, or the
// msgpack as it came, protocol.Raw); Bandwidth is the one figure
// the engine uses from it (metrics["bandwidth"]["total"], bytes/s), when
// HasBandwidth. Memory is metrics' memory figures (nil: it had none).
type WorkerHeartbeat struct {
	Base
	Worker       string
	Metrics      any
	Bandwidth    float64
	HasBandwidth bool
	Memory       *HeartbeatMemory
	Executing    map[protocol.Key]float64
	// SpanMetrics: extensions["spans"], the fine performance metrics per
	// span since the last heartbeat (spans.go)
	SpanMetrics []HeartbeatSpanMetric
	ReplyTo     int64
}

// ReplyID implements Replier.
func (x *WorkerHeartbeat) ReplyID() int64 { return x.ReplyTo }

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
	// Metadata is the worker's ts.metadata when not empty (opaque; nil
	// for the usual {}), for get_task_metadata and the cluster dump
	Metadata any
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

// StealResponse is steal-response from a worker's stream: the answer to a
// steal-request. Base.ID is the request's stimulus id; State is the task's
// state on the worker, "" for None (the worker does not know the task).
type StealResponse struct {
	Base
	Worker string
	Key    protocol.Key
	State  string
}
