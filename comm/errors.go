package comm

import (
	"errors"
	"fmt"
)

// Sentinels callers branch on. Errors returned by this package wrap them with
// context ("read from tcp://…: comm: closed").
var (
	// ErrClosed: the connection is closed, by us or by the peer between messages.
	ErrClosed = errors.New("comm: closed")
	// ErrHandshake: the peer's handshake was missing, malformed or incompatible.
	ErrHandshake = errors.New("comm: bad handshake")
	// ErrBadRequest: a readable message that is not a valid RPC request.
	ErrBadRequest = errors.New("comm: bad request")
	// ErrServerClosed is returned by Server.Serve after Shutdown, like net/http.
	ErrServerClosed = errors.New("comm: server closed")
	// ErrPoolClosed is returned by Pool methods after Close.
	ErrPoolClosed = errors.New("comm: pool closed")
	// ErrUnsupportedScheme: an address whose scheme has no Transport.
	ErrUnsupportedScheme = errors.New("comm: unsupported address scheme")
)

// RemoteError is an {"status": "uncaught-error", ...} reply, which Python's
// send_recv turns into a raised exception (distributed/core.py:
// error_message, clean_exception). Exception is the exception's text when
// the peer sent a string; a pickled exception is kept opaque in Raw.
type RemoteError struct {
	Op            string
	ExceptionText string
	TracebackText string
	Raw           any // the whole reply, as decoded
}

func (e *RemoteError) Error() string {
	if e.Op != "" {
		return fmt.Sprintf("remote error in op %q: %s", e.Op, e.ExceptionText)
	}
	return "remote error: " + e.ExceptionText
}
