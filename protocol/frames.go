package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
)

// Limits bound what a reader accepts from a peer. distributed itself has no
// protocol maximum (lengths are u64), so these are ours: a header beyond
// them closes the connection before anything is allocated for it. A zero
// field means the DefaultLimits value.
type Limits struct {
	MaxFrames       int   // frames per message
	MaxMessageBytes int64 // sum of frame lengths
}

// DefaultLimits accept any message a real workload sends (a task result of
// several GiB arrives through gather) while refusing absurd headers.
var DefaultLimits = Limits{MaxFrames: 1 << 20, MaxMessageBytes: 16 << 30}

func (l Limits) withDefaults() Limits {
	if l.MaxFrames <= 0 {
		l.MaxFrames = DefaultLimits.MaxFrames
	}
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultLimits.MaxMessageBytes
	}
	return l
}

// FrameError is a framing violation, with the header values as evidence.
type FrameError struct {
	Reason string
	Header []uint64
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("protocol: bad frame header: %s (header %v)", e.Reason, e.Header)
}

// readChunk is how much is allocated ahead of the bytes that actually
// arrive, so a peer that declares 1 GiB (or 2^20 frames) and sends 10 bytes
// costs us one chunk, not 1 GiB.
const readChunk = 1 << 20

// ReadFrames reads one message from r: u64 N, u64 nframes, nframes u64
// lengths, then the frames (distributed/comm/tcp.py: TCP.read). N is the size
// of the writer's first gulp, not of the message; it is only sanity-checked.
// A clean EOF before the first byte returns io.EOF; EOF anywhere later
// returns an error wrapping io.ErrUnexpectedEOF. Wrap r in a bufio.Reader:
// small messages take several reads.
func ReadFrames(r io.Reader, lim Limits) ([][]byte, error) {
	return ReadFramesReusing(r, lim, nil)
}

// ReadFramesReusing is ReadFrames that reads a one-frame message (every
// stream batch without blobs) into scratch when it fits, instead of a new
// buffer: Decode copies strings and bin values out of frame 0 and aliases
// only later frames, so a reader that decodes each message before reading
// the next can pass the same scratch every time, and a one-frame message
// costs no allocation of its own. The frames
// returned alias scratch until then.
func ReadFramesReusing(r io.Reader, lim Limits, scratch []byte) ([][]byte, error) {
	lim = lim.withDefaults()
	var hdr [16]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	gulp := binary.LittleEndian.Uint64(hdr[:8])
	n := binary.LittleEndian.Uint64(hdr[8:])
	if n == 0 || n > uint64(lim.MaxFrames) {
		return nil, &FrameError{Reason: fmt.Sprintf("frame count %d outside 1..%d", n, lim.MaxFrames), Header: []uint64{gulp, n}}
	}
	sizes, total, err := readLengths(r, int(n), lim)
	if err != nil {
		return nil, err
	}
	// Python's reader needs N to end on a frame boundary; we only need it to
	// lie inside the message, which every Python writer guarantees.
	if prelude := 8 * (1 + n); gulp < prelude || gulp > prelude+total {
		return nil, &FrameError{Reason: fmt.Sprintf("first-read size %d outside %d..%d", gulp, prelude, prelude+total), Header: []uint64{gulp, n, total}}
	}
	frames := make([][]byte, n)
	if n == 1 && sizes[0] <= uint64(cap(scratch)) {
		frames[0] = scratch[:sizes[0]]
		if _, err := io.ReadFull(r, frames[0]); err != nil {
			return nil, fmt.Errorf("read frame 0 of 1 (%d bytes): %w", sizes[0], unexpectedEOF(err))
		}
		return frames, nil
	}
	for i := 0; i < len(sizes); {
		// Runs of small frames share one allocation and one read: a batched
		// op list with a dozen tiny blob frames costs 1 read, not 12.
		j, run := i, uint64(0)
		for j < len(sizes) && run+sizes[j] <= readChunk {
			run += sizes[j]
			j++
		}
		if j > i {
			if err := readRun(r, frames[i:j], sizes[i:j], int(run)); err != nil {
				return nil, fmt.Errorf("read frames %d..%d of %d (%d bytes): %w", i, j-1, n, run, unexpectedEOF(err))
			}
			i = j
			continue
		}
		f, err := readFrame(r, int(sizes[i]))
		if err != nil {
			return nil, fmt.Errorf("read frame %d of %d (%d bytes): %w", i, n, sizes[i], unexpectedEOF(err))
		}
		frames[i] = f
		i++
	}
	return frames, nil
}

// readLengths reads n u64 frame lengths, allocating as they arrive. The
// scratch buffer is sized to the lengths (at most 512 at a time): it
// escapes to the heap through io.ReadFull, and a fixed 4 KiB array cost
// 4 KiB per message read, most of what a 20k-task map allocated in reads.
func readLengths(r io.Reader, n int, lim Limits) ([]uint64, uint64, error) {
	sizes := make([]uint64, 0, min(n, readChunk/64))
	buf := make([]byte, 8*min(n, 512))
	var total uint64
	for len(sizes) < n {
		k := min(n-len(sizes), 512)
		if _, err := io.ReadFull(r, buf[:8*k]); err != nil {
			return nil, 0, fmt.Errorf("read %d frame lengths: %w", n, unexpectedEOF(err))
		}
		for j := 0; j < k; j++ {
			size := binary.LittleEndian.Uint64(buf[8*j:])
			total += size // cannot overflow: both terms are <= MaxMessageBytes
			if size > uint64(lim.MaxMessageBytes) || total > uint64(lim.MaxMessageBytes) {
				return nil, 0, &FrameError{
					Reason: fmt.Sprintf("frame %d of %d bytes brings the message past the %d-byte limit", len(sizes), size, lim.MaxMessageBytes),
					Header: []uint64{uint64(n), size},
				}
			}
			sizes = append(sizes, size)
		}
	}
	return sizes, total, nil
}

// readRun reads consecutive frames of known sizes into one buffer. Each
// frame is capped so appending to one cannot overwrite the next.
func readRun(r io.Reader, frames [][]byte, sizes []uint64, total int) error {
	buf := make([]byte, total)
	if _, err := io.ReadFull(r, buf); err != nil {
		return err
	}
	off := 0
	for k, s := range sizes {
		frames[k] = buf[off : off+int(s) : off+int(s)]
		off += int(s)
	}
	return nil
}

// readFrame reads a frame of a declared size into a buffer that grows as
// the bytes arrive: by readGrowth at a time, so that a large frame (a
// gathered result of 128 MiB) is copied into its next buffer a seventh of
// its size over all, where doubling copied its whole size again; a peer
// that declares much and sends little still costs at most readGrowth times
// what it sent.
func readFrame(r io.Reader, size int) ([]byte, error) {
	buf := make([]byte, 0, min(size, readChunk))
	for len(buf) < size {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(size, readGrowth*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		want := cap(buf) - len(buf)
		if _, err := io.ReadFull(r, buf[len(buf):len(buf)+want]); err != nil {
			return nil, err
		}
		buf = buf[:len(buf)+want]
	}
	return buf, nil
}

// readGrowth is readFrame's growth factor.
const readGrowth = 8

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// FramesHeader is the prelude for frames: N, nframes, lengths. N covers the
// whole message, which Python's reader accepts (it must end on a frame
// boundary, and the end of the last frame is one).
func FramesHeader(frames [][]byte) []byte {
	hdr := make([]byte, 16+8*len(frames))
	total := uint64(len(hdr))
	for i, f := range frames {
		binary.LittleEndian.PutUint64(hdr[16+8*i:], uint64(len(f)))
		total += uint64(len(f))
	}
	binary.LittleEndian.PutUint64(hdr, total-8)
	binary.LittleEndian.PutUint64(hdr[8:], uint64(len(frames)))
	return hdr
}

// WriteFrames writes one message to w. A message up to coalesceMax is
// copied into one buffer and written with one Write: net.Buffers writes a
// writer without writev (a TLS connection, an *os.File such as the pipe to
// a Python process) buffer by buffer, the header and then each frame, and
// each Write is a system call (over TLS also a record) that can wake the
// reader on the other side; a profile of client.map over tls:// showed that
// as the larger part of what TLS added. A bigger message goes as
// net.Buffers.WriteTo sends it (writev on TCP): its blobs from where they
// lie, never copied.
func WriteFrames(w io.Writer, frames [][]byte) error {
	bufs := FrameBuffers(frames)
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total > coalesceMax || len(bufs) == 1 {
		_, err := bufs.WriteTo(w)
		return err
	}
	bp := coalesceBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	for _, b := range bufs {
		buf = append(buf, b...)
	}
	_, err := w.Write(buf)
	clear(buf) // no message bytes kept in a shared buffer
	*bp = buf[:0]
	coalesceBufs.Put(bp)
	return err
}

// coalesceMax bounds the messages WriteFrames copies into one buffer: past
// it the copy costs more than the extra writes save.
const coalesceMax = 64 << 10

// coalesceBufs holds WriteFrames' buffers, shared by every writer: ten
// thousand idle TLS connections keep none.
var coalesceBufs = sync.Pool{New: func() any { b := make([]byte, 0, coalesceMax); return &b }}

// FrameBuffers is one message as the buffers of a vectored write: the
// header, then the non-empty frames in place.
func FrameBuffers(frames [][]byte) net.Buffers {
	bufs := make(net.Buffers, 0, 1+len(frames))
	bufs = append(bufs, FramesHeader(frames))
	for _, f := range frames {
		if len(f) > 0 {
			bufs = append(bufs, f)
		}
	}
	return bufs
}
