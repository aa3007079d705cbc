package server

import (
	"fmt"
	"sort"
	"strings"
)

// Ops is the op table: every op of distributed's Scheduler.handlers and
// stream_handlers (with those its default extensions register) and what
// dask-go-scheduler does with it. tests/test_handler_table.py checks it
// against the installed distributed (through --list-ops), TestOpsTable
// checks it against handlers() and the stream decoders, and the op table of
// scheduler/server/README.md is generated from it (go test ./scheduler/server -run TestOpsMarkdown -update).
var Ops = []OpInfo{
	// ---- RPC handlers
	rpc("adaptive_target", yes("adaptive scaling (Adaptive, cluster managers' adapt); withheld roots count as queued work")),
	rpc("add_keys", yes("")),
	rpc("amm_handler", no("Client.amm (active memory manager control)", "")),
	rpc("benchmark_hardware", no("Client.benchmark_hardware", "")),
	rpc("broadcast", yes("Client.run")),
	rpc("call_stack", no("Client.call_stack", "")),
	rpc("check_idle", yes("idle-timeout checks from cluster managers (the dask-kubernetes operator's idleTimeout)")),
	rpc("connection_stream", no("connection_stream (dashboard streaming)", "")),
	rpc("dump_cluster_state_to_url", no("Client.dump_cluster_state", "")),
	rpc("dump_state", no("Scheduler.dump_state", "")),
	rpc("echo", yes("")),
	rpc("event_clear", yes("distributed.Event")),
	rpc("event_is_set", yes("distributed.Event")),
	rpc("event_set", yes("distributed.Event")),
	rpc("event_wait", yes("distributed.Event")),
	rpc("events", yes("Client.get_events")),
	rpc("feed", python("Client.feed", "poll from the client instead")),
	rpc("gather", yes("Client.gather (a gather whose caller hung up ends: callerContext)")),
	rpc("get_cluster_state", no("Client.dump_cluster_state", "")),
	rpc("get_error_cause", no("recreate_error_locally", "")),
	rpc("get_logs", yes("Client.get_scheduler_logs")),
	rpc("get_metadata", yes("Client.get_metadata")),
	rpc("get_runspec", no("recreate_error_locally", "")),
	rpc("get_story", yes("Client.story (with each placement's reason)")),
	rpc("get_task_prefix_states", no("task prefix states (dashboard)", "")),
	rpc("get_task_status", no("task status query (dashboard)", "")),
	rpc("get_task_stream", yes("Client.get_task_stream")),
	rpc("get_task_stream_index", yes("the get_task_stream context manager")),
	rpc("has_what", yes("")),
	rpc("heartbeat_worker", yes("")),
	rpc("identity", yes("")),
	rpc("log_event", yes("Client.log_event")),
	rpc("logs", yes("Client.get_scheduler_logs")),
	rpc("memory_sampler_start", no("distributed.diagnostics.MemorySampler", "")),
	rpc("memory_sampler_stop", no("distributed.diagnostics.MemorySampler", "")),
	rpc("multi_lock_acquire", yes("distributed.MultiLock")),
	rpc("multi_lock_release", yes("distributed.MultiLock")),
	rpc("nbytes", no("Client.nbytes", "")),
	rpc("ncores", yes("")),
	rpc("ncores_running", yes("")),
	rpc("performance_report", no("performance_report (the dashboard)", "")),
	rpc("processing", yes("")),
	rpc("profile", no("Client.profile", "")),
	rpc("proxy", yes("actors")),
	rpc("publish_delete", yes("published datasets")),
	rpc("publish_get", yes("published datasets")),
	rpc("publish_list", yes("published datasets")),
	rpc("publish_put", yes("published datasets")),
	rpc("queue_create", yes("distributed.Queue")),
	rpc("queue_get", yes("distributed.Queue")),
	rpc("queue_put", yes("distributed.Queue")),
	rpc("queue_qsize", yes("distributed.Queue")),
	rpc("rebalance", yes("Client.rebalance (managed memory, no thresholds: see PlanRebalance)")),
	rpc("register-client", yes("")),
	rpc("register-worker", yes("")),
	rpc("register_nanny", yes("")),
	rpc("register_nanny_plugin", yes("Client.register_plugin(NannyPlugin)")),
	rpc("register_scheduler_plugin", OpInfo{Status: StatusPartial, Feature: "scheduler plugins",
		Note: "only upload_file's SchedulerUploadFile is accepted (there is no user code to import in a Go scheduler); any other scheduler plugin runs Python code inside the scheduler process and fails fast: use a WorkerPlugin or run the logic in the client"}),
	rpc("register_worker_plugin", yes("Client.register_plugin(WorkerPlugin), upload_file")),
	rpc("replicate", yes("Client.replicate")),
	rpc("restart", yes("Client.restart")),
	rpc("restart_workers", no("Client.restart_workers", "use Client.restart")),
	rpc("retire_workers", yes("Client.retire_workers, Adaptive's scale-down (by address, by name, or those workers_to_close picks)")),
	rpc("retry", yes("Client.retry, Future.retry (the reply is written before the retried tasks go to workers)")),
	rpc("run_function", python("run_on_scheduler", "use Client.run (on workers) or run the function in the client")),
	rpc("scatter", yes("")),
	rpc("semaphore_acquire", yes("distributed.Semaphore and Lock")),
	rpc("semaphore_close", yes("distributed.Semaphore and Lock")),
	rpc("semaphore_refresh_leases", yes("distributed.Semaphore and Lock")),
	rpc("semaphore_register", yes("distributed.Semaphore and Lock")),
	rpc("semaphore_release", yes("distributed.Semaphore and Lock")),
	rpc("semaphore_value", yes("distributed.Semaphore and Lock")),
	rpc("set_metadata", yes("Client.set_metadata")),
	rpc("set_resources", no("Client.set_resources (changing a worker's resources)", "start workers with --resources")),
	rpc("set_restrictions", no("set_restrictions", "")),
	rpc("shuffle_barrier", yes("P2P shuffle")),
	rpc("shuffle_get", yes("P2P shuffle")),
	rpc("shuffle_get_or_create", yes("P2P shuffle")),
	rpc("shuffle_restrict_task", yes("P2P shuffle")),
	rpc("start_task_metadata", no("get_task_metadata", "")),
	rpc("stop_task_metadata", no("get_task_metadata", "")),
	rpc("subscribe_worker_status", yes("cluster managers' worker status stream (every subscriber gets it, not only the newest)")),
	rpc("terminate", yes("")),
	rpc("unregister", yes("")),
	rpc("unregister_nanny_plugin", yes("Client.unregister_worker_plugin(nanny=True)")),
	rpc("unregister_scheduler_plugin", python("scheduler plugins", "use a WorkerPlugin or run the logic in the client")),
	rpc("unregister_worker_plugin", yes("Client.unregister_worker_plugin")),
	rpc("update_data", yes("")),
	rpc("variable_get", yes("distributed.Variable")),
	rpc("variable_set", yes("distributed.Variable")),
	rpc("versions", yes("")),
	rpc("who_has", yes("")),
	rpc("worker_logs", yes("Client.get_worker_logs")),
	rpc("workers_to_close", yes("adaptive scaling (workers_to_close; a key function, which is Python, fails with a message)")),

	// ---- stream handlers (client and worker streams)
	stream("add-keys", yes("")),
	stream("cancel-keys", yes("")),
	stream("client-desires-keys", yes("")),
	stream("client-releases-keys", yes("")),
	stream("close-client", yes("")),
	stream("heartbeat-client", yes("")),
	stream("keep-alive", yes("nothing to do, as in distributed")),
	stream("log-event", yes("Worker.log_event")),
	stream("long-running", yes("secede")),
	stream("publish_flush_batched_send", yes("published datasets (publish_put waits for it)")),
	stream("queue-future-release", yes("distributed.Queue")),
	stream("queue_release", yes("distributed.Queue")),
	stream("release-worker-data", yes("")),
	stream("report-key", yes("")),
	stream("request-refresh-who-has", yes("")),
	stream("reschedule", yes("")),
	stream("steal-response", yes("work stealing (distributed.scheduler.work-stealing)")),
	stream("subscribe-topic", yes("Client.subscribe_topic")),
	stream("task-erred", yes("")),
	stream("task-finished", yes("")),
	stream("unsubscribe-topic", yes("Client.unsubscribe_topic")),
	stream("update-data", yes("")),
	stream("update-graph", yes("")),
	stream("variable-future-received-confirm", yes("distributed.Variable")),
	stream("variable_delete", yes("distributed.Variable")),
	stream("worker-status-change", yes("")),
}

// OpStatus is what an op gets.
type OpStatus string

// Op statuses.
const (
	StatusImplemented OpStatus = "implemented"
	StatusPartial     OpStatus = "partial"
	StatusNoop        OpStatus = "no-op"
	// StatusUnsupported fails fast: RPCs answer an error naming the
	// feature; stream ops are logged and dropped (a stream has no reply).
	StatusUnsupported OpStatus = "unsupported"
)

// OpInfo is one row of Ops.
type OpInfo struct {
	Op      string   `json:"op"`
	Kind    string   `json:"kind"` // "rpc" or "stream"
	Status  OpStatus `json:"status"`
	Feature string   `json:"feature,omitempty"`
	Note    string   `json:"note,omitempty"`
}

func rpc(op string, i OpInfo) OpInfo    { i.Op, i.Kind = op, "rpc"; return i }
func stream(op string, i OpInfo) OpInfo { i.Op, i.Kind = op, "stream"; return i }
func yes(feature string) OpInfo         { return OpInfo{Status: StatusImplemented, Feature: feature} }

func no(feature, instead string) OpInfo {
	return OpInfo{Status: StatusUnsupported, Feature: feature, Note: insteadNote("not implemented yet", instead)}
}

func python(feature, instead string) OpInfo {
	return OpInfo{Status: StatusUnsupported, Feature: feature,
		Note: insteadNote("it runs Python code inside the scheduler process, which is Go", instead)}
}

func insteadNote(why, instead string) string {
	if instead == "" {
		return why
	}
	return why + "; " + instead
}

// unsupportedMessage is the error an unsupported RPC answers.
func (i OpInfo) unsupportedMessage() string {
	return fmt.Sprintf("%s is not supported by dask-go-scheduler (op %q): %s", i.Feature, i.Op, i.Note)
}

// opsMarkdown renders Ops as the table of scheduler/server/README.md.
func opsMarkdown() string {
	rows := append([]OpInfo(nil), Ops...)
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Kind != rows[j].Kind {
			return rows[i].Kind == "rpc"
		}
		return rows[i].Op < rows[j].Op
	})
	var b strings.Builder
	b.WriteString("<!-- generated from scheduler/server/ops.go by `go test ./scheduler/server -run TestOpsMarkdown -update`; do not edit -->\n\n")
	b.WriteString("| op | kind | status | feature | note |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.Op, r.Kind, r.Status, r.Feature, r.Note)
	}
	return b.String()
}
