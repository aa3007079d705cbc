package comm

import (
	"net"
	"syscall"
	"time"
)

// tcpUserTimeout is TCP_USER_TIMEOUT from <netinet/tcp.h>; the syscall
// package does not export it and x/sys is not a dependency of ours.
const tcpUserTimeout = 0x12

// setUserTimeout makes writes that stay unacknowledged for d fail the
// connection (distributed sets the same on Linux).
func setUserTimeout(tc *net.TCPConn, d time.Duration) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(d/time.Millisecond))
	})
}
