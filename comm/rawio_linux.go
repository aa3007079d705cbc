//go:build linux

package comm

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawIO reads and writes a TCP connection with raw system calls, through
// syscall.RawConn: the socket is non-blocking, so read and writev return at
// once (EAGAIN parks the goroutine in the netpoller as net.Conn would), and
// a raw call skips the runtime's entersyscall/exitsyscall. Those matter on
// loopback with many small messages: a writev that delivers to a local
// peer takes tens of microseconds, long enough for sysmon to hand the P to
// another thread and for that thread to be woken and parked again; a
// profile of a 20k-task client.map showed most of the scheduler's CPU in
// such context switches (futex, sysmon's usleep).
//
// Deadlines and Close work as for net.Conn: RawConn's wait honours them.
type rawIO struct {
	rc  syscall.RawConn
	iov []syscall.Iovec // scratch for writev, guarded by the Conn's write mutex
}

// newRawIO returns nil where nc is not a TCP connection (net.Pipe in
// tests); the Conn then uses nc itself.
func newRawIO(nc net.Conn) *rawIO {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &rawIO{rc: rc}
}

// Read is io.Reader: one read(2) of what is there, waiting for data.
func (r *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n uintptr
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			if errno != syscall.EINTR {
				return errno != syscall.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}

// writeBuffers writes every byte of bufs with writev(2), as many calls as
// the socket needs.
func (r *rawIO) writeBuffers(bufs net.Buffers) error {
	r.iov = r.iov[:0]
	for _, b := range bufs {
		if len(b) > 0 { // an empty one has no &b[0]
			r.iov = append(r.iov, syscall.Iovec{Base: &b[0], Len: uint64(len(b))})
		}
	}
	iov := r.iov
	var werr error
	err := r.rc.Write(func(fd uintptr) bool {
		for len(iov) > 0 {
			n := min(len(iov), 1024) // IOV_MAX
			done, _, errno := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(n))
			switch errno {
			case 0:
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until writable, then go on from here
			default:
				werr = errno
				return true
			}
			iov = advance(iov, uint64(done))
		}
		return true
	})
	clear(r.iov) // drop the references to the frames
	if err != nil {
		return err
	}
	return werr
}

// advance drops the first n written bytes from iov.
func advance(iov []syscall.Iovec, n uint64) []syscall.Iovec {
	for len(iov) > 0 && n >= iov[0].Len {
		n -= iov[0].Len
		iov = iov[1:]
	}
	if n > 0 {
		iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), n))
		iov[0].Len -= n
	}
	return iov
}
