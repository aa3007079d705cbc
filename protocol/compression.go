package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/pierrec/lz4/v4"
)

// Compression follows distributed/protocol/compression.py. Only lz4 is
// implemented: it is what "auto" resolves to wherever the lz4 package is
// installed. A codec name the scheduler cannot produce is rejected when the
// configuration is validated, never at encode time.
const (
	compressMinSize    = 10_000
	compressMaxSize    = 1 << 31
	compressSampleSize = 10_000
	compressSamples    = 5
	compressMinRatio   = 0.7
)

// SupportedCompression reports whether codec can be negotiated by Go.
func SupportedCompression(codec string) bool { return codec == "" || codec == "lz4" }

// MaybeCompress mirrors distributed's maybe_compress: frames outside
// 10 kB..2 GiB, or that do not shrink to 70 % (first on a sample, then as a
// whole), are returned unchanged with an empty codec name. Samples are taken
// at evenly spaced offsets instead of random ones, so output is deterministic.
func MaybeCompress(frame []byte, codec string) (string, []byte) {
	if codec != "lz4" || len(frame) < compressMinSize || len(frame) > compressMaxSize {
		return "", frame
	}
	sample := byteSample(frame)
	if c, err := lz4Compress(sample); err != nil || float64(len(c)) > compressMinRatio*float64(len(sample)) {
		return "", frame
	}
	c, err := lz4Compress(frame)
	if err != nil || float64(len(c)) > compressMinRatio*float64(len(frame)) {
		return "", frame
	}
	return "lz4", c
}

func byteSample(b []byte) []byte {
	maxStart := len(b) - compressSampleSize
	out := make([]byte, 0, compressSampleSize*compressSamples)
	for i := 0; i < compressSamples; i++ {
		start := maxStart * i / (compressSamples - 1)
		out = append(out, b[start:start+compressSampleSize]...)
	}
	return out
}

// lz4Compress produces python-lz4's lz4.block.compress layout: the
// uncompressed size as a 4-byte little-endian prefix, then one raw block.
func lz4Compress(src []byte) ([]byte, error) {
	dst := make([]byte, 4+lz4.CompressBlockBound(len(src)))
	binary.LittleEndian.PutUint32(dst, uint32(len(src)))
	var c lz4.Compressor
	n, err := c.CompressBlock(src, dst[4:])
	if err != nil {
		return nil, fmt.Errorf("lz4 compress %d bytes: %w", len(src), err)
	}
	if n == 0 && len(src) > 0 {
		return nil, fmt.Errorf("lz4 compress %d bytes: incompressible", len(src))
	}
	return dst[:4+n], nil
}

// Decompress undoes one sub-frame's codec. maxSize bounds the declared
// uncompressed size, so a forged prefix cannot make us allocate gigabytes.
func Decompress(codec string, frame []byte, maxSize int) ([]byte, error) {
	switch codec {
	case "":
		return frame, nil
	case "lz4":
		if len(frame) < 4 {
			return nil, fmt.Errorf("lz4 frame of %d bytes has no size prefix", len(frame))
		}
		size := int(binary.LittleEndian.Uint32(frame))
		if size > maxSize {
			return nil, fmt.Errorf("lz4 frame declares %d uncompressed bytes, limit %d", size, maxSize)
		}
		out := make([]byte, size)
		n, err := lz4.UncompressBlock(frame[4:], out)
		if err != nil {
			return nil, fmt.Errorf("lz4 decompress: %w", err)
		}
		if n != size {
			return nil, fmt.Errorf("lz4 frame decompressed to %d bytes, prefix said %d", n, size)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("compression %q is not supported by dask-go-scheduler (only lz4)", codec)
	}
}

// PayloadFrames returns the blob's sub-frames decompressed according to its
// sub-header's "compression" list (distributed/protocol/compression.py:
// decompress), for the few places where the scheduler must read a payload
// itself. Relayed blobs are never rewritten. Frames without a codec are
// returned as they are, not copied. Python zips the list with the frames and
// silently drops extras; a list of the wrong length is an error here.
func (b *Blob) PayloadFrames(maxSize int) ([][]byte, error) {
	h, err := b.SubHeader()
	if err != nil {
		return nil, err
	}
	codecs, err := compressionList(h, len(b.Frames))
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(b.Frames))
	for i, f := range b.Frames {
		codec, _ := codecs[i].(string)
		if out[i], err = Decompress(codec, f, maxSize); err != nil {
			return nil, fmt.Errorf("sub-frame %d: %w", i, err)
		}
	}
	return out, nil
}

// PickledObj returns the pickle bytes of a Pickled blob.
func (b *Blob) PickledObj() ([]byte, error) {
	if b.Header == nil {
		return b.pickle(), nil
	}
	h, err := b.SubHeader()
	if err != nil {
		return nil, err
	}
	p, ok := h.Get("pickled-obj").([]byte)
	if !ok {
		return nil, fmt.Errorf(`pickled sub-header lacks "pickled-obj" bytes`)
	}
	return p, nil
}
