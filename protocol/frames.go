package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
)

// Limits bound what a reader accepts from a peer. distributed itself has no
// protocol maximum (lengths are u64), so these are ours: a header beyond
// them closes the connection before anything is allocated for it.
type Limits struct {
	MaxFrames       int   // frames per message
	MaxMessageBytes int64 // sum of frame lengths
}

// DefaultLimits accept any message a real workload sends (a task result of
// several GiB arrives through gather) while refusing absurd headers.
var DefaultLimits = Limits{MaxFrames: 1 << 20, MaxMessageBytes: 16 << 30}

// FrameError is a framing violation, with the header values as evidence.
type FrameError struct {
	Reason string
	Header []uint64
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("protocol: bad frame header: %s (header %v)", e.Reason, e.Header)
}

// readChunk is how much of a frame is allocated ahead of the bytes that
// actually arrive, so a peer that declares 1 GiB and sends 10 bytes costs
// us one chunk, not 1 GiB.
const readChunk = 1 << 20

// ReadFrames reads one message from r: u64 N, u64 nframes, nframes u64
// lengths, then the frames (distributed/comm/tcp.py: TCP.read). N is the size
// of the writer's first gulp, not of the message; it is only sanity-checked.
func ReadFrames(r io.Reader, lim Limits) ([][]byte, error) {
	var hdr [16]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	gulp := binary.LittleEndian.Uint64(hdr[:8])
	n := binary.LittleEndian.Uint64(hdr[8:])
	if n == 0 || n > uint64(lim.MaxFrames) {
		return nil, &FrameError{Reason: fmt.Sprintf("frame count %d outside 1..%d", n, lim.MaxFrames), Header: []uint64{gulp, n}}
	}
	lens := make([]byte, 8*n)
	if _, err := io.ReadFull(r, lens); err != nil {
		return nil, fmt.Errorf("read %d frame lengths: %w", n, unexpectedEOF(err))
	}
	var total uint64
	sizes := make([]uint64, n)
	for i := range sizes {
		sizes[i] = binary.LittleEndian.Uint64(lens[8*i:])
		total += sizes[i]
		if sizes[i] > uint64(lim.MaxMessageBytes) || total > uint64(lim.MaxMessageBytes) {
			return nil, &FrameError{Reason: fmt.Sprintf("frame %d of %d bytes exceeds the %d-byte message limit", i, sizes[i], lim.MaxMessageBytes), Header: []uint64{gulp, n, sizes[i]}}
		}
	}
	if prelude := 8 * (1 + n); gulp < prelude || gulp > prelude+total {
		return nil, &FrameError{Reason: fmt.Sprintf("first-read size %d outside %d..%d", gulp, prelude, prelude+total), Header: []uint64{gulp, n, total}}
	}
	frames := make([][]byte, n)
	for i, size := range sizes {
		f, err := readFrame(r, int(size))
		if err != nil {
			return nil, fmt.Errorf("read frame %d of %d (%d bytes): %w", i, n, size, unexpectedEOF(err))
		}
		frames[i] = f
	}
	return frames, nil
}

func readFrame(r io.Reader, size int) ([]byte, error) {
	if size <= readChunk {
		buf := make([]byte, size)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf := make([]byte, 0, readChunk)
	for len(buf) < size {
		want := min(size-len(buf), readChunk)
		if cap(buf)-len(buf) < want {
			grown := make([]byte, len(buf), min(size, 2*cap(buf)+want))
			copy(grown, buf)
			buf = grown
		}
		if _, err := io.ReadFull(r, buf[len(buf):len(buf)+want]); err != nil {
			return nil, err
		}
		buf = buf[:len(buf)+want]
	}
	return buf, nil
}

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

// WriteFrames writes one message with a single vectored write (writev on
// TCP), so large blobs are sent from where they lie, never copied.
func WriteFrames(w io.Writer, frames [][]byte) error {
	bufs := make(net.Buffers, 0, 1+len(frames))
	bufs = append(bufs, FramesHeader(frames))
	for _, f := range frames {
		if len(f) > 0 {
			bufs = append(bufs, f)
		}
	}
	_, err := bufs.WriteTo(w)
	return err
}
