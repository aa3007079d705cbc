package server

import (
	"context"
	"fmt"
	"sort"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// profile is Scheduler.get_profile (Client.profile): every selected
// worker's profile (start, stop, key, server passed on), merged as
// distributed.profile.merge merges them, or {worker: profile} with
// merge_workers=False. A worker that fails or dies during the fan-out is
// left out and the others' profiles are returned, as get_profile's
// gather(return_exceptions=True) does. (distributed zips the workers with
// the successful replies only, which pins a reply on the wrong worker
// after a failure; here each reply stays with its worker.)
//
// scheduler=True profiles the scheduler's own event loop thread in
// distributed (profile.get_profile(io_loop.profile)). This scheduler has
// no Python event loop, so it answers an empty profile in distributed's
// shape (profile.create(), what get_profile returns for an empty
// history); its own CPU profile is Go's (dask-go-scheduler
// --cpu-profile FILE).
func (s *Server) profile(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	onScheduler, mergeWorkers := f.bool("scheduler"), true
	if b, ok := req.Args.Get("merge_workers").(bool); ok {
		mergeWorkers = b
	}
	wanted := optionalStrings(req.Args.Get("workers"))
	if f.err != nil {
		return nil, f.err
	}
	if onScheduler {
		return emptyProfile(), nil
	}
	workers, err := s.selectedWorkers(ctx, wanted)
	if err != nil {
		return nil, err
	}
	msg := protocol.NewMap("op", "profile", "start", req.Args.Get("start"), "stop", req.Args.Get("stop"),
		"key", req.Args.Get("key"), "server", f.bool("server"))
	ctx, stop := callerContext(ctx, req.Conn)
	defer stop()
	var profiles []*protocol.Map
	byWorker := &protocol.Map{}
	for _, r := range s.callEach(ctx, sameMsg(workers, msg)) {
		p, ok := r.reply.(*protocol.Map)
		if r.err != nil || !ok {
			req.Log.Warn().Err(r.err).Str("worker", r.worker).Msg("profile: worker left out")
			continue
		}
		profiles = append(profiles, p)
		byWorker.Entries = append(byWorker.Entries, protocol.Entry{Key: r.worker, Value: p})
	}
	if !mergeWorkers {
		return byWorker, nil
	}
	return mergeProfiles(profiles, 0)
}

// selectedWorkers is get_profile's workers: all when wanted is nil, else
// those of wanted the scheduler knows, sorted.
func (s *Server) selectedWorkers(ctx context.Context, wanted []string) ([]string, error) {
	var out []string
	err := s.loop.query(ctx, func(st *scheduler.State) {
		if wanted == nil {
			out = st.WorkerAddresses()
			return
		}
		for _, w := range wanted {
			if st.Worker(w) != nil {
				out = append(out, w)
			}
		}
	})
	sort.Strings(out)
	return out, err
}

// emptyProfile is distributed.profile.create().
func emptyProfile() *protocol.Map {
	return protocol.NewMap("count", int64(0), "children", protocol.NewMap(), "identifier", "root",
		"description", protocol.NewMap("filename", "", "name", "", "line_number", int64(0), "line", ""))
}

// maxProfileDepth bounds the merge's recursion: distributed's merge
// catches RecursionError (about 1000 frames) and drops the children.
const maxProfileDepth = 900

// mergeProfiles is distributed.profile.merge: the states must share their
// identifier; children merge by identifier (in the order first seen),
// counts add up, and the first state's description is kept.
func mergeProfiles(states []*protocol.Map, depth int) (*protocol.Map, error) {
	if len(states) == 0 {
		return emptyProfile(), nil
	}
	id := states[0].Get("identifier")
	children := &protocol.Map{}
	groups := map[string]int{} // identifier -> index in children
	var count int64
	for _, st := range states {
		if other := st.Get("identifier"); other != id {
			return nil, fmt.Errorf("profile merge: expected one identifier, got %s and %s", protocol.String(id), protocol.String(other))
		}
		n, _ := st.Get("count").(int64)
		count += n
		kids, _ := st.Get("children").(*protocol.Map)
		for _, e := range kids.Items() {
			name := protocol.String(e.Key)
			child, ok := e.Value.(*protocol.Map)
			if !ok {
				continue
			}
			i, seen := groups[name]
			if !seen {
				i = len(children.Entries)
				groups[name] = i
				children.Entries = append(children.Entries, protocol.Entry{Key: e.Key, Value: []*protocol.Map(nil)})
			}
			children.Entries[i].Value = append(children.Entries[i].Value.([]*protocol.Map), child)
		}
	}
	for i, e := range children.Entries {
		if depth >= maxProfileDepth {
			children.Entries = nil
			break
		}
		merged, err := mergeProfiles(e.Value.([]*protocol.Map), depth+1)
		if err != nil {
			return nil, err
		}
		children.Entries[i].Value = merged
	}
	return protocol.NewMap("description", states[0].Get("description"), "children", children, "count", count,
		"identifier", id), nil
}
