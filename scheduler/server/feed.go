package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"daskgo/comm"
	"daskgo/compat"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// The feed op (Scheduler.feed): a client's comm that the scheduler writes
// function(scheduler, state) to every interval, state being what
// setup(scheduler) returned. distributed's progress bars are its callers:
// ProgressBar.listen and MultiProgressBar.listen send closures that set up
// a Progress / MultiProgress plugin and report its counts.
//
// Those two are answered here without Python per interval or transition:
// the helper unpickles the closures once (compat.FeedSetup), the engine
// runs the plugin's logic on its transitions (scheduler/progress.go), and
// this goroutine reads the watch's counts each interval with a query (no
// allocation beyond the message) and writes them, the same dict the
// closure's function returns. It stops at the first final status
// ("finished" or "error"), which the bar reads as its last message, and
// closes the comm; a client that hangs up earlier ends it too.
//
// Any other feed (a Client-side caller's own closures) runs in the
// scheduler-side Python host (runInHost, compat/host_feed.py).
//
// A feed that fails (closures that do not unpickle, a custom group_by that
// raises) answers one final message the bar can draw: the bar's own shape
// with status "error" and the exception, or, when the closures are not a
// bar's, distributed.core.error_message's fields with status "error".
//
// The handler's goroutine is the comm server's for this connection; it
// owns a reader goroutine (feedReader), which ends when the connection
// closes and is awaited before the handler returns, and a watcher that
// cancels the feed's context when the client hangs up (it ends with that
// context, which the handler cancels on return).

const (
	// feedKeysPoll is how often setup looks for the bar's keys in the
	// engine, as Progress.setup polls scheduler.tasks.
	feedKeysPoll = 50 * time.Millisecond
	// feedMinInterval bounds how often a feed writes: a zero interval
	// would make Scheduler.feed spin.
	feedMinInterval = 10 * time.Millisecond
	// feedWriteTimeout bounds one write to a client that stopped reading.
	feedWriteTimeout = 30 * time.Second
	// feedSetupTimeout bounds the helper's feed_setup.
	feedSetupTimeout = 5 * time.Minute
)

// errFeedGone: the client hung up.
var errFeedGone = errors.New("feed: the client closed the comm")

// feed is Scheduler.feed.
func (s *Server) feed(ctx context.Context, req *comm.Request) (any, error) {
	conn := req.TakeOver()
	gone := make(chan struct{})
	readerDone := make(chan struct{})
	go func() { // owned by this handler: ends when conn closes, awaited below
		defer close(readerDone)
		feedReader(conn, gone)
	}()
	defer func() {
		_ = conn.Close()
		<-readerDone
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // ends with the handler (cancel) or the client
		select {
		case <-gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	f := &feedRun{s: s, conn: conn}
	err := f.run(ctx, req.Args)
	switch {
	case err == nil, errors.Is(err, errFeedGone), ctx.Err() != nil:
	default:
		req.Log.Info().Err(err).Msg("feed failed")
		_ = f.write(f.errorMessage(err))
	}
	return nil, nil
}

// feedReader reads the comm until it fails, which is how the client's
// hang-up shows: a bar sends nothing after its feed request (anything it
// did send would be read and dropped, as Scheduler.feed never reads).
func feedReader(conn *comm.Conn, gone chan<- struct{}) {
	defer close(gone)
	for {
		if _, err := conn.Read(); err != nil {
			return
		}
	}
}

// feedRun is one feed's state on the handler's goroutine.
type feedRun struct {
	s       *Server
	conn    *comm.Conn
	closure compat.FeedSetupRequest // the client's pickled closures
	setup   *compat.FeedSetup       // nil until the helper has answered
}

func (f *feedRun) run(ctx context.Context, args *protocol.Map) error {
	every := time.Second // Scheduler.feed's default "1s"
	if v, ok := args.Lookup("interval"); ok && v != nil {
		d, err := compat.ParseTimedelta(v)
		if err != nil {
			return fmt.Errorf("feed interval: %w", err)
		}
		every = d
	}
	every = max(every, feedMinInterval)
	f.closure = compat.FeedSetupRequest{Setup: args.Get("setup"), Function: args.Get("function"), Teardown: args.Get("teardown")}
	sctx, cancel := context.WithTimeout(ctx, feedSetupTimeout)
	fs, err := f.s.mat.FeedSetup(sctx, f.closure)
	cancel()
	if err != nil {
		return err
	}
	f.setup = fs
	if fs.Kind == compat.FeedGeneric {
		return f.runInHost(ctx, every)
	}
	id, err := f.start(ctx, fs)
	if err != nil {
		return err
	}
	defer f.s.loop.submit(&scheduler.StopProgress{Base: f.s.base("feed-closed"), ID: id})
	return f.report(ctx, id, every)
}

// start is Progress.setup: it waits until the engine knows every key, then
// opens the watch (and, for a custom group_by, has the helper group its
// keys).
func (f *feedRun) start(ctx context.Context, fs *compat.FeedSetup) (int64, error) {
	grouping := scheduler.GroupByPrefix
	switch fs.GroupBy {
	case "custom":
		grouping = scheduler.GroupByCustom
	case "spans":
		grouping = scheduler.GroupBySpans
	}
	for {
		v, err := f.s.loop.call(ctx, func(id int64) scheduler.Stimulus {
			return &scheduler.StartProgress{Base: f.s.base("feed-setup"), Keys: fs.Keys, Complete: fs.Complete,
				Multi: fs.Kind == compat.FeedMulti, Grouping: grouping, ReplyTo: id}
		})
		if err != nil {
			return 0, err
		}
		p, ok := v.(*scheduler.ProgressStarted)
		if !ok {
			return 0, fmt.Errorf("feed setup: engine answered %T", v)
		}
		if !p.Missing {
			if grouping == scheduler.GroupByCustom {
				if err := f.group(ctx, p); err != nil {
					f.s.loop.submit(&scheduler.StopProgress{Base: f.s.base("feed-closed"), ID: p.ID})
					return 0, err
				}
			}
			return p.ID, nil
		}
		select {
		case <-ctx.Done():
			return 0, errFeedGone
		case <-f.s.clock.After(feedKeysPoll):
		}
	}
}

// group has the helper apply the bar's group_by to the watch's keys.
func (f *feedRun) group(ctx context.Context, p *scheduler.ProgressStarted) error {
	r := f.closure
	r.GroupKeys = p.AllKeys
	sctx, cancel := context.WithTimeout(ctx, feedSetupTimeout)
	defer cancel()
	fs, err := f.s.mat.FeedSetup(sctx, r)
	if err != nil {
		return err
	}
	if len(fs.Groups) != len(p.AllKeys) {
		return fmt.Errorf("feed setup: the helper grouped %d keys of %d", len(fs.Groups), len(p.AllKeys))
	}
	return f.s.loop.submitWait(ctx, &scheduler.SetProgressGroups{Base: f.s.base("feed-groups"), ID: p.ID, Groups: fs.Groups})
}

// report writes the watch's message every interval until it is final.
func (f *feedRun) report(ctx context.Context, id int64, every time.Duration) error {
	for {
		var msg *protocol.Map
		var final, ok bool
		if err := f.s.loop.query(ctx, func(st *scheduler.State) { msg, final, ok = st.ProgressReport(id) }); err != nil {
			return err
		}
		if !ok {
			return errors.New("feed: progress watch lost")
		}
		if err := f.write(msg); err != nil {
			return errFeedGone
		}
		if final {
			return nil
		}
		select {
		case <-ctx.Done():
			return errFeedGone
		case <-f.s.clock.After(every):
		}
	}
}

func (f *feedRun) write(msg any) error {
	_ = f.conn.SetWriteDeadline(time.Now().Add(feedWriteTimeout))
	return f.conn.Write(msg)
}

// errorMessage is the final message of a feed that failed: the bar's shape
// with status "error" when the closures are a bar's, else error_message's
// fields.
func (f *feedRun) errorMessage(err error) *protocol.Map {
	info := scheduler.RuntimeErrorInfo(err.Error())
	var fe *compat.FeedError
	if errors.As(err, &fe) {
		info = fe.Info // the closures' own exception
	}
	msg := protocol.NewMap("status", "error", "exception", info.Exception, "traceback", info.Traceback,
		"exception_text", info.ExceptionText, "traceback_text", info.TracebackText, "key", nil)
	switch {
	case f.setup == nil || f.setup.Kind == compat.FeedGeneric:
	case f.setup.Kind == compat.FeedMulti:
		msg.Set("all", protocol.NewMap())
		msg.Set("remaining", protocol.NewMap())
	default:
		n := int64(len(f.setup.Keys))
		msg.Set("all", n)
		msg.Set("remaining", n)
	}
	return msg
}

// feedCloseTimeout bounds a generic feed's teardown in the host.
const feedCloseTimeout = 30 * time.Second

// runInHost runs a generic feed's closures in the scheduler-side Python
// host (compat/host_feed.py): setup once, function every interval, the
// teardown when the client leaves. The host answers; this goroutine keeps
// the interval and writes, so a host that is slow delays only this feed.
func (f *feedRun) runInHost(ctx context.Context, every time.Duration) error {
	h := f.s.host
	ans, err := h.Call(ctx, "feed_open", protocol.NewMap("setup", f.closure.Setup,
		"function", f.closure.Function, "teardown", f.closure.Teardown))
	if err != nil {
		return fmt.Errorf("feed in the Python host: %w", err)
	}
	if err := hostError(ans); err != nil {
		return err
	}
	id := ans.Get("feed")
	defer func() { // the teardown runs whoever ended the feed
		cctx, cancel := context.WithTimeout(f.s.ctx, feedCloseTimeout)
		defer cancel()
		if ans, err := h.Call(cctx, "feed_close", protocol.NewMap("feed", id)); err == nil {
			err = hostError(ans)
			if err != nil {
				f.s.log.Info().Err(err).Msg("feed teardown failed")
			}
		}
	}()
	for {
		ans, err := h.Call(ctx, "feed_next", protocol.NewMap("feed", id))
		if err != nil {
			return fmt.Errorf("feed in the Python host: %w", err)
		}
		if err := hostError(ans); err != nil {
			return err
		}
		if err := f.write(ans.Get("result")); err != nil {
			return errFeedGone
		}
		select {
		case <-ctx.Done():
			return errFeedGone
		case <-f.s.clock.After(every):
		}
	}
}

// hostError is the host's error answer (distributed's error_message
// fields) as a *compat.FeedError, or nil for an OK answer.
func hostError(ans *protocol.Map) error {
	if ans.Get("status") == "OK" {
		return nil
	}
	info := &scheduler.ErrorInfo{Exception: ans.Get("exception"), Traceback: ans.Get("traceback")}
	info.ExceptionText, _ = ans.Get("exception_text").(string)
	info.TracebackText, _ = ans.Get("traceback_text").(string)
	return &compat.FeedError{Info: info}
}
