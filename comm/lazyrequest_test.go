package comm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"daskgo/protocol"
)

// An op in LazyHandlers gets its frame undecoded; anything the lazy scan
// does not take (two frames, a reply that is not a bool) reaches the
// generic handler or the generic error, as before.
func TestLazyHandlersGetTheUndecodedRequest(t *testing.T) {
	s := identityServer()
	s.LazyHandlers = map[string]Handler{
		"echo": func(ctx context.Context, req *Request) (any, error) {
			if req.Raw == nil || req.Args != nil {
				return nil, errors.New("lazy handler without Raw, or with Args")
			}
			if err := req.DecodeArgs(); err != nil {
				return nil, err
			}
			return "lazy:" + req.Args.Get("data").(string), nil
		},
	}
	c := dial(t, testServer(t, s))
	if got := mustCall(t, c, protocol.NewMap("op", "echo", "data", "x")); got != "lazy:x" {
		t.Fatalf("one-frame echo answered %v, want the lazy handler's", got)
	}
	// a blob frame: generic decoding and Handlers' echo
	blob := protocol.NewMap("op", "echo", "data", protocol.NewPickled([]byte("\x80\x05N.")))
	if got := mustCall(t, c, blob); got == nil || AsRemoteError(got) != nil || strings.HasPrefix(protocol.String(got), "lazy:") {
		t.Fatalf("two-frame echo answered %v, want the generic handler's", protocol.String(got))
	}
	// not a bool: the generic parser's error, and the connection closes
	reply, err := c.Call(context.Background(), protocol.NewMap("op", "echo", "data", "x", "reply", "yes"))
	if e := AsRemoteError(reply); err == nil && (e == nil || !strings.Contains(e.ExceptionText, "not a bool")) {
		t.Fatalf("reply=\"yes\" answered %v, %v", protocol.String(reply), err)
	}
}
