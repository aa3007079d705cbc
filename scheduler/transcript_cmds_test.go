package scheduler

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The commands of transcript tests. Each runs stimuli through the engine
// (with invariant checks on) and returns their rendered outbox, or prints
// the state a query asks for. Workers are named by short names (w1 is
// tcp://w1:8000), keys are strings.
//
//	new [saturation=F|inf] [coassign] [depth=N] [stealing] [amm]
//	add-worker NAME [nthreads=N] [status=S] [nanny]
//	remove-worker NAME [expected] [close]
//	worker-status NAME STATUS
//	update-graph [client=C] [want=K,K] SPEC...   SPEC: KEY, KEY<-DEP,DEP,
//	      KEY[workers=W;priority=P;retries=N;loose], roots(P,N),
//	      tree(P,ROOTS,N,FANIN), p2p(ID,IN,OUT)
//	finish KEY... [nbytes=N]            task-finished from the worker running it, each in turn
//	finish-all [WORKER]                 every task processing (there), by key
//	fail KEY                            task-erred from the worker running it
//	add-keys WORKER KEY...              the worker fetched replicas of these
//	release [client=C] KEY...           client-releases-keys
//	advance DURATION | tick [DURATION]  move the clock (and Tick)
//	steal-tick | amm-tick | restart
//	steal-response WORKER KEY STATE     answers the steal request in flight
//	config saturation=F [coassign=B]    a run-time ConfigChange
//	shuffle-run ID                      a transfer task asks for the run, the helper answers
//	plan-retire WORKER...               the RetireWorker round (a query)
//	story KEY...  |  state              queries
//	hooks on|off|HOOK...                the scheduler plugin listener (hook lines)
//	add-client C | remove-client C      a client's stream opens / closes
//	log-event TOPIC...                  a client's log_event
type transcript struct {
	t     *testing.T
	s     *tstate
	where string
}

func (r *transcript) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s: "+format, append([]any{r.where}, args...)...)
}

func (r *transcript) run(cmd, where string) string {
	r.where = where
	f := strings.Fields(cmd)
	name, args := f[0], f[1:]
	if name != "new" && r.s == nil {
		r.fatalf("the first command must be new")
	}
	kv, pos := splitArgs(args)
	switch name {
	case "new":
		return r.cmdNew(kv)
	case "add-worker":
		return r.render(r.s.addWorker(pos[0], r.intArg(kv, "nthreads", 1), func(aw *AddWorker) {
			if st, ok := kv["status"]; ok {
				aw.Status = st
			}
			if _, ok := kv["nanny"]; ok {
				aw.Nanny = "tcp://" + pos[0] + ":9000"
			}
		}))
	case "remove-worker":
		_, expected := kv["expected"]
		_, closing := kv["close"]
		return r.render(r.s.handle(&RemoveWorker{Worker: addr(pos[0]), Expected: expected, Close: closing, Reason: "transcript"}))
	case "worker-status":
		return r.render(r.s.handle(&WorkerStatusChange{Worker: addr(pos[0]), Status: pos[1]}))
	case "update-graph":
		return r.cmdUpdateGraph(kv, pos)
	case "finish":
		return r.cmdFinish(pos, int64(r.intArg(kv, "nbytes", 8)))
	case "finish-all":
		return r.cmdFinishAll(pos)
	case "fail":
		return r.render(r.s.fail(wname(r.runningOn(pos[0])), pos[0]))
	case "add-keys":
		return r.render(r.s.handle(&AddKeys{Worker: addr(pos[0]), Keys: keys(pos[1:]...)}))
	case "release":
		return r.render(r.s.handle(&ClientReleasesKeys{Client: client(kv), Keys: keys(pos...)}))
	case "advance", "tick":
		if len(pos) > 0 {
			d, err := time.ParseDuration(pos[0])
			if err != nil {
				r.fatalf("duration %q: %v", pos[0], err)
			}
			r.s.clock = r.s.clock.Add(d)
		}
		if name == "advance" {
			return ""
		}
		return r.render(r.s.handle(&Tick{}))
	case "steal-tick":
		return r.render(r.s.handle(&StealTick{}))
	case "amm-tick":
		return r.render(r.s.handle(&AMMTick{}))
	case "restart":
		return r.render(r.s.handle(&Restart{}))
	case "steal-response":
		return r.cmdStealResponse(pos)
	case "config":
		return r.cmdConfig(kv)
	case "shuffle-run":
		return r.cmdShuffleRun(pos[0])
	case "plan-retire":
		return r.cmdPlanRetire(pos)
	case "story":
		return r.cmdStory(pos)
	case "state":
		return r.stateText()
	case "hooks":
		m := HookMask(0)
		for _, name := range pos {
			for h := HookTransition; h <= HookLogEvent; h++ {
				if name == "on" || name == h.String() {
					m |= 1 << h
				}
			}
		}
		return r.render(r.s.handle(&SetHookListener{Hooks: m}))
	case "add-client":
		return r.render(r.s.handle(&AddClient{Client: pos[0]}))
	case "remove-client":
		return r.render(r.s.handle(&RemoveClient{Client: pos[0]}))
	case "log-event":
		return r.render(r.s.handle(&LogEvent{Topics: pos, Msg: "hello"}))
	}
	r.fatalf("unknown command %q", name)
	return ""
}

// splitArgs separates k=v (and bare flags, as k="") from positionals; a
// positional holding brackets or parentheses is never a flag.
func splitArgs(args []string) (map[string]string, []string) {
	kv := map[string]string{}
	var pos []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && !strings.ContainsAny(k, "([<") {
			kv[k] = v
		} else if isFlag(a) {
			kv[a] = ""
		} else {
			pos = append(pos, a)
		}
	}
	return kv, pos
}

func isFlag(a string) bool {
	switch a {
	case "coassign", "stealing", "amm", "nanny", "expected", "close":
		return true
	}
	return false
}

func client(kv map[string]string) string {
	if c := kv["client"]; c != "" {
		return c
	}
	return "c1"
}

func (r *transcript) intArg(kv map[string]string, name string, def int) int {
	v, ok := kv[name]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.fatalf("%s=%q is not an int", name, v)
	}
	return n
}

func (r *transcript) cmdNew(kv map[string]string) string {
	r.s = newTestState(r.t, func(c *Config, _ *[]string) {
		c.WorkerSaturation = 1.1
		c.NoWorkStealing = true
		c.NoActiveMemoryManager = true
		if v, ok := kv["saturation"]; ok {
			if v == "inf" {
				c.WorkerSaturation = math.Inf(1)
			} else if f, err := strconv.ParseFloat(v, 64); err == nil {
				c.WorkerSaturation = f
			} else {
				r.fatalf("saturation=%q", v)
			}
		}
		_, c.RootTaskCoAssignment = kv["coassign"]
		if _, ok := kv["stealing"]; ok {
			c.NoWorkStealing = false
		}
		if _, ok := kv["amm"]; ok {
			c.NoActiveMemoryManager = false
		}
		c.CoFamilyDepth = r.intArg(kv, "depth", 0)
	})
	return ""
}

func (r *transcript) cmdUpdateGraph(kv map[string]string, specs []string) string {
	var tasks []GraphTask
	for _, spec := range specs {
		tasks = append(tasks, r.graphSpec(spec)...)
	}
	var want []string
	if w := kv["want"]; w != "" {
		want = strings.Split(w, ",")
	}
	return r.render(r.s.submit(client(kv), tasks, want...))
}

// runningOn is the worker processing key (the test fails if none is).
func (r *transcript) runningOn(key string) string {
	ts := r.s.Task(k(key))
	if ts == nil || ts.processingOn == nil {
		r.fatalf("%s is not processing (%s)", key, r.s.status(key))
	}
	return ts.processingOn.Address
}

func (r *transcript) cmdFinish(ks []string, nbytes int64) string {
	var b strings.Builder
	for _, key := range ks {
		worker := r.runningOn(key)
		ts := r.s.Task(k(key))
		b.WriteString(r.render(r.s.handle(&TaskFinished{Worker: worker, Key: k(key), RunID: ts.runID,
			NBytes: nbytes, TypeName: "int", StartStops: []StartStop{{Action: "compute", Start: 1, Stop: 1.5}}})))
	}
	return b.String()
}

func (r *transcript) cmdFinishAll(only []string) string {
	var ks []string
	for _, a := range r.s.WorkerAddresses() {
		if len(only) > 0 && only[0] != wname(a) {
			continue
		}
		for _, ts := range r.s.Worker(a).processing.Items() {
			ks = append(ks, ts.Key.String())
		}
	}
	sort.Slice(ks, func(i, j int) bool { return naturalLess(ks[i], ks[j]) })
	return r.cmdFinish(ks, 8)
}

func (r *transcript) cmdStealResponse(pos []string) string {
	info := r.s.steal.inFlight[r.s.Task(k(pos[1]))]
	if info == nil {
		r.fatalf("no steal of %s in flight", pos[1])
	}
	return r.render(r.s.handle(&StealResponse{Base: Base{ID: info.stimulusID}, Worker: addr(pos[0]), Key: k(pos[1]), State: pos[2]}))
}

func (r *transcript) cmdConfig(kv map[string]string) string {
	c := &ConfigChange{WorkerSaturation: r.s.cfg.WorkerSaturation, RootTaskCoAssignment: r.s.cfg.RootTaskCoAssignment}
	if v, ok := kv["saturation"]; ok {
		c.WorkerSaturation = math.Inf(1)
		if v != "inf" {
			c.WorkerSaturation, _ = strconv.ParseFloat(v, 64)
		}
	}
	if v, ok := kv["coassign"]; ok {
		c.RootTaskCoAssignment = v == "true" || v == ""
	}
	return r.render(r.s.handle(c))
}

func (r *transcript) cmdShuffleRun(id string) string {
	first := fmt.Sprintf("transfer-%s-0", id)
	caller := processingOn(r.s, first)
	out := r.s.handle(&ShuffleGetOrCreate{ShuffleID: id, Key: k(first), Worker: caller, ReplyTo: 1})
	text := r.render(out)
	for _, req := range out.ShuffleRuns {
		text += r.render(r.s.handle(runCreated(req, runSpec1)))
	}
	return text
}

func (r *transcript) cmdPlanRetire(names []string) string {
	var addrs []string
	for _, n := range names {
		addrs = append(addrs, addr(n))
	}
	p := r.s.PlanRetire(addrs)
	var lines []string
	for w, who := range p.Acquire {
		var ks []string
		for key := range who {
			ks = append(ks, key.String())
		}
		sort.Strings(ks)
		lines = append(lines, fmt.Sprintf("acquire-replicas %s: %s", wname(w), strings.Join(ks, " ")))
	}
	sort.Strings(lines)
	lines = append(lines, fmt.Sprintf("unique %d, no recipients %v, done %v", p.Unique, p.NoRecipients, p.Done()))
	return strings.Join(lines, "\n") + "\n"
}

func (r *transcript) cmdStory(ks []string) string {
	var b strings.Builder
	for _, t := range r.s.StoryOf(keys(ks...), nil) {
		fmt.Fprintf(&b, "%s: %s -> %s", t.Key, t.From, t.To)
		if t.Worker != "" {
			fmt.Fprintf(&b, " on %s", wname(t.Worker))
		}
		if t.Reason.Rule != RuleNone {
			fmt.Fprintf(&b, " (%s)", shortAddrs(t.Reason.String()))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
