package web

import "fmt"

// A route group is one module of distributed.scheduler.http.routes: the
// config lists modules, each of which contributes its `routes`
// (distributed/http/utils.py get_handlers). The names below are the
// modules; the routes each stands for are in doc.go.
type routeGroup string

const (
	routePrometheus routeGroup = "distributed.http.scheduler.prometheus"
	routeInfo       routeGroup = "distributed.http.scheduler.info"
	routeJSON       routeGroup = "distributed.http.scheduler.json"
	routeAPI        routeGroup = "distributed.http.scheduler.api"
	routeHealth     routeGroup = "distributed.http.health"
	routeStatics    routeGroup = "distributed.http.statics"
	// routeProxy is jupyter-server-proxy's pass-through to other ports of
	// the host; distributed serves an error page without that package.
	// Accepted (it is in the default list) and not served.
	routeProxy routeGroup = "distributed.http.proxy"
	// routeMissingBokeh is the page a stock scheduler serves at /status
	// without Bokeh; Scheduler.__init__ appends it to the configured list
	// (in place, so it reaches child processes' inherited config). Our
	// pages stand for it.
	routeMissingBokeh routeGroup = "distributed.http.scheduler.missing_bokeh"
)

// DefaultRoutes is distributed.yaml's distributed.scheduler.http.routes.
var DefaultRoutes = []string{
	string(routePrometheus), string(routeInfo), string(routeJSON),
	string(routeHealth), string(routeProxy), string(routeStatics),
}

type routeGroups map[routeGroup]bool

// routeGroupsOf reads the configured list. A module we do not have is an
// error naming it: distributed would import it, and a user who listed a
// route of their own expects it served, not silently missing.
func routeGroupsOf(names []string) (routeGroups, error) {
	if names == nil {
		names = DefaultRoutes
	}
	g := routeGroups{}
	for _, n := range names {
		switch r := routeGroup(n); r {
		case routePrometheus, routeInfo, routeJSON, routeAPI, routeHealth, routeStatics, routeProxy, routeMissingBokeh:
			g[r] = true
		default:
			return nil, fmt.Errorf("distributed.scheduler.http.routes: %q is not a route module dask-go-scheduler serves "+
				"(it serves %s, %s, %s, %s, %s, %s; route modules are Python and cannot be loaded here)",
				n, routePrometheus, routeInfo, routeJSON, routeAPI, routeHealth, routeStatics)
		}
	}
	return g, nil
}
