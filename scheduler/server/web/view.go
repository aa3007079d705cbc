package web

import (
	"math"
	"sort"
	"time"

	"daskgo/scheduler"
)

// View is the dashboard's data (GET /dashboard/state.json, and each event
// of /dashboard/events): the Snapshot in JSON, capped so that a page stays
// light with a million tasks and a thousand workers. Field names are the
// contract with the pages' scripts (static/*.js).
type View struct {
	Version   string      `json:"version"`
	At        float64     `json:"at"` // unix seconds
	Scheduler SchedView   `json:"scheduler"`
	Counts    Counts      `json:"counts"`
	Clients   int         `json:"clients"`
	Workers   []Worker    `json:"workers"`
	Prefixes  []Prefix    `json:"prefixes"` // the MaxPrefixes with the most tasks, then by name
	Withhold  Withholding `json:"withholding"`
	Stealing  Stealing    `json:"stealing"`
	// DesiredWorkers is adaptive_target(); IdleSince check_idle() (null
	// while busy).
	DesiredWorkers int      `json:"desired_workers"`
	IdleSince      *float64 `json:"idle_since"`
	TasksDone      int64    `json:"tasks_done"`
	Transitions    uint64   `json:"transitions"`
	Stream         Stream   `json:"stream"`
}

// MaxPrefixes caps the prefixes a view lists.
const MaxPrefixes = 100

type SchedView struct {
	ID      string  `json:"id"`
	Address string  `json:"address"`
	Started float64 `json:"started"`
}

// Counts are the tasks held by state (by distributed's state names).
type Counts map[string]int

type Worker struct {
	Address     string  `json:"address"`
	Name        string  `json:"name"`
	Host        string  `json:"host"`
	Status      string  `json:"status"`
	NThreads    int     `json:"nthreads"`
	MemoryLimit int64   `json:"memory_limit"`
	Managed     int64   `json:"managed"` // bytes of the keys it holds
	Processing  int     `json:"processing"`
	InMemory    int     `json:"in_memory"`
	Occupancy   float64 `json:"occupancy"` // seconds of work assigned
	Idle        bool    `json:"idle"`
	Saturated   bool    `json:"saturated"`
	LastSeen    float64 `json:"last_seen"`
}

type Prefix struct {
	Name            string         `json:"name"`
	States          map[string]int `json:"states"`
	Totals          map[string]int `json:"totals"` // entries into each state, ever
	ComputeSeconds  float64        `json:"compute_seconds"`
	NBytes          int64          `json:"nbytes"`
	DurationAverage *float64       `json:"duration_average"` // null when never measured
}

type Withholding struct {
	// Saturation is worker-saturation; null for inf (withholding off).
	Saturation   *float64 `json:"saturation"`
	CoAssignment bool     `json:"coassignment"`
	Queued       int      `json:"queued"`     // root tasks withheld on the scheduler
	Coassigned   int      `json:"coassigned"` // of those, dealt to a worker's family runs
	Runs         int      `json:"runs"`       // co-assignment runs
}

type Stealing struct {
	Requests  int64 `json:"requests"`
	Confirmed int64 `json:"confirmed"`
	Rejected  int64 `json:"rejected"`
	InFlight  int   `json:"in_flight"`
}

// Stream is the last task runs: Index counts every run ever recorded, so
// the runs are those numbered Index-len(Runs)+1 .. Index.
type Stream struct {
	Index int64 `json:"index"`
	Runs  []Run `json:"runs"`
}

type Run struct {
	Prefix string  `json:"prefix"`
	Worker string  `json:"worker"`
	Start  float64 `json:"start"`
	Stop   float64 `json:"stop"`
	Erred  bool    `json:"erred,omitempty"`
}

// viewOf builds the View of a snapshot; with since > 0 the stream holds
// only the runs after run number since (an event stream's increments).
func viewOf(snap *scheduler.Snapshot, version string, since ...int64) *View {
	v := &View{Version: version, At: unix(snap.At), Clients: snap.Clients, Counts: Counts{},
		Scheduler:      SchedView{ID: snap.SchedulerID, Address: snap.Address, Started: unix(snap.Started)},
		DesiredWorkers: snap.DesiredWorkers, TasksDone: snap.TasksDone, Transitions: snap.Transitions,
		Workers: make([]Worker, 0, len(snap.Workers)), Prefixes: []Prefix{}}
	if !snap.IdleSince.IsZero() {
		t := unix(snap.IdleSince)
		v.IdleSince = &t
	}
	for st, n := range snap.Tasks {
		if status := scheduler.Status(st); status != scheduler.StatusForgotten {
			v.Counts[status.String()] = n
		}
	}
	for _, w := range snap.Workers {
		v.Workers = append(v.Workers, Worker{Address: w.Address, Name: w.Name, Host: w.Host, Status: w.Status,
			NThreads: w.NThreads, MemoryLimit: w.MemoryLimit, Managed: w.Managed, Processing: w.Processing,
			InMemory: w.InMemory, Occupancy: w.Occupancy, Idle: w.Idle, Saturated: w.Saturated, LastSeen: unix(w.LastSeen)})
	}
	v.Prefixes = prefixesOf(snap.Prefixes)
	v.Withhold = Withholding{CoAssignment: snap.CoAssignment, Queued: snap.Queued, Coassigned: snap.CoOwned, Runs: snap.CoRuns}
	if !math.IsInf(snap.Saturation, 1) {
		sat := snap.Saturation
		v.Withhold.Saturation = &sat
	}
	v.Stealing = Stealing{Requests: snap.Stealing.Requests, Confirmed: snap.Stealing.Confirmed,
		Rejected: snap.Stealing.Rejected, InFlight: snap.Stealing.InFlight}
	runs := snap.Stream
	if len(since) > 0 && since[0] > 0 {
		if n := snap.StreamIndex - since[0]; n < int64(len(runs)) {
			runs = runs[len(runs)-int(max(n, 0)):]
		}
	}
	v.Stream = Stream{Index: snap.StreamIndex, Runs: make([]Run, len(runs))}
	for i, r := range runs {
		v.Stream.Runs[i] = Run{Prefix: r.Prefix, Worker: r.Worker, Start: r.Start, Stop: r.Stop, Erred: r.Erred}
	}
	return v
}

func prefixesOf(ps []scheduler.PrefixView) []Prefix {
	ps = append([]scheduler.PrefixView(nil), ps...)
	held := func(p scheduler.PrefixView) int {
		n := 0
		for st, c := range p.States {
			if scheduler.Status(st) != scheduler.StatusForgotten {
				n += c
			}
		}
		return n
	}
	sort.SliceStable(ps, func(i, j int) bool { return held(ps[i]) > held(ps[j]) })
	if len(ps) > MaxPrefixes {
		ps = ps[:MaxPrefixes]
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	out := make([]Prefix, 0, len(ps))
	for _, p := range ps {
		pv := Prefix{Name: p.Name, States: map[string]int{}, Totals: map[string]int{}, ComputeSeconds: p.ComputeSeconds,
			NBytes: p.NBytes}
		for st, n := range p.States {
			if status := scheduler.Status(st); status != scheduler.StatusForgotten {
				pv.States[status.String()] = n
			}
		}
		for st, n := range p.StateTotals {
			pv.Totals[scheduler.Status(st).String()] = int(n)
		}
		if p.DurationAverage >= 0 {
			d := p.DurationAverage
			pv.DurationAverage = &d
		}
		out = append(out, pv)
	}
	return out
}

func unix(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
