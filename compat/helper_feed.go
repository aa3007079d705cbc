package compat

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// feed_setup: what the scheduler needs to answer a feed op (Scheduler.feed)
// without running Python per interval. The helper unpickles the feed's
// closures once and says whether they are ProgressBar.listen's or
// MultiProgressBar.listen's (then the keys, complete and group_by they
// close over: the outer ring runs Progress / MultiProgress in the engine)
// or something else ("generic"). For a MultiProgress grouped by a Python
// function, a second request applies it to the keys the engine tracks.
// The helper keeps nothing: each request carries the closures again.

// helperFeedScript is the helper's side of feed_setup.
//
//go:embed helper_feed.py
var helperFeedScript string

// Feed kinds the helper tells apart.
const (
	FeedProgress = "progress" // ProgressBar's: Progress
	FeedMulti    = "multi"    // MultiProgressBar's: MultiProgress
	FeedGeneric  = "generic"  // anything else
)

// FeedSetupRequest carries the feed op's pickled closures as the client
// sent them (bytes, or nil when absent) and, for the second request of a
// custom grouping, the keys to group.
type FeedSetupRequest struct {
	Setup, Function, Teardown any
	GroupKeys                 []protocol.Key
}

// FeedSetup is the helper's answer.
type FeedSetup struct {
	Kind     string
	Keys     []protocol.Key
	Complete bool
	GroupBy  string // "prefix", "spans" or "custom", for FeedMulti
	Groups   []any  // group_by(key) for each of GroupKeys
}

// FeedError is a Python exception the closures raised (or a helper that
// failed), in distributed.core.error_message's fields.
type FeedError struct{ Info *scheduler.ErrorInfo }

func (e *FeedError) Error() string { return "feed setup: " + e.Info.ExceptionText }

type feedJob struct {
	req   FeedSetupRequest
	reply chan feedReply
}

type feedReply struct {
	setup *FeedSetup
	err   error
}

// FeedSetup asks the first helper about a feed's closures.
func (p *HelperPool) FeedSetup(ctx context.Context, r FeedSetupRequest) (*FeedSetup, error) {
	return p.first().FeedSetup(ctx, r)
}

// FeedSetup queues a feed_setup request and waits for its answer (bounded
// by ctx).
func (m *Materializer) FeedSetup(ctx context.Context, r FeedSetupRequest) (*FeedSetup, error) {
	j := &job{feed: &feedJob{req: r, reply: make(chan feedReply, 1)}}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	m.enqueueLocked(j)
	m.mu.Unlock()
	select {
	case a := <-j.feed.reply:
		return a.setup, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("helper feed_setup: %w", ctx.Err())
	case <-m.done:
		return nil, ErrClosed
	}
}

func encodeFeedSetupRequest(id int64, r *FeedSetupRequest) ([][]byte, error) {
	var groupKeys any
	if r.GroupKeys != nil {
		groupKeys = r.GroupKeys
	}
	return protocol.Encode(protocol.NewMap("op", "feed_setup", "id", id, "setup", r.Setup,
		"function", r.Function, "teardown", r.Teardown, "group_keys", groupKeys), nil)
}

// answerFeed delivers a feed_setup answer: OK, a Python error, or a
// failure of the helper (text).
func (j *feedJob) answer(resp *protocol.Map, info *scheduler.ErrorInfo, text string) {
	switch {
	case info != nil:
		j.reply <- feedReply{err: &FeedError{Info: info}}
	case text != "":
		j.reply <- feedReply{err: errors.New(text)}
	default:
		a, err := parseFeedSetup(resp)
		j.reply <- feedReply{setup: a, err: err}
	}
}

func parseFeedSetup(resp *protocol.Map) (*FeedSetup, error) {
	a := &FeedSetup{}
	a.Kind, _ = resp.Get("kind").(string)
	switch a.Kind {
	case FeedGeneric:
		return a, nil
	case FeedProgress, FeedMulti:
	default:
		return nil, fmt.Errorf("helper feed_setup: kind is %s", truncate(protocol.String(resp.Get("kind"))))
	}
	keys, err := protocol.KeysOf(resp.Get("keys"))
	if err != nil {
		return nil, fmt.Errorf("helper feed_setup: keys: %w", err)
	}
	a.Keys = keys
	a.Complete, _ = resp.Get("complete").(bool)
	if a.Kind == FeedMulti {
		a.GroupBy, _ = resp.Get("group_by").(string)
		if groups, ok := resp.Get("groups").([]any); ok {
			a.Groups = groups
		}
	}
	return a, nil
}
