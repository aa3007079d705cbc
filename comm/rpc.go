package comm

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"daskgo/protocol"
)

// Handler serves one RPC op. Its return value is written back as the reply
// (any value protocol.Encode accepts; nil is Python's None) unless the
// request said reply=false. A returned error is sent as distributed's
// "uncaught-error" dict (error_message), which makes the Python caller
// raise, and the connection keeps serving, as in Server._handle_comm.
//
// A handler that turns the connection into a long-lived stream
// (register-client, register-worker, register_nanny) calls req.TakeOver()
// and keeps running for as long as the stream lives, reading with
// req.Conn.Read and writing with req.Conn.Write or a BatchedSend. No reply is
// written for it; when it returns, the server closes the connection. ctx is
// cancelled when the server shuts down.
type Handler func(ctx context.Context, req *Request) (any, error)

// Request is one decoded RPC request: the envelope keys distributed pops in
// Server._handle_comm, and the remaining keyword arguments in Args.
type Request struct {
	Op          string
	Args        *protocol.Map // the request dict without op/reply/close/serializers
	Reply       bool          // default true
	Close       bool          // close the connection after replying; default false
	Serializers any           // passed through, never interpreted
	Conn        *Conn
	Log         zerolog.Logger // carries the peer address
	// Raw is the undecoded request dict of an op in Server.LazyHandlers
	// (Args is then nil; DecodeArgs fills it). The frame is the request's
	// own: a handler may keep views into it.
	Raw []byte

	takenOver bool
	skipReply bool
}

// TakeOver hands the connection to the handler: the server writes no reply
// and stops reading requests from it. See Handler.
func (r *Request) TakeOver() *Conn {
	r.takenOver = true
	return r.Conn
}

// SkipReply tells the server that the handler has already written its
// reply (or replies) on req.Conn itself and that the connection goes on
// serving requests afterwards: distributed's Status.dont_reply, used by
// exchanges such as get_data where the caller acknowledges with "OK".
func (r *Request) SkipReply() { r.skipReply = true }

// parseRequest pops the envelope keys. A request must be a dict with a str
// "op"; reply and close, when present, must be bool (Python only tests
// their truth, but no distributed peer sends anything else).
func parseRequest(v any) (*Request, error) {
	m, ok := v.(*protocol.Map)
	if !ok {
		return nil, fmt.Errorf("%w: expected a dict, got %s", ErrBadRequest, truncate(protocol.String(v)))
	}
	args := &protocol.Map{Entries: append([]protocol.Entry(nil), m.Entries...)}
	req := &Request{Args: args, Reply: true}
	if r, ok := args.Delete("reply"); ok {
		if req.Reply, ok = r.(bool); !ok {
			req.Reply = r != nil
			return req, fmt.Errorf("%w: \"reply\" is %s, not a bool", ErrBadRequest, truncate(protocol.String(r)))
		}
	}
	op, ok := args.Delete("op")
	if !ok {
		return req, fmt.Errorf("%w: message without 'op' key: %s", ErrBadRequest, truncate(protocol.String(v)))
	}
	if req.Op, ok = op.(string); !ok {
		return req, fmt.Errorf("%w: 'op' is %s, not a str", ErrBadRequest, truncate(protocol.String(op)))
	}
	if c, ok := args.Delete("close"); ok {
		if req.Close, ok = c.(bool); !ok {
			return req, fmt.Errorf("%w: \"close\" is %s, not a bool", ErrBadRequest, truncate(protocol.String(c)))
		}
	}
	req.Serializers, _ = args.Delete("serializers")
	return req, nil
}

func truncate(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// ErrorMessage is distributed's error_message(e, status="uncaught-error")
// built from a Go error. The exception is sent as a str, which the Python
// caller's clean_exception turns into Exception(text); there is no traceback.
func ErrorMessage(err error) *protocol.Map {
	text := err.Error()
	return protocol.NewMap(
		"status", "uncaught-error",
		"exception", text,
		"traceback", nil,
		"exception_text", text,
		"traceback_text", "",
	)
}

// AsRemoteError recognises an "uncaught-error" reply; nil otherwise.
func AsRemoteError(reply any) *RemoteError {
	m, ok := reply.(*protocol.Map)
	if !ok || m.Get("status") != "uncaught-error" {
		return nil
	}
	e := &RemoteError{Raw: reply}
	if s, ok := m.Get("exception_text").(string); ok {
		e.ExceptionText = s
	} else if s, ok := m.Get("exception").(string); ok {
		e.ExceptionText = s
	}
	e.TracebackText, _ = m.Get("traceback_text").(string)
	return e
}

// Echo is distributed Server's default "echo" handler: it returns data.
func Echo(_ context.Context, req *Request) (any, error) {
	return req.Args.Get("data"), nil
}
