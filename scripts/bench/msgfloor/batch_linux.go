//go:build linux

package main

import (
	"fmt"
	"net"
	"syscall"
	"time"
)

// serveBatched is the floor of a different design (serve --batch W): the
// connections leave the Go runtime's poller (each fd is duplicated, the
// net.Conn closed, so the runtime's epoll no longer wakes for them) and
// one goroutine polls them all every W with an epoll set of its own:
// a wake-up per W instead of one per message, then a read per ready
// connection and a write per reply, inline. It answers whether coalescing
// idle connections' wake-ups can bring the idle heartbeat phase under
// what one wake-up per heartbeat costs (0.5 % of a core at 1,000 workers
// is the target).
func (f *floor) serveBatched(conns []net.Conn, every time.Duration) error {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	defer syscall.Close(ep)
	fds := make([]int, len(conns))
	byFd := map[int]int{}
	for i, c := range conns {
		fd, err := dupRaw(c)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		c.Close() // the runtime's registration goes with it; fd keeps the socket
		fds[i], byFd[fd] = fd, i
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)}
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	split := make([]*splitter, len(conns))
	seq := make([]int, len(conns))
	for i := range split {
		split[i] = newSplitter()
	}
	f.raw = fds
	buf := make([]byte, 64<<10)
	events := make([]syscall.EpollEvent, 256)
	open := len(conns)
	for open > 0 {
		time.Sleep(every)
		for {
			n, err := syscall.EpollWait(ep, events, 0)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return fmt.Errorf("epoll_wait: %w", err)
			}
			for _, ev := range events[:n] {
				fd := int(ev.Fd)
				i := byFd[fd]
				for {
					m, rerr := syscall.Read(fd, buf)
					if m > 0 {
						f.meter.start()
						f.reads.Add(1)
						done, serr := split[i].feed(buf[:m])
						if serr != nil {
							return fmt.Errorf("connection %d: %w", i, serr)
						}
						for range done {
							if seq[i] >= len(f.byConn[i]) {
								return fmt.Errorf("connection %d: message %d beyond the script's %d", i, seq[i], len(f.byConn[i]))
							}
							f.in.Add(1)
							f.replyRaw(f.byConn[i][seq[i]])
							seq[i]++
						}
						continue
					}
					if rerr == syscall.EAGAIN {
						break
					}
					if rerr == syscall.EINTR {
						continue
					}
					// EOF or an error: the connection has ended
					_ = syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, fd, nil)
					syscall.Close(fd)
					open--
					break
				}
			}
			if n < len(events) {
				break
			}
		}
	}
	f.meter.stop()
	return nil
}

// replyRaw writes what the recorded scheduler wrote after reading e, on the
// raw fds (a reply this small always fits the socket's buffer; EAGAIN is
// waited out).
func (f *floor) replyRaw(e *Event) {
	for _, r := range e.Replies {
		msg := f.msgs[r[1]]
		for len(msg) > 0 {
			n, err := syscall.Write(f.raw[r[0]], msg)
			if err == syscall.EAGAIN || err == syscall.EINTR {
				time.Sleep(time.Millisecond)
				continue
			}
			if err != nil {
				f.failed.Add(1)
				break
			}
			msg = msg[n:]
		}
		f.writes.Add(1)
	}
}

// dupRaw duplicates a TCP connection's fd (non-blocking, as the runtime
// set it: the flag belongs to the shared file description).
func dupRaw(c net.Conn) (int, error) {
	sc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var fd int
	var derr error
	if err := sc.Control(func(raw uintptr) { fd, derr = syscall.Dup(int(raw)) }); err != nil {
		return 0, err
	}
	return fd, derr
}
