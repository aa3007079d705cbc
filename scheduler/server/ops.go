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
	rpc("amm_handler", yes("Client.amm: start, stop, running, run_once (the one policy is ReduceReplicas)")),
	rpc("benchmark_hardware", yes("Client.benchmark_hardware")),
	rpc("broadcast", yes("Client.run")),
	rpc("call_stack", yes("Client.call_stack")),
	rpc("check_idle", yes("idle-timeout checks from cluster managers (the dask-kubernetes operator's idleTimeout)")),
	rpc("connection_stream", dead("connection_stream", "only workers open it, to other workers (Worker.send_to_worker)")),
	rpc("dump_cluster_state_to_url", OpInfo{Status: StatusPartial, Feature: "Client.dump_cluster_state(write_from_scheduler=True), the default for URLs",
		Note: "written to local paths and file:// URLs; any other fsspec URL (s3://, gcs://...) or storage option fails naming it: pass write_from_scheduler=False to write the dump from the client"}),
	rpc("dump_state", yes("the scheduler's section of a cluster dump (Server._to_dict); no stock caller, served for rpc(scheduler).dump_state()")),
	rpc("echo", yes("")),
	rpc("event_clear", yes("distributed.Event")),
	rpc("event_is_set", yes("distributed.Event")),
	rpc("event_set", yes("distributed.Event")),
	rpc("event_wait", yes("distributed.Event")),
	rpc("events", yes("Client.get_events")),
	rpc("feed", OpInfo{Status: StatusImplemented, Feature: "progress bars (distributed.progress, ProgressBar, MultiProgressBar, the notebook widgets) and Client-side feeds",
		Note: "distributed's Progress and MultiProgress run in the engine (the helper unpickles the bars' closures once; no Python per transition); any other closures run in the scheduler-side Python host; a feed that fails answers one final message and the comm closes"}),
	rpc("gather", yes("Client.gather (a gather whose caller hung up ends: callerContext)")),
	rpc("get_cluster_state", yes("Client.dump_cluster_state (write_from_scheduler=False, the default for paths)")),
	rpc("get_error_cause", yes("Client.recreate_error_locally")),
	rpc("get_logs", yes("Client.get_scheduler_logs")),
	rpc("get_metadata", yes("Client.get_metadata")),
	rpc("get_runspec", yes("Client.recreate_error_locally, recreate_task_locally")),
	rpc("get_story", yes("Client.story (with each placement's reason)")),
	rpc("get_task_prefix_states", yes("no stock caller in distributed 2026.8 or dask-labextension; served as distributed serves it")),
	rpc("get_task_status", yes("no stock caller in distributed 2026.8 or dask-labextension; served as distributed serves it")),
	rpc("get_task_stream", yes("Client.get_task_stream")),
	rpc("get_task_stream_index", yes("the get_task_stream context manager")),
	rpc("has_what", yes("")),
	rpc("heartbeat_worker", yes("")),
	rpc("identity", yes("")),
	rpc("log_event", yes("Client.log_event")),
	rpc("logs", yes("Client.get_scheduler_logs")),
	rpc("memory_sampler_start", yes("distributed.diagnostics.MemorySampler (sampled only while a sample runs; freed when its client leaves)")),
	rpc("memory_sampler_stop", yes("distributed.diagnostics.MemorySampler")),
	rpc("multi_lock_acquire", yes("distributed.MultiLock")),
	rpc("multi_lock_release", yes("distributed.MultiLock")),
	rpc("nbytes", yes("Client.nbytes")),
	rpc("ncores", yes("")),
	rpc("ncores_running", yes("")),
	rpc("performance_report", yes("distributed.performance_report: rendered with bokeh in the scheduler-side Python host by distributed's own Scheduler.performance_report, from the task stream, the workers' profiles (the scheduler's own is empty), bandwidth, the system monitor's series of the Go process and its Python children, and the log")),
	rpc("processing", yes("")),
	rpc("profile", OpInfo{Status: StatusPartial, Feature: "Client.profile",
		Note: "workers' profiles as distributed merges them; scheduler=True answers an empty profile (there is no Python event loop to sample): profile the scheduler with dask-go-scheduler --cpu-profile FILE"}),
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
	rpc("register_scheduler_plugin", yes("Client.register_plugin(SchedulerPlugin), PipInstall, UploadDirectory: the plugin runs in the scheduler's Python host with distributed's hooks, fed by the engine through a bounded queue (upload_file's SchedulerUploadFile too: the host imports the file, and the graph helpers before their next graph)")),
	rpc("register_worker_plugin", yes("Client.register_plugin(WorkerPlugin), upload_file")),
	rpc("replicate", yes("Client.replicate")),
	rpc("restart", yes("Client.restart")),
	rpc("restart_workers", yes("Client.restart_workers (through the nannies; a new process under the same name)")),
	rpc("retire_workers", yes("Client.retire_workers, Adaptive's scale-down (by address, by name, or those workers_to_close picks)")),
	rpc("retry", yes("Client.retry, Future.retry (the reply is written before the retried tasks go to workers)")),
	rpc("run_function", yes("Client.run_on_scheduler: runs in the scheduler-side Python host with a dask_scheduler object (compat/host_scheduler.py); a plain function runs in a thread of its own, so one that sleeps holds only its caller")),
	rpc("scatter", yes("")),
	rpc("semaphore_acquire", yes("distributed.Semaphore and Lock")),
	rpc("semaphore_close", yes("distributed.Semaphore and Lock")),
	rpc("semaphore_refresh_leases", yes("distributed.Semaphore and Lock")),
	rpc("semaphore_register", yes("distributed.Semaphore and Lock")),
	rpc("semaphore_release", yes("distributed.Semaphore and Lock")),
	rpc("semaphore_value", yes("distributed.Semaphore and Lock")),
	rpc("set_metadata", yes("Client.set_metadata")),
	rpc("set_resources", yes("Worker.set_resources (tasks in use keep their resources; waiting tasks the new ones admit are scheduled)")),
	rpc("set_restrictions", dead("set_restrictions", "distributed calls it only as a method inside the scheduler (its P2P shuffle plugin), never as an RPC; this scheduler pins P2P tasks itself (shuffle_restrict_task)")),
	rpc("shuffle_barrier", yes("P2P shuffle")),
	rpc("shuffle_get", yes("P2P shuffle")),
	rpc("shuffle_get_or_create", yes("P2P shuffle")),
	rpc("shuffle_restrict_task", yes("P2P shuffle")),
	rpc("start_task_metadata", yes("get_task_metadata (collected only while it runs; freed when its caller's connection closes)")),
	rpc("stop_task_metadata", yes("get_task_metadata")),
	rpc("subscribe_worker_status", yes("cluster managers' worker status stream (every subscriber gets it, not only the newest)")),
	rpc("terminate", yes("")),
	rpc("unregister", yes("")),
	rpc("unregister_nanny_plugin", yes("Client.unregister_worker_plugin(nanny=True)")),
	rpc("unregister_scheduler_plugin", yes("Client.unregister_scheduler_plugin")),
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

// dead is an op nothing calls: no stock Client, worker, nanny or the
// JupyterLab extension (dask-labextension) sends it to a scheduler in
// distributed 2026.8; why says who uses it instead.
func dead(feature, why string) OpInfo {
	return OpInfo{Status: StatusUnsupported, Feature: feature,
		Note: "no caller in distributed 2026.8 or dask-labextension: " + why}
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
	b.WriteString("| any other op | rpc | forwarded | ops that a run_on_scheduler function, plugin, extension or preload puts in `dask_scheduler.handlers` (optuna_integration's `optuna_*`) | served by the scheduler-side Python host while it has them (forwardedOp in host.go); any other unknown op answers an error naming it |\n")
	return b.String()
}
