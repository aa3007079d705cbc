package comm

import (
	"fmt"

	"daskgo/protocol"
)

// Lazy requests: at 1,000 workers an idle scheduler's work is
// heartbeat_worker, about 170 a second, and decoding each whole (the
// worker's metrics dict: a Map per level, every number boxed) was a sixth
// of it. An op in Server.LazyHandlers is handed its one frame undecoded
// (Request.Raw) when the request is a plain one-frame dict; its handler
// reads what it needs with protocol.Fields, and calls DecodeArgs to fall
// back to the generic decoding for anything it does not expect.

// lazyRequest scans frame0's top level for op, reply and close; ok is false
// (decode it generically) unless it is a dict whose op has a lazy handler
// and whose fields have the expected types.
func (s *Server) lazyRequest(frame0 []byte) (*Request, bool) {
	f, err := protocol.NewFields(frame0)
	if err != nil {
		return nil, false
	}
	req := &Request{Reply: true, Raw: frame0}
	err = f.Each(func(k []byte) (err error) {
		switch string(k) {
		case "op":
			req.Op, err = f.Str()
		case "reply":
			req.Reply, err = f.Bool()
		case "close":
			req.Close, err = f.Bool()
		default:
			err = f.Skip()
		}
		return err
	})
	if err != nil {
		return nil, false
	}
	if _, ok := s.LazyHandlers[req.Op]; !ok {
		return nil, false
	}
	return req, true
}

// DecodeArgs decodes a lazy request's frame into Args, as a generic
// request would have them; a lazy handler that meets something it does not
// read calls it and goes on as the generic handler.
func (r *Request) DecodeArgs() error {
	if r.Raw == nil {
		return nil
	}
	v, err := protocol.Decode([][]byte{r.Raw})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	parsed, err := parseRequest(v)
	if err != nil {
		return err
	}
	r.Args, r.Serializers, r.Raw = parsed.Args, parsed.Serializers, nil
	return nil
}
