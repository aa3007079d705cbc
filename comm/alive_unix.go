//go:build unix

package comm

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether an idle TCP connection has been closed by the
// peer (or has unexpected unread bytes), without blocking and without
// consuming anything: recv(MSG_PEEK|MSG_DONTWAIT). distributed notices the
// same through tornado's close callback on idle streams.
func peerClosed(nc net.Conn) bool {
	// Over TLS a byte waiting is no sign of trouble (a TLS 1.3 server
	// sends session tickets after the handshake): only EOF or an error is.
	tlsc, isTLS := nc.(*tls.Conn)
	if isTLS {
		nc = tlsc.NetConn()
	}
	if r, ok := nc.(*rawTCPConn); ok {
		nc = r.TCPConn
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var buf [1]byte
	cerr := raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK):
			closed = false
		case err != nil, n == 0: // error or EOF
			closed = true
		case n > 0: // bytes nobody asked for, unless a TLS record
			closed = !isTLS
		}
		return true // never wait for readiness
	})
	return closed || cerr != nil
}
