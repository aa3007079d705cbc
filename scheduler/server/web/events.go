package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// events is the dashboard's live feed (server-sent events): the View at
// once, then a View each time the engine publishes a new snapshot (on its
// tick), checked every eventPoll; the stream part of each holds only the
// runs the page has not seen. Server-sent events need no library: an event
// is "data: <json>\n\n" and a flush. Each write has its own deadline, a
// comment every keepAlive keeps proxies from closing an idle stream, and
// the handler returns when the page goes away or the server stops.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	send := func(payload string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
		if _, err := fmt.Fprint(w, payload); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	var last any
	var seen int64
	push := func() bool {
		snap := s.cfg.Backend.Snapshot()
		if snap == last {
			return true
		}
		last = snap
		v := viewOf(snap, s.cfg.Version, seen)
		seen = snap.StreamIndex
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		return send("data: " + string(b) + "\n\n")
	}
	if !push() {
		return
	}
	poll := time.NewTicker(eventPoll)
	defer poll.Stop()
	alive := time.NewTicker(keepAlive)
	defer alive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-poll.C:
			if !push() {
				return
			}
		case <-alive.C:
			if !send(": keep-alive\n\n") {
				return
			}
		}
	}
}

const (
	eventPoll         = 500 * time.Millisecond
	keepAlive         = 15 * time.Second
	eventWriteTimeout = 10 * time.Second
)
