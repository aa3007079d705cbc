package comm

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"daskgo/protocol"
)

func TestNegotiate(t *testing.T) {
	cases := []struct {
		local, remote Handshake
		comp          string
		pickle        int
	}{
		{Handshake{"", DefaultPython, 5}, Handshake{"", DefaultPython, 5}, "", 5},
		{Handshake{"lz4", DefaultPython, 5}, Handshake{"lz4", DefaultPython, 4}, "lz4", 4},
		{Handshake{"lz4", DefaultPython, 4}, Handshake{"", DefaultPython, 5}, "", 4},
		{Handshake{"lz4", DefaultPython, 5}, Handshake{"zstd", DefaultPython, 5}, "", 5},
	}
	for _, tc := range cases {
		comp, pickle := negotiate(tc.local, tc.remote)
		if comp != tc.comp || pickle != tc.pickle {
			t.Errorf("negotiate(%+v, %+v) = %q, %d; want %q, %d", tc.local, tc.remote, comp, pickle, tc.comp, tc.pickle)
		}
	}
}

// The handshake bytes match those of distributed/comm/tcp.py's handshake
// (Comm.handshake_info), as captured from a stock 3.11.2 interpreter; we
// announce 3.11.7.
func TestHandshakeWireBytes(t *testing.T) {
	frames, err := protocol.Encode(Handshake{Python: [3]int{3, 11, 2}, PickleProtocol: 5}.message(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := protocol.WriteFrames(&buf, frames); err != nil {
		t.Fatal(err)
	}
	want := "3a00000000000000" + "0100000000000000" + "2a00000000000000" +
		"83ab" + hex.EncodeToString([]byte("compression")) + "c0" +
		"a6" + hex.EncodeToString([]byte("python")) + "93030b02" +
		"af" + hex.EncodeToString([]byte("pickle-protocol")) + "05"
	if got := hex.EncodeToString(buf.Bytes()); got != want {
		t.Fatalf("handshake bytes\n got %s\nwant %s", got, want)
	}
}

func TestHandshakeOverPipe(t *testing.T) {
	a, b := pipePair(t, &Options{PickleProtocol: 4}, nil)
	if got := b.PeerHandshake(); got.PickleProtocol != 4 || got.Python != DefaultPython || got.Compression != "" {
		t.Fatalf("b saw peer handshake %+v", got)
	}
	for _, c := range []*Conn{a, b} {
		if comp, pickle := c.Negotiated(); comp != "" || pickle != 4 {
			t.Fatalf("negotiated %q, %d; want none, 4", comp, pickle)
		}
	}
}

func TestHandshakeRejects(t *testing.T) {
	cases := map[string]struct {
		msg  any
		want string
	}{
		"missing pickle-protocol": {protocol.NewMap("compression", nil, "python", []any{int64(3), int64(11), int64(7)}), "Your Dask versions may not be in sync"},
		"not a dict":              {"hello", "not a dict"},
		"pickle-protocol a str":   {protocol.NewMap("compression", nil, "pickle-protocol", "5"), "not a small int"},
		"compression an int":      {protocol.NewMap("compression", int64(1), "pickle-protocol", int64(5)), "not a str or None"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x, y := net.Pipe()
			defer y.Close()
			c := NewConn(x, nil)
			go func() {
				_, _ = protocol.ReadFrames(y, protocol.DefaultLimits) // our handshake
				frames, _ := protocol.Encode(tc.msg, nil)
				_ = protocol.WriteFrames(y, frames)
			}()
			err := c.Handshake(context.Background())
			if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want ErrHandshake mentioning %q", err, tc.want)
			}
			if !c.Closed() {
				t.Fatal("connection left open after a failed handshake")
			}
		})
	}
}

func TestConnRoundTripAndClose(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	msg := protocol.NewMap("op", "echo", "data", []byte{1, 2, 3}, "k", []any{"x", int64(1)})
	go func() { _ = a.Write(msg) }()
	v, err := b.Read()
	if err != nil {
		t.Fatal(err)
	}
	if protocol.String(v) != protocol.String(msg) {
		t.Fatalf("read %s, wrote %s", protocol.String(v), protocol.String(msg))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := a.Write("x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if _, err := b.Read(); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after peer close: %v, want ErrClosed", err)
	}
}

// A peer that hangs up inside a message is a truncated frame, not a clean close.
func TestConnTruncatedFrame(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	go func() {
		_, _ = a.nc.Write(header(1, 100))
		_, _ = a.nc.Write([]byte("only ten b"))
		a.Close()
	}()
	_, err := b.Read()
	if err == nil || errors.Is(err, ErrClosed) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v; want unexpected EOF", err)
	}
}

func TestConnLimits(t *testing.T) {
	a, b := pipePair(t, nil, &Options{Limits: protocol.Limits{MaxFrames: 4, MaxMessageBytes: 1000}})
	go func() { _ = a.WriteFrames([][]byte{make([]byte, 2000)}) }()
	_, err := b.ReadFrames()
	var fe *protocol.FrameError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v; want a FrameError", err)
	}
}

func TestCallRemoteError(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	go func() {
		if _, err := b.Read(); err == nil {
			_ = b.Write(ErrorMessage(errors.New("nope")))
		}
	}()
	_, err := a.Call(context.Background(), protocol.NewMap("op", "thing"))
	var rerr *RemoteError
	if !errors.As(err, &rerr) || rerr.Op != "thing" || rerr.ExceptionText != "nope" {
		t.Fatalf("err = %v; want RemoteError for op thing", err)
	}
}

func TestCallContextCancel(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = b.Read() // never reply; cancel instead
		cancel()
	}()
	_, err := a.Call(ctx, protocol.NewMap("op", "slow"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	if !a.Closed() {
		t.Fatal("a connection aborted mid-call must be closed")
	}
}

func TestParseAddressAndContact(t *testing.T) {
	if _, _, err := ParseAddress("ucx://x:1"); !errors.Is(err, ErrUnsupportedScheme) {
		t.Fatalf("ucx: %v", err)
	}
	if s, hp, err := ParseAddress("127.0.0.1:8786"); err != nil || s != "tcp" || hp != "127.0.0.1:8786" {
		t.Fatalf("bare address: %s %s %v", s, hp, err)
	}
	if got := ContactAddress("tcp://127.0.0.1:9"); got != "tcp://127.0.0.1:9" {
		t.Fatalf("specific address changed: %s", got)
	}
	if got := ContactAddress("tcp://[::]:9"); strings.Contains(got, "[::]") || !strings.HasSuffix(got, ":9") {
		t.Fatalf("unspecified address not replaced: %s", got)
	}
}
