package server

import (
	"errors"
	"testing"

	"daskgo/compat"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// A feed that fails answers one message the client can draw: the bar's own
// shape ({"all", "remaining"} as ints for a ProgressBar, as dicts for a
// MultiProgressBar) with status "error" and the exception, or only
// error_message's fields when the closures are nobody's bar.
func TestFeedErrorMessageShapes(t *testing.T) {
	pyErr := &compat.FeedError{Info: &scheduler.ErrorInfo{Exception: []byte("exc"), ExceptionText: "ValueError('x')"}}
	for _, c := range []struct {
		name     string
		setup    *compat.FeedSetup
		err      error
		all      any // nil: no "all" field
		excText  string
		hasField bool
	}{
		{"garbage closures", nil, pyErr, nil, "ValueError('x')", false},
		{"progress bar", &compat.FeedSetup{Kind: compat.FeedProgress, Keys: make([]protocol.Key, 3)},
			errors.New("boom"), int64(3), `RuntimeError("boom")`, true},
		{"multi bar", &compat.FeedSetup{Kind: compat.FeedMulti}, pyErr, &protocol.Map{}, "ValueError('x')", true},
		{"generic feed", &compat.FeedSetup{Kind: compat.FeedGeneric}, errors.New("host gone"), nil,
			`RuntimeError("host gone")`, false},
	} {
		f := &feedRun{setup: c.setup}
		m := f.errorMessage(c.err)
		if m.Get("status") != "error" {
			t.Errorf("%s: status %v", c.name, m.Get("status"))
		}
		if m.Get("exception_text") != c.excText {
			t.Errorf("%s: exception_text %v, want %v", c.name, m.Get("exception_text"), c.excText)
		}
		if m.Get("exception") == nil {
			t.Errorf("%s: no exception", c.name)
		}
		all, has := m.Lookup("all")
		if has != c.hasField {
			t.Errorf("%s: has all %v, want %v", c.name, has, c.hasField)
			continue
		}
		switch want := c.all.(type) {
		case int64:
			if all != want || m.Get("remaining") != want {
				t.Errorf("%s: all %v remaining %v, want %d", c.name, all, m.Get("remaining"), want)
			}
		case *protocol.Map:
			a, ok1 := all.(*protocol.Map)
			r, ok2 := m.Get("remaining").(*protocol.Map)
			if !ok1 || !ok2 || a.Len() != 0 || r.Len() != 0 {
				t.Errorf("%s: all %v remaining %v, want empty dicts", c.name, all, m.Get("remaining"))
			}
		}
	}
}

// The heartbeat's extensions["spans"] entries, (context, span_id, *other):
// value, lose their span id into SpanID; odd entries are left out.
func TestHeartbeatSpans(t *testing.T) {
	spans := &protocol.Map{Entries: []protocol.Entry{
		{Key: []any{"execute", "id-1", "busy", "thread-cpu", "seconds"}, Value: 0.5},
		{Key: []any{"execute", nil, "busy", "thread-cpu", "seconds"}, Value: 0.5}, // no span
		{Key: "flat", Value: 1.0},
		{Key: []any{"p2p", "id-2", "disk", "bytes"}, Value: int64(10)},
	}}
	got := heartbeatSpans(protocol.NewMap("spans", spans))
	if len(got) != 2 || got[0].SpanID != "id-1" || got[1].SpanID != "id-2" || got[1].Value != 10 {
		t.Fatalf("got %+v", got)
	}
	if k := got[0].Key; len(k) != 4 || k[0] != "execute" || k[1] != "busy" {
		t.Fatalf("key %v", k)
	}
	if heartbeatSpans(protocol.NewMap("spans", &protocol.Map{})) != nil || heartbeatSpans(nil) != nil {
		t.Fatal("nothing to read")
	}
}
