//go:build !linux

package comm

import (
	"net"
	"time"
)

// setUserTimeout is Linux-only, as in distributed's set_tcp_timeout.
func setUserTimeout(*net.TCPConn, time.Duration) {}
