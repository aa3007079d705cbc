package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// /api/v1: distributed/http/scheduler/api.py, which the dask-kubernetes
// operator's autoscaler calls (falling back to the RPCs on 404), on only
// when distributed.scheduler.http.routes lists distributed.http.scheduler.api.

// retireTimeout bounds a retirement asked over HTTP: it waits for the
// retiring workers' unique data to reach other workers.
const retireTimeout = 50 * time.Second

func (s *Server) apiRoot(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "API V1")
}

// apiRetireWorkers is RetireWorkersHandler.post: {"n": k} retires the k
// workers workers_to_close picks, {"workers": [address, ...]} those.
// A body that is not such a dict is refused (400) before any worker is
// touched (distributed answers 500 there).
func (s *Server) apiRetireWorkers(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "retire_workers takes a POST", http.StatusMethodNotAllowed)
		return
	}
	var params struct {
		N       *int     `json:"n"`
		Workers []string `json:"workers"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	if err := dec.Decode(&params); err != nil {
		http.Error(w, fmt.Sprintf("retire_workers: the body must be a JSON object like {\"n\": 1} or {\"workers\": [...]}: %v", err),
			http.StatusBadRequest)
		return
	}
	ctx, cancel := requestTimeout(r, retireTimeout)
	defer cancel()
	workers := params.Workers
	if params.N != nil && *params.N != 0 { // n 0 reads as absent, as distributed's `if n_workers:`
		if *params.N < 0 {
			http.Error(w, "retire_workers: n must be >= 0", http.StatusBadRequest)
			return
		}
		var err error
		if workers, err = s.cfg.Backend.WorkersToClose(ctx, *params.N); err != nil {
			s.fail(w, err)
			return
		}
	}
	retired, err := s.cfg.Backend.RetireWorkers(ctx, workers)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, retired)
}

// apiGetWorkers is GetWorkersHandler.get.
func (s *Server) apiGetWorkers(w http.ResponseWriter, r *http.Request) {
	ws, err := s.cfg.Backend.Workers(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	if ws == nil {
		ws = []NamedWorker{}
	}
	writeJSON(w, struct {
		NumWorkers int           `json:"num_workers"`
		Workers    []NamedWorker `json:"workers"`
	}{len(ws), ws})
}

// apiAdaptiveTarget is AdaptiveTargetHandler.get.
func (s *Server) apiAdaptiveTarget(w http.ResponseWriter, r *http.Request) {
	n, err := s.cfg.Backend.AdaptiveTarget(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, map[string]int{"workers": n})
}

// apiCheckIdle is CheckIdleHandler.get: {"idle_since": unix seconds or null}.
func (s *Server) apiCheckIdle(w http.ResponseWriter, r *http.Request) {
	since, err := s.cfg.Backend.CheckIdle(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, map[string]*float64{"idle_since": since})
}
