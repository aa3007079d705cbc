// Package protocol is distributed's wire format, byte for byte: frames on
// the stream, msgpack in frame 0, and the Serialize/Pickled envelopes whose
// payloads follow in later frames.
//
//	bytes ──ReadFrames──▶ [][]byte ──Decode──▶ value tree (*Map, []any, Key, *Blob, ...)
//	bytes ◀─WriteFrames── [][]byte ◀─Encode─── value tree
//
// Invariants:
//   - Go never unpickles user data. A *Blob keeps the sub-header and
//     sub-frames it arrived with; re-encoding it only renumbers its offset.
//   - Keys are held as their canonical msgpack bytes (Key), so a key is
//     re-emitted with exactly the types it came in with.
//   - bin stays bin ([]byte) and str stays str (string).
//   - Decode then Encode reproduces Python's frames byte for byte; the golden
//     vectors in testdata/golden (recorded from distributed by
//     tests/golden/make_vectors.py) prove it, and tests/test_golden.py proves
//     distributed reads back what Go writes.
//   - Nothing is allocated for a frame beyond what has arrived or what
//     Limits allow: a header claiming 2^60 bytes fails before any buffer
//     exists. Peer input never panics: framing errors are *FrameError,
//     malformed messages wrap ErrDecode.
//   - Compression (lz4 in python-lz4's block layout) and shard splitting
//     (NewSerialized) apply only to blobs Go makes itself; relayed blobs stay
//     as they are. PayloadFrames/MergeSplitFrames read Python-made payloads
//     when the scheduler must look inside.
//
// The Python code it mirrors: distributed/comm/tcp.py (framing: TCP.read,
// TCP.write), distributed/protocol/core.py (dumps, loads, msgpack_encode_default,
// msgpack_decode_default) and distributed/protocol/serialize.py (Serialize,
// Pickled, merge_and_deserialize).
package protocol
