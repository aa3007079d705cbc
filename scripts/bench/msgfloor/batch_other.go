//go:build !linux

package main

import (
	"errors"
	"net"
	"time"
)

// serveBatched needs epoll (batch_linux.go).
func (f *floor) serveBatched(conns []net.Conn, every time.Duration) error {
	return errors.New("serve --batch needs Linux (epoll)")
}
