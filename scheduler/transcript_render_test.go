package scheduler

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"daskgo/protocol"
)

// Rendering for transcripts: an outbox as one line per message, peers in
// name order and each peer's messages in the order sent; compute-task with
// its priority and the rule that placed it (story shows the whole reason).

func (r *transcript) render(out Outbox) string {
	var lines []string
	for _, a := range sortedAddrs(r.t, out.Workers) {
		for _, m := range out.Workers.Of(a) {
			lines = append(lines, wname(a)+": "+r.msgText(m))
		}
	}
	for _, c := range sortedAddrs(r.t, out.Clients) {
		for _, m := range out.Clients.Of(c) {
			lines = append(lines, c+": "+r.msgText(m))
		}
	}
	for _, rep := range out.Replies {
		lines = append(lines, fmt.Sprintf("reply %d: %s", rep.To, short(protocol.String(rep.Value))))
	}
	for _, h := range out.Helper {
		lines = append(lines, fmt.Sprintf("helper: materialize %d for %s", h.ID, h.Client))
	}
	for _, sr := range out.ShuffleRuns {
		lines = append(lines, fmt.Sprintf("helper: shuffle-run %s run=%d workers=%s", sr.ShuffleID, sr.RunID, names(sr.Workers)))
	}
	for _, d := range out.Disconnect {
		lines = append(lines, "disconnect "+wname(d))
	}
	for _, n := range out.RestartViaNanny {
		lines = append(lines, "restart-via-nanny "+wname(n.Worker))
	}
	for _, l := range out.Logs {
		if l.Level >= LogWarn {
			lines = append(lines, fmt.Sprintf("log %s: %s", levelName(l.Level), shortAddrs(l.Msg)))
		}
	}
	for _, h := range out.Hooks {
		lines = append(lines, hookText(h))
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// hookText renders a scheduler plugin hook call as distributed makes it.
func hookText(h HookEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hook %s", h.Hook)
	switch h.Hook {
	case HookTransition:
		fmt.Fprintf(&b, " %s %s->%s", keyText(h.Key), h.Start, h.Finish)
		if k := h.Kwargs; k != nil {
			fmt.Fprintf(&b, " worker=%s", wname(k.Worker))
			if k.Finished {
				fmt.Fprintf(&b, " nbytes=%d startstops=%d", k.NBytes, len(k.StartStops))
			}
			if k.Erred {
				fmt.Fprintf(&b, " cause=%s", keyText(k.Cause))
			}
		}
	case HookUpdateGraph:
		fmt.Fprintf(&b, " client=%s keys=%d tasks=%d", h.Client, len(h.Graph.Keys), len(h.Graph.Tasks))
	case HookAddWorker, HookRemoveWorker:
		fmt.Fprintf(&b, " %s", wname(h.Worker))
	case HookAddClient, HookRemoveClient:
		fmt.Fprintf(&b, " %s", h.Client)
	case HookLogEvent:
		fmt.Fprintf(&b, " %s", h.Topic)
	}
	fmt.Fprintf(&b, " stimulus=%s", h.StimulusID)
	return b.String()
}

func (r *transcript) msgText(m *protocol.Map) string {
	op, _ := m.Get("op").(string)
	var b strings.Builder
	b.WriteString(op)
	if key := m.Get("key"); key != nil {
		b.WriteString(" " + keyText(key))
	}
	for _, f := range []string{"keys", "who_has"} {
		if v := m.Get(f); v != nil && op != "compute-task" {
			b.WriteString(" " + keysText(v))
		}
	}
	switch op {
	case "compute-task":
		fmt.Fprintf(&b, " prio=%s", prioText(m.Get("priority")))
		if wh, ok := m.Get("who_has").(*protocol.KeyList[[]string]); ok && wh.Len() > 0 {
			var deps []string
			for _, it := range wh.Items {
				deps = append(deps, it.Key.String()+"@"+names(it.Value))
			}
			sort.Strings(deps)
			b.WriteString(" deps=" + strings.Join(deps, ","))
		}
		if key, err := protocol.KeyOf(m.Get("key")); err == nil {
			if rule := r.lastPlacement(key); rule != "" {
				b.WriteString(" reason=" + rule)
			}
		}
	case "shuffle-fail":
		fmt.Fprintf(&b, " %v run=%v", m.Get("shuffle_id"), m.Get("run_id"))
	case "task-erred", "cancelled-keys", "lost-data":
		if reason, ok := m.Get("reason").(string); ok {
			b.WriteString(" reason=" + reason)
		}
	}
	return b.String()
}

// lastPlacement is the rule of key's latest placement on a worker.
func (r *transcript) lastPlacement(key protocol.Key) string {
	story := r.s.Story(key)
	for i := len(story) - 1; i >= 0; i-- {
		if story[i].Worker != "" {
			return story[i].Reason.Rule.Name()
		}
	}
	return ""
}

// stateText: each worker's processing and memory, then the waiting states.
func (r *transcript) stateText() string {
	var lines []string
	for _, a := range r.s.WorkerAddresses() {
		ws := r.s.Worker(a)
		line := fmt.Sprintf("%s (%s): processing %s", wname(a), ws.Status(), taskNames(ws.processing.Items()))
		if ws.hasWhat.Len() > 0 {
			line += "; memory " + taskNames(ws.hasWhat.Items())
		}
		lines = append(lines, line)
	}
	byState := map[Status][]string{}
	for key, ts := range r.s.tasks.all() {
		byState[ts.state] = append(byState[ts.state], key.String())
	}
	for _, st := range []Status{StatusQueued, StatusNoWorker, StatusWaiting, StatusErred, StatusReleased} {
		if ks := byState[st]; len(ks) > 0 {
			sort.Slice(ks, func(i, j int) bool { return naturalLess(ks[i], ks[j]) })
			lines = append(lines, fmt.Sprintf("%s: %s", st, strings.Join(ks, " ")))
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// graphSpec builds the tasks of one update-graph spec token.
func (r *transcript) graphSpec(spec string) []GraphTask {
	if name, rest, ok := strings.Cut(spec, "("); ok && strings.HasSuffix(rest, ")") {
		a := strings.Split(strings.TrimSuffix(rest, ")"), ",")
		switch name {
		case "roots":
			return rootTasks(a[0], r.atoi(a[1]))
		case "tree":
			return treeTasks(a[0], a[1], r.atoi(a[2]), r.atoi(a[3]))
		case "p2p":
			return p2pGraph(a[0], r.atoi(a[1]), r.atoi(a[2]))
		}
		r.fatalf("unknown generator %q", spec)
	}
	key, deps, _ := strings.Cut(spec, "<-")
	var ann string
	if i := strings.Index(key, "["); i >= 0 && strings.HasSuffix(key, "]") {
		key, ann = key[:i], key[i+1:len(key)-1]
	}
	var gt GraphTask
	if deps == "" {
		gt = task(key)
	} else {
		gt = task(key, strings.Split(deps, ",")...)
	}
	if ann == "" {
		return []GraphTask{gt}
	}
	var kv []any
	for _, a := range strings.Split(ann, ";") {
		n, v, _ := strings.Cut(a, "=")
		switch n {
		case "workers":
			var ws []any
			for _, w := range strings.Split(v, ",") {
				ws = append(ws, addr(w))
			}
			kv = append(kv, "workers", ws)
		case "priority", "retries":
			kv = append(kv, n, int64(r.atoi(v)))
		case "loose":
			kv = append(kv, "allow_other_workers", true)
		default:
			r.fatalf("unknown annotation %q", n)
		}
	}
	return []GraphTask{annotated(gt, kv...)}
}

// treeTasks reduces roots P-0..P-(n-1) (given separately) in a tree of
// fan-in f: level l's task i is NAME-l-i.
func treeTasks(name, roots string, n, f int) []GraphTask {
	level := make([]string, n)
	for i := range level {
		level[i] = fmt.Sprintf("%s-%d", roots, i)
	}
	var out []GraphTask
	for l := 1; len(level) > 1; l++ {
		var next []string
		for i := 0; i < len(level); i += f {
			key := fmt.Sprintf("%s-%d-%d", name, l, i/f)
			out = append(out, task(key, level[i:min(i+f, len(level))]...))
			next = append(next, key)
		}
		level = next
	}
	return out
}

func (r *transcript) atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		r.fatalf("%q is not an int", s)
	}
	return n
}

func names(addrs []string) string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = wname(a)
	}
	return strings.Join(out, ",")
}

func taskNames(tasks []*TaskState) string {
	out := make([]string, len(tasks))
	for i, ts := range tasks {
		out[i] = ts.Key.String()
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i], out[j]) })
	return "[" + strings.Join(out, " ") + "]"
}

// naturalLess orders x-2 before x-10.
func naturalLess(a, b string) bool {
	pa, na := splitNum(a)
	pb, nb := splitNum(b)
	if pa != pb {
		return pa < pb
	}
	return na < nb
}

func splitNum(s string) (string, int) {
	i := strings.LastIndexByte(s, '-')
	if i < 0 {
		return s, -1
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil {
		return s, -1
	}
	return s[:i], n
}

func keyText(v any) string {
	if k, err := protocol.KeyOf(v); err == nil {
		return k.String()
	}
	return protocol.String(v)
}

func keysText(v any) string {
	switch x := v.(type) {
	case []protocol.Key:
		out := make([]string, len(x))
		for i, k := range x {
			out[i] = k.String()
		}
		return strings.Join(out, " ")
	case map[protocol.Key][]string:
		var out []string
		for k, ws := range x {
			out = append(out, k.String()+"@"+names(ws))
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	if ks, err := protocol.KeysOf(v); err == nil {
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = k.String()
		}
		return strings.Join(out, " ")
	}
	return short(protocol.String(v))
}

func prioText(v any) string {
	xs, ok := v.([]any)
	if !ok {
		return protocol.String(v)
	}
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = protocol.String(x)
	}
	return "(" + strings.Join(out, ",") + ")"
}

// shortAddrs writes test workers' addresses (tcp://w1:8000) as names.
func shortAddrs(s string) string { return testAddr.ReplaceAllString(s, "$1") }

var testAddr = regexp.MustCompile(`tcp://([A-Za-z0-9_-]+):8000`)

func short(s string) string {
	s = shortAddrs(s)
	if len(s) > 140 {
		return s[:140] + "..."
	}
	return s
}

func levelName(l LogLevel) string {
	return [...]string{"debug", "info", "warn", "error"}[l]
}
