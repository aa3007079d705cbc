package scheduler

import (
	"cmp"
	"daskgo/protocol"
	"time"
)

// Stimuli from clients: their streams (update-graph, desires and releases,
// cancel, heartbeats) and RPCs (retry, scatter's update_data, restart), the
// event log's topics, plugins and the task stream.

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

// UpdateGraph is update-graph from a client stream: the fields the engine
// uses, decoded, and Payload, the op dict as it arrived (expr_ser, keys,
// internal_priority, annotations... with blobs intact), which the engine
// relays to a materializer helper unread (HelperRequest). The engine holds
// the client's later stimuli until the matching GraphMaterialized.
type UpdateGraph struct {
	Base
	Client string
	Keys   []protocol.Key
	// FifoTimeout, SubmittingTask and UserPriority feed _set_priorities;
	// SubmittingTask is set when a task on a worker submitted the graph.
	FifoTimeout    time.Duration
	SubmittingTask *protocol.Key
	UserPriority   float64
	// AllActors (actors=True) or ActorKeys: the keys that are actors.
	AllActors bool
	ActorKeys []protocol.Key
	Payload   any
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
// Client._retry sets every named future back to pending when it reads the
// reply, so no key-in-memory of theirs may reach the client before it: the
// outer ring holds the client's stream until the reply is written (the
// ordering rule of scheduler/server/doc.go).
type Retry struct {
	Base
	Client  string
	Keys    []protocol.Key
	ReplyTo int64
}

// ReplyID implements Replier.
func (x *Retry) ReplyID() int64 { return x.ReplyTo }

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

// ReplyID implements Replier.
func (x *UpdateData) ReplyID() int64 { return x.ReplyTo }

// LogEvent is the log_event RPC, or log-event from a worker's stream
// (Scheduler.log_worker_event: a dict msg gets "worker" unless the topic
// is the worker itself).
type LogEvent struct {
	Base
	Topics []string
	Msg    any
	Worker string // set for a worker's log-event
}

// SubscribeTopic is subscribe-topic from a client's stream.
type SubscribeTopic struct {
	Base
	Topic  string
	Client string
}

// UnsubscribeTopic is unsubscribe-topic from a client's stream.
type UnsubscribeTopic struct {
	Base
	Topic  string
	Client string
}

// RegisterPlugin stores a plugin (register_worker_plugin,
// register_nanny_plugin). The outer ring checks idempotent registration
// with HasPlugin first, as the handler does before storing.
type RegisterPlugin struct {
	Base
	Kind   PluginKind
	Name   string
	Pickle any // bytes or a Blob, relayed as received
}

// UnregisterPlugin drops a stored plugin.
type UnregisterPlugin struct {
	Base
	Kind PluginKind
	Name string
}

// Restart is the first half of Scheduler.restart: every client releases
// everything it wants, so every task is forgotten through the ordinary
// transitions (free-keys reach the workers), and every client is told
// {"op": "restart"} so it cancels its futures. The outer ring then restarts
// the workers (nanny kill) and waits for them to come back.
type Restart struct {
	Base
}

// StartTaskStream adds the task stream plugin if it is not there yet
// (Scheduler._task_stream_plugin); the outer ring sends it before each
// get_task_stream and get_task_stream_index query.
type StartTaskStream struct{ Base }
