package comm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"daskgo/protocol"
)

// An op in LazyHandlers gets its frame undecoded; a request the lazy scan
// does not take (two frames) reaches the same handler decoded, and one the
// generic parser refuses gets the generic error.
func TestLazyHandlersGetTheUndecodedRequest(t *testing.T) {
	s := identityServer()
	delete(s.Handlers, "echo") // an op is registered in one of the two maps
	s.LazyHandlers = map[string]Handler{
		"echo": func(ctx context.Context, req *Request) (any, error) {
			if req.Raw == nil {
				if req.Args == nil {
					return nil, errors.New("lazy handler with neither Raw nor Args")
				}
				return "decoded", nil
			}
			if req.Args != nil {
				return nil, errors.New("lazy handler with both Raw and Args")
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
	// a blob frame: generic decoding, then the same handler
	blob := protocol.NewMap("op", "echo", "data", protocol.NewPickled([]byte("\x80\x05N.")))
	if got := mustCall(t, c, blob); got != "decoded" {
		t.Fatalf("two-frame echo answered %v, want the lazy handler's decoded answer", protocol.String(got))
	}
	// not a bool: the generic parser's error, and the connection closes
	reply, err := c.Call(context.Background(), protocol.NewMap("op", "echo", "data", "x", "reply", "yes"))
	if e := AsRemoteError(reply); err == nil && (e == nil || !strings.Contains(e.ExceptionText, "not a bool")) {
		t.Fatalf("reply=\"yes\" answered %v, %v", protocol.String(reply), err)
	}
}
