// Command rpccheck exercises package comm as the calling side against a
// real Python distributed Server (tests/test_wire.py starts one): it dials,
// handshakes, makes RPCs through a Pool, runs a get_data-style exchange, and
// prints everything it decoded as one JSON object on stdout.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rpccheck tcp://HOST:PORT")
		os.Exit(2)
	}
	out, err := check(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "rpccheck:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "rpccheck:", err)
		os.Exit(1)
	}
}

func check(addr string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[string]any{}

	c, err := comm.Dial(ctx, addr, nil)
	if err != nil {
		return nil, err
	}
	hs := c.PeerHandshake()
	comp, pickle := c.Negotiated()
	out["handshake"] = map[string]any{"python": hs.Python, "pickle-protocol": hs.PickleProtocol,
		"compression": hs.Compression, "negotiated-pickle": pickle, "negotiated-compression": comp}
	reply, err := c.Call(ctx, protocol.NewMap("op", "identity", "reply", true))
	if err != nil {
		return nil, err
	}
	out["identity"] = toJSON(reply)
	if err := c.Write(protocol.NewMap("op", "close", "reply", false)); err != nil {
		return nil, err
	}
	c.Close()

	pool := comm.NewPool(comm.PoolConfig{Options: &comm.Options{PickleProtocol: 4}})
	defer pool.Close()
	calls := []struct {
		name string
		msg  *protocol.Map
	}{
		{"ping", protocol.NewMap("op", "ping", "payload", []byte{0, 1, 255})},
		{"echo", protocol.NewMap("op", "echo", "data", []any{"x", int64(1), 2.5})},
		{"unknown", protocol.NewMap("op", "no-such-op")},
	}
	for _, call := range calls {
		reply, err := pool.Call(ctx, addr, call.msg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", call.name, err)
		}
		out[call.name] = toJSON(reply)
	}
	_, err = pool.Call(ctx, addr, protocol.NewMap("op", "fail"))
	var rerr *comm.RemoteError
	if !errors.As(err, &rerr) {
		return nil, fmt.Errorf("fail: got %v, want a remote error", err)
	}
	out["fail"] = rerr.ExceptionText

	err = pool.Do(ctx, addr, func(c *comm.Conn) error {
		reply, err := c.Call(ctx, protocol.NewMap("op", "get_data", "keys", []any{"k"}, "who", nil))
		if err != nil {
			return err
		}
		out["get_data"] = toJSON(reply)
		return c.Write("OK")
	})
	if err != nil {
		return nil, fmt.Errorf("get_data: %w", err)
	}
	if reply, err = pool.Call(ctx, addr, protocol.NewMap("op", "acks")); err != nil {
		return nil, fmt.Errorf("acks: %w", err)
	}
	out["acks"] = toJSON(reply)
	out["pool_open"] = pool.Open()
	return out, nil
}

// toJSON renders a decoded value for the Python test: maps become objects
// (non-str keys as their repr, e.g. `("tk", 1)`), bin becomes
// {"$bytes": hex}, blobs {"$blob": …}.
func toJSON(v any) any {
	switch x := v.(type) {
	case *protocol.Map:
		m := map[string]any{}
		for _, e := range x.Entries {
			k, ok := e.Key.(string)
			if !ok {
				k = protocol.String(e.Key)
			}
			m[k] = toJSON(e.Value)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toJSON(e)
		}
		return out
	case []byte:
		return map[string]any{"$bytes": hex.EncodeToString(x)}
	case *protocol.Blob:
		return map[string]any{"$blob": x.Pickled, "frames": len(x.Frames)}
	case protocol.Set:
		return map[string]any{"$set": toJSON([]any(x))}
	default:
		return x
	}
}
