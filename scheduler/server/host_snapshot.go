package server

import (
	"context"
	"fmt"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// hostSnapshot answers the host's "snapshot" call: the part of the
// engine's state that dask_scheduler reads (compat/host_scheduler.py),
// as of now. The engine's lock is held only for State.DumpState (the
// cluster dump's copy: a few flat arrays; milliseconds at 100k tasks); the
// rows are built and encoded outside it, on the host's service goroutine.
//
// Parts:
//
//	tasks    {"tasks": [[key, state, nbytes, group, prefix, [dep index...],
//	          [who_has index...], processing_on index or None, annotations,
//	          exception_text, traceback_text, priority, run_id, retries,
//	          erred_on], ...], "workers": [address...]} (indices into
//	          "tasks" and "workers")
//	workers  {"workers": [{address, name, nthreads, memory_limit, metrics,
//	          status, has_what, processing, ...}]}
//	clients  {"clients": [{id, last_seen, wants_what}]}
//	info     {address, id, status, services, started, memory, ...}
func (s *Server) hostSnapshot(ctx context.Context, args *protocol.Map) (any, error) {
	part, _ := args.Get("part").(string)
	var d *scheduler.ClusterDump
	var info *protocol.Map
	var bandwidth float64
	start := time.Now()
	err := s.loop.query(ctx, func(st *scheduler.State) {
		if part == "info" {
			info = st.Identity(0)
			return
		}
		d = st.DumpState()
	})
	if err != nil {
		return nil, err
	}
	copied := time.Since(start)
	defer func() {
		s.log.Debug().Str("part", part).Dur("copied", copied).Dur("total", time.Since(start)).Msg("host snapshot")
	}()
	switch part {
	case "tasks":
		return snapshotTasks(d), nil
	case "workers":
		return protocol.NewMap("workers", snapshotWorkers(d)), nil
	case "clients":
		return protocol.NewMap("clients", snapshotClients(d)), nil
	case "info":
		return s.snapshotInfo(info, bandwidth), nil
	}
	return nil, fmt.Errorf("snapshot: no part %q (tasks, workers, clients, info)", part)
}

func snapshotTasks(d *scheduler.ClusterDump) *protocol.Map {
	index := make(map[string]int64, len(d.Tasks))
	for i, t := range d.Tasks {
		index[string(t.Key)] = int64(i)
	}
	workers := make([]any, len(d.Workers))
	windex := make(map[string]int64, len(d.Workers))
	for i, w := range d.Workers {
		workers[i] = w.Address
		windex[w.Address] = int64(i)
	}
	rows := make([]any, len(d.Tasks))
	for i, t := range d.Tasks {
		deps := d.RefsIn(t.Dependencies)
		di := make([]any, 0, len(deps))
		for _, r := range deps {
			if j, ok := index[string(r.Key)]; ok {
				di = append(di, j)
			}
		}
		holders := d.NamesIn(t.WhoHas)
		wi := make([]any, 0, len(holders))
		for _, a := range holders {
			if j, ok := windex[a]; ok {
				wi = append(wi, j)
			}
		}
		var proc any
		if t.ProcessingOn >= 0 {
			proc = int64(t.ProcessingOn)
		}
		g := d.Groups[t.Group]
		var excText, tbText any
		var retries int64
		var erredOn []any
		if t.Rare >= 0 {
			r := d.Rare[t.Rare]
			if r.ExceptionText != "" {
				excText, tbText = r.ExceptionText, r.TracebackText
			}
			retries = int64(r.Retries)
			for _, w := range r.ErredOn {
				erredOn = append(erredOn, w)
			}
		}
		var prio any
		if t.HasPriority {
			prio = []any{t.Priority[0], t.Priority[1], t.Priority[2]}
		}
		rows[i] = []any{t.Key, scheduler.StatusName(t.State), t.NBytes, g.Name, g.Prefix, di, wi, proc,
			t.Annotations, excText, tbText, prio, t.RunID, retries, erredOn}
	}
	return protocol.NewMap("tasks", rows, "workers", workers)
}

func snapshotWorkers(d *scheduler.ClusterDump) []any {
	out := make([]any, len(d.Workers))
	for i, w := range d.Workers {
		mem := []any{w.Memory.Process, w.Memory.UnmanagedOld, w.Memory.Managed, w.Memory.Spilled}
		out[i] = protocol.NewMap("address", w.Address, "name", w.NameValue, "nthreads", int64(w.NThreads),
			"memory_limit", w.MemoryLimit, "metrics", w.Metrics, "status", w.Status, "host", w.Host,
			"nanny", w.Nanny, "pid", w.PID, "local_directory", w.LocalDirectory, "last_seen", w.LastSeen,
			"occupancy", w.Occupancy, "nbytes", w.NBytes, "services", w.Services, "extra", w.Extra,
			"server_id", w.ServerID, "memory", mem, "resources", floatMap(w.Resources),
			"used_resources", floatMap(w.UsedResources),
			"has_what", refKeys(d.RefsIn(w.HasWhat)), "processing", refKeys(d.RefsIn(w.Processing)))
	}
	return out
}

func snapshotClients(d *scheduler.ClusterDump) []any {
	out := make([]any, len(d.Clients))
	for i, c := range d.Clients {
		out[i] = protocol.NewMap("id", c.ID, "last_seen", c.LastSeen, "wants_what", refKeys(d.RefsIn(c.WantsWhat)))
	}
	return out
}

func (s *Server) snapshotInfo(id *protocol.Map, bandwidth float64) *protocol.Map {
	m := protocol.NewMap("address", id.Get("address"), "id", id.Get("id"), "status", "running",
		"services", id.Get("services"), "started", id.Get("started"),
		"total_nthreads", id.Get("total_nthreads"), "bandwidth", bandwidth)
	return m
}

func refKeys(refs []scheduler.Ref) []any {
	out := make([]any, len(refs))
	for i, r := range refs {
		out[i] = r.Key
	}
	return out
}

func floatMap(m map[string]float64) *protocol.Map {
	out := protocol.NewMap()
	for k, v := range m {
		out.Set(k, v)
	}
	return out
}
