//go:build !linux

package comm

import "net"

// rawIO is Linux only (rawio_linux.go); elsewhere a Conn uses net.Conn.
type rawIO struct{}

func newRawIO(net.Conn) *rawIO { return nil }

func (*rawIO) Read([]byte) (int, error)             { panic("unreachable") }
func (*rawIO) readBorrowing() (*[]byte, int, error) { panic("unreachable") }
func (*rawIO) writeBuffers(net.Buffers) error       { panic("unreachable") }

func (*rawIO) tryWriteBuffers(net.Buffers) (int64, error) { panic("unreachable") }
