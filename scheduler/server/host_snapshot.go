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
// as of now. The engine's lock is held only for the copy: State.DumpTasks
// (the cluster dump's copy of the tasks, a few flat arrays: tens of
// milliseconds at 100k tasks, scripts/bench/results/host/) or, for
// workers and clients, State.DumpPeers (no task but those they hold); the
// rows are built and encoded outside it, on the host's service goroutine.
//
// Parts:
//
//	tasks    {"tasks": [[key, state, nbytes, group, prefix, [dep index...],
//	          [who_has index...], processing_on index or None, annotations,
//	          exception_text, traceback_text, priority, run_id, retries,
//	          erred_on, exception, traceback], ...], "workers": [address...]}
//	          (exception and traceback as the worker sent them; indices into
//	          "tasks" and "workers")
//	workers  {"workers": [{address, name, nthreads, memory_limit, metrics,
//	          status, has_what, processing, ...}]}
//	clients  {"clients": [{id, last_seen, wants_what}]}
//	info     {address, id, status, services, started, memory, ...}
func (s *Server) hostSnapshot(ctx context.Context, args *protocol.Map) (any, error) {
	part, _ := args.Get("part").(string)
	var d *scheduler.ClusterDump
	var info *protocol.Map
	start := time.Now()
	err := s.loop.query(ctx, func(st *scheduler.State) {
		switch part {
		case "info":
			info = snapshotInfo(st)
		case "tasks":
			d = st.DumpTasks()
		default:
			d = st.DumpPeers()
		}
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
		return info, nil
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
		var excText, tbText, exc, tb any
		var retries int64
		var erredOn []any
		if t.Rare >= 0 {
			r := d.Rare[t.Rare]
			if r.ExceptionText != "" {
				excText, tbText = r.ExceptionText, r.TracebackText
			}
			exc, tb = r.Exception, r.Traceback
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
			t.Annotations, excText, tbText, prio, t.RunID, retries, erredOn, exc, tb}
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

// snapshotInfo is what dask_scheduler reads of the scheduler itself (few
// fields, copied under the lock). distributed keeps bandwidth_workers and
// bandwidth_types from its workers' heartbeats; the engine keeps only the
// cluster's figure, so those two read empty.
func snapshotInfo(st *scheduler.State) *protocol.Map {
	id := st.Identity(0)
	m := st.Memory()
	return protocol.NewMap("address", id.Get("address"), "id", id.Get("id"), "status", "running",
		"services", id.Get("services"), "started", id.Get("started"),
		"total_nthreads", int64(st.TotalThreads()), "bandwidth", st.Bandwidth(),
		"memory", []any{m.Process, m.UnmanagedOld, m.Managed, m.Spilled})
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
