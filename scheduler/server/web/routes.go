package web

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"time"
)

//go:embed static
var staticFiles embed.FS

// Panels are the dashboard's individual plots: title (as distributed's
// individual-plots.json spells them) and path. Each is a page of its own
// (static/individual.html draws the panel its path names).
var Panels = []struct{ Title, Path string }{
	{"Individual Task Stream", "/individual-task-stream"},
	{"Individual Progress", "/individual-progress"},
	{"Individual Workers Memory", "/individual-workers-memory"},
	{"Individual Nprocessing", "/individual-nprocessing"},
	{"Individual Task Counts", "/individual-task-counts"},
	{"Individual Withholding", "/individual-withholding"},
}

// pages maps page paths to the embedded file that renders them.
var pages = map[string]string{
	"/status":  "static/status.html",
	"/workers": "static/workers.html",
	"/tasks":   "static/tasks.html",
}

func (s *Server) routes(groups routeGroups) http.Handler {
	mux := http.NewServeMux()
	p := s.cfg.Prefix
	handle := func(path string, h http.HandlerFunc) { mux.HandleFunc(p+path, h) }
	if groups[routeHealth] {
		handle("/health", s.health)
	}
	if groups[routeJSON] {
		handle("/json/counts.json", s.counts)
		handle("/json/identity.json", s.identity)
	}
	if groups[routeInfo] {
		handle("/individual-plots.json", s.individualPlots)
		handle("/info", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, p+"/workers", http.StatusFound)
		})
	}
	if groups[routePrometheus] {
		mux.Handle(p+"/metrics", s.metricsHandler())
	}
	if groups[routeAPI] {
		handle("/api/v1", s.apiRoot)
		handle("/api/v1/retire_workers", s.apiRetireWorkers)
		handle("/api/v1/get_workers", s.apiGetWorkers)
		handle("/api/v1/adaptive_target", s.apiAdaptiveTarget)
		handle("/api/v1/check_idle", s.apiCheckIdle)
	}
	if s.cfg.NoPages {
		return mux
	}
	// The dashboard: its pages, their data and their scripts (embedded,
	// so under /statics/ whatever the routes list says).
	handle("/dashboard/state.json", s.state)
	handle("/dashboard/events", s.events)
	for path, file := range pages {
		handle(path, s.page(file))
	}
	for _, panel := range Panels {
		handle(panel.Path, s.page("static/individual.html"))
	}
	statics, _ := fs.Sub(staticFiles, "static")
	mux.Handle(p+"/statics/", http.StripPrefix(p+"/statics/", http.FileServerFS(statics)))
	handle("/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, p+"/status", http.StatusFound)
	})
	if p != "" {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, p+"/status", http.StatusFound) })
	}
	return mux
}

// health is distributed/http/health.py: "ok" once the server answers.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok")
}

func (s *Server) counts(w http.ResponseWriter, r *http.Request) {
	c, err := s.cfg.Backend.Counts(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, c)
}

func (s *Server) identity(w http.ResponseWriter, r *http.Request) {
	id, err := s.cfg.Backend.Identity(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, id)
}

// individualPlots is info.py's IndividualPlots: title -> path, the paths
// without the prefix (the JupyterLab extension puts its base in front).
func (s *Server) individualPlots(w http.ResponseWriter, _ *http.Request) {
	out := map[string]string{}
	for _, p := range Panels {
		out[p.Title] = p.Path
	}
	writeJSON(w, out)
}

// state is the dashboard's data, once (view.go).
func (s *Server) state(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, viewOf(s.cfg.Backend.Snapshot(), s.cfg.Version))
}

// page serves an embedded HTML page. Its scripts fetch their data relative
// to the page, so under any prefix or proxy path.
func (s *Server) page(file string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		b, err := staticFiles.ReadFile(file)
		if err != nil {
			http.NotFound(w, nil)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	}
}

// fail answers 500 with the error, as distributed's handlers do
// (set_status(500, str(e)) and {"Error": "Internal Server Error"}).
func (s *Server) fail(w http.ResponseWriter, err error) {
	s.cfg.Log.Warn().Err(err).Msg("dashboard request failed")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	_ = json.NewEncoder(w).Encode(map[string]string{"Error": "Internal Server Error", "message": err.Error()})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		http.Error(w, fmt.Sprintf("encode: %v", err), http.StatusInternalServerError)
	}
}

// requestTimeout bounds the engine requests of a handler.
func requestTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}
