//go:build !unix

package comm

import "net"

// peerClosed cannot peek portably; a stale connection then fails on use.
func peerClosed(net.Conn) bool { return false }
