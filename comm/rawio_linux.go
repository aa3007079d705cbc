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
//
// The functions handed to RawConn are made once per connection (readFn,
// writeFn) and take their arguments from fields: a closure per call would
// be an allocation per read and per write, one of the per-message costs a
// 20k-task client.map's heap profile showed.
type rawIO struct {
	rc syscall.RawConn

	// the read in progress: one reader at a time (the Conn's reading goroutine)
	rbuf     []byte
	rbp      *[]byte // readBorrowing's buffer, from readBufPool
	rn       uintptr
	rerrno   syscall.Errno
	readFn   func(fd uintptr) bool
	borrowFn func(fd uintptr) bool
	writeFn  func(fd uintptr) bool

	// the write in progress, guarded by the Conn's write mutex
	iov   []syscall.Iovec // scratch for writev
	wiov  []syscall.Iovec // what is left of it
	wleft uint64
	wwait bool // wait until writable rather than stop at EAGAIN
	werr  error
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
	r := &rawIO{rc: rc}
	r.readFn, r.borrowFn, r.writeFn = r.readOnce, r.readIntoBorrowed, r.writeSome
	return r
}

// Read is io.Reader: one read(2) of what is there, waiting for data.
func (r *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.rbuf = p
	err := r.rc.Read(r.readFn)
	n, errno := r.rn, r.rerrno
	r.rbuf = nil
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

// readOnce is the RawConn read function: false (wait for data) on EAGAIN.
func (r *rawIO) readOnce(fd uintptr) bool {
	for {
		r.rn, _, r.rerrno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.rbuf[0])), uintptr(len(r.rbuf)))
		if r.rerrno != syscall.EINTR {
			return r.rerrno != syscall.EAGAIN
		}
	}
}

// readBorrowing reads what the socket has into a buffer borrowed from
// readBufPool, which the caller gives back; while nothing has arrived the
// buffer is back in the pool (readIntoBorrowed), so a parked reader holds
// none.
func (r *rawIO) readBorrowing() (*[]byte, int, error) {
	err := r.rc.Read(r.borrowFn)
	bp, n, errno := r.rbp, r.rn, r.rerrno
	r.rbp = nil
	if err == nil && errno == 0 && n > 0 {
		return bp, int(n), nil
	}
	if bp != nil {
		readBufPool.Put(bp)
	}
	switch {
	case err != nil:
		return nil, 0, err
	case errno != 0:
		return nil, 0, errno
	}
	return nil, 0, io.EOF
}

// readIntoBorrowed is readBorrowing's RawConn read function: on EAGAIN the
// buffer goes back to the pool before the runtime parks the goroutine.
func (r *rawIO) readIntoBorrowed(fd uintptr) bool {
	if r.rbp == nil {
		r.rbp = readBufPool.Get().(*[]byte)
	}
	buf := *r.rbp
	for {
		r.rn, _, r.rerrno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if r.rerrno != syscall.EINTR {
			break
		}
	}
	if r.rerrno == syscall.EAGAIN {
		readBufPool.Put(r.rbp)
		r.rbp = nil
		return false
	}
	return true
}

// writeBuffers writes every byte of bufs with writev(2), as many calls as
// the socket needs.
func (r *rawIO) writeBuffers(bufs net.Buffers) error {
	_, err := r.writev(bufs, true)
	return err
}

// tryWriteBuffers writes what the socket takes now without waiting for it
// to become writable: n is how many bytes of bufs went out (all of them
// unless the send buffer filled up).
func (r *rawIO) tryWriteBuffers(bufs net.Buffers) (n int64, err error) {
	return r.writev(bufs, false)
}

// writev writes bufs with writev(2); with wait, until every byte is out,
// else until the socket would block.
func (r *rawIO) writev(bufs net.Buffers, wait bool) (written int64, _ error) {
	r.iov = r.iov[:0]
	var total uint64
	for _, b := range bufs {
		if len(b) > 0 { // an empty one has no &b[0]
			r.iov = append(r.iov, syscall.Iovec{Base: &b[0], Len: uint64(len(b))})
			total += uint64(len(b))
		}
	}
	r.wiov, r.wleft, r.wwait, r.werr = r.iov, total, wait, nil
	err := r.rc.Write(r.writeFn)
	clear(r.iov) // drop the references to the frames
	r.wiov = nil
	written = int64(total - r.wleft)
	if err != nil {
		return written, err
	}
	return written, r.werr
}

// writeSome is the RawConn write function: writev until done, an error,
// or EAGAIN (false: wait until writable, when wwait).
func (r *rawIO) writeSome(fd uintptr) bool {
	for len(r.wiov) > 0 {
		n := min(len(r.wiov), 1024) // IOV_MAX
		done, _, errno := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&r.wiov[0])), uintptr(n))
		switch errno {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return !r.wwait // wait until writable, then go on from here
		default:
			r.werr = errno
			return true
		}
		r.wiov = advance(r.wiov, uint64(done))
		r.wleft -= uint64(done)
	}
	return true
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
