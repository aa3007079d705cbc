package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// outboxDigest hashes everything the engine decided during a run
// (Config.Digest): every Outbox's messages to workers and clients (each
// compute-task names its worker, so the hash covers placement), helper
// requests and log lines, in Handle order, then the final transition log
// with its placement reasons. Two engines that give the same digest on a
// run behaved identically on it: the check that an optimization of the
// engine changed nothing (scripts/sim/results/engine-throughput.md). It
// runs outside the engine's CPU clock.
type outboxDigest struct {
	h   hash.Hash
	buf []byte
	err error
}

func newOutboxDigest() *outboxDigest { return &outboxDigest{h: sha256.New()} }

func (d *outboxDigest) str(s string) {
	d.buf = binary.AppendUvarint(d.buf[:0], uint64(len(s)))
	d.h.Write(d.buf)
	d.h.Write([]byte(s))
}

// msgs adds a Handle's messages by peer name: the engine's order of first
// writes is not part of what the digest compares.
func (d *outboxDigest) msgs(list scheduler.Peers) {
	for _, p := range list.Sorted() {
		d.str(p.Peer)
		for _, m := range p.Msgs {
			frames, err := protocol.Encode(m, nil)
			if err != nil && d.err == nil {
				d.err = fmt.Errorf("digest: message to %s: %w", p.Peer, err)
			}
			for _, f := range frames {
				d.str(string(f))
			}
		}
	}
}

// outbox adds one Handle's outbox.
func (d *outboxDigest) outbox(out *scheduler.Outbox) {
	d.str("handle")
	d.msgs(out.Workers)
	d.str("clients")
	d.msgs(out.Clients)
	for _, r := range out.Helper {
		d.str(fmt.Sprintf("helper %d %s %v", r.ID, r.Client, r.Keys))
	}
	for _, l := range out.Logs {
		d.str(fmt.Sprintf("log %d %s %v %s %s", l.Level, l.Msg, l.Key, l.Worker, l.Client))
	}
}

// sum ends the digest with the engine's transition log (the last
// Config.TransitionLogSize transitions, with their reasons).
func (d *outboxDigest) sum(eng *scheduler.State) (string, error) {
	for _, t := range eng.TransitionLog() {
		d.str(fmt.Sprintf("%v %s>%s %s %d %s %s", t.Key, t.From, t.To, t.StimulusID, t.At.UnixNano(), t.Worker, t.Reason))
	}
	return fmt.Sprintf("%x", d.h.Sum(nil)), d.err
}
