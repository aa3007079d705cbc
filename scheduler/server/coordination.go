package server

import (
	"context"
	"time"

	"daskgo/comm"
	"daskgo/compat"
	"daskgo/protocol"
	"daskgo/scheduler"
	"daskgo/scheduler/coord"
)

// The RPCs and stream ops of distributed's coordination extensions
// (distributed/semaphore.py, multi_lock.py, event.py, variable.py,
// queues.py, publish.py) and Scheduler.set_metadata/get_metadata. Fields
// are decoded here into coord ops; the engine holds all state
// (scheduler/coord).

// coordinationHandlers is added to the RPC table.
func (s *Server) coordinationHandlers() map[string]comm.Handler {
	return map[string]comm.Handler{
		"semaphore_register":       s.immediate(semaphoreRegister),
		"semaphore_acquire":        s.blocking(semaphoreAcquire),
		"semaphore_release":        s.immediate(semaphoreRelease),
		"semaphore_close":          s.immediate(func(f *fields) coord.Op { return &coord.SemaphoreClose{Name: f.str("name")} }),
		"semaphore_refresh_leases": s.immediate(semaphoreRefresh),
		"semaphore_value":          s.immediate(func(f *fields) coord.Op { return &coord.SemaphoreValue{Name: f.str("name")} }),
		"multi_lock_acquire":       s.blocking(multiLockAcquire),
		"multi_lock_release":       s.immediate(func(f *fields) coord.Op { return &coord.MultiLockRelease{ID: f.str("id")} }),
		"event_wait":               s.blocking(eventWait),
		"event_set":                s.immediate(func(f *fields) coord.Op { return &coord.EventSet{Name: f.str("name")} }),
		"event_clear":              s.immediate(func(f *fields) coord.Op { return &coord.EventClear{Name: f.str("name")} }),
		"event_is_set":             s.immediate(func(f *fields) coord.Op { return &coord.EventIsSet{Name: f.str("name")} }),
		"variable_set":             s.withKey(variableSet),
		"variable_get":             s.blocking(variableGet),
		"queue_create":             s.immediate(queueCreate),
		"queue_put":                s.withKey(queuePut),
		"queue_get":                s.blocking(queueGet),
		"queue_qsize":              s.immediate(func(f *fields) coord.Op { return &coord.QueueSize{Name: f.str("name")} }),
		"publish_put":              s.blocking(publishPut),
		"publish_delete":           s.blocking(publishDelete),
		"publish_list":             s.immediate(func(*fields) coord.Op { return &coord.PublishList{} }),
		"publish_get":              s.immediate(func(f *fields) coord.Op { return &coord.PublishGet{Names: f.list("names")} }),
		"set_metadata":             s.immediate(setMetadata),
		"get_metadata":             s.immediate(getMetadata),
	}
}

// rpcOp is a coordination op answering an RPC (it embeds coord.Call).
type rpcOp interface {
	coord.Op
	SetReplyTo(id int64)
}

// immediate serves an RPC the engine answers at once.
func (s *Server) immediate(mk func(f *fields) coord.Op) comm.Handler {
	return func(ctx context.Context, req *comm.Request) (any, error) {
		op, _, err := decodeRPC(req, func(f *fields) (coord.Op, time.Duration) { return mk(f), -1 })
		if err != nil {
			return nil, err
		}
		return s.loop.callRPC(ctx, func(id int64) scheduler.Stimulus {
			op.SetReplyTo(id)
			return &scheduler.CoordOp{Base: s.base(req.Op), Op: op}
		})
	}
}

// blocking serves an RPC the engine may park until timeout (-1: none).
func (s *Server) blocking(mk func(f *fields) (coord.Op, time.Duration)) comm.Handler {
	return func(ctx context.Context, req *comm.Request) (any, error) {
		op, timeout, err := decodeRPC(req, mk)
		if err != nil {
			return nil, err
		}
		return s.loop.callWait(ctx, req.Conn, timeout, func(id int64) scheduler.Stimulus {
			op.SetReplyTo(id)
			return &scheduler.CoordOp{Base: s.base(req.Op), Op: op}
		})
	}
}

// withKey serves variable_set and queue_put: when they carry a future's
// key, wait (up to their timeout) for the engine to know it first.
func (s *Server) withKey(mk func(f *fields) (coord.Op, time.Duration)) comm.Handler {
	wait := s.blocking(mk)
	return func(ctx context.Context, req *comm.Request) (any, error) {
		if k := req.Args.Get("key"); k != nil {
			key, err := protocol.KeyOf(k)
			if err != nil {
				return nil, &fieldError{op: req.Op, field: "key", want: "a dask key", got: k}
			}
			f := &fields{op: req.Op, m: req.Args}
			if err := s.loop.waitForKey(ctx, key, f.timeout("timeout")); err != nil {
				if re, ok := err.(*coord.RemoteException); ok {
					return rpcResult(re), nil
				}
				return nil, err
			}
		}
		return wait(ctx, req)
	}
}

// decodeRPC builds the op of a request (and its timeout, -1 for none), or
// the error naming the bad field.
func decodeRPC(req *comm.Request, mk func(f *fields) (coord.Op, time.Duration)) (rpcOp, time.Duration, error) {
	f := &fields{op: req.Op, m: req.Args}
	op, timeout := mk(f)
	if f.err != nil {
		return nil, 0, f.err
	}
	return op.(rpcOp), timeout, nil
}

// timeout reads a timeout (seconds, or a dask timedelta string); None is
// -1 (wait forever).
func (f *fields) timeout(name string) time.Duration {
	v := f.m.Get(name)
	if v == nil {
		return -1
	}
	d, err := compat.ParseTimedelta(v)
	if err != nil {
		f.fail(name, "a timeout in seconds", v)
		return -1
	}
	return max(d, 0)
}

func (f *fields) list(name string) []any {
	switch x := f.m.Get(name).(type) {
	case []any:
		return x
	case nil:
		return nil
	default:
		f.fail(name, "a list", x)
		return nil
	}
}

func semaphoreRegister(f *fields) coord.Op {
	st := &coord.SemaphoreRegister{Name: f.str("name"), MaxLeases: f.int("max_leases")}
	if _, ok := f.m.Get("max_leases").(int64); !ok {
		f.fail("max_leases", "an int", f.m.Get("max_leases"))
	}
	if t := f.timeout("lease_timeout"); t > 0 {
		st.LeaseTimeout = t
	}
	return st
}

func semaphoreAcquire(f *fields) (coord.Op, time.Duration) {
	t := f.timeout("timeout")
	return &coord.SemaphoreAcquire{Name: f.str("name"), LeaseID: f.str("lease_id"), NoWait: t == 0}, t
}

func semaphoreRelease(f *fields) coord.Op {
	return &coord.SemaphoreRelease{Name: f.str("name"), LeaseID: f.str("lease_id")}
}

func semaphoreRefresh(f *fields) coord.Op {
	return &coord.SemaphoreRefreshLeases{Name: f.str("name"), LeaseIDs: f.strings("lease_ids")}
}

func multiLockAcquire(f *fields) (coord.Op, time.Duration) {
	t := f.timeout("timeout")
	return &coord.MultiLockAcquire{Locks: f.strings("locks"), ID: f.str("id"), NumLocks: f.int("num_locks")}, t
}

func eventWait(f *fields) (coord.Op, time.Duration) {
	t := f.timeout("timeout")
	return &coord.EventWait{Name: f.str("name"), NoWait: t == 0}, t
}

func variableSet(f *fields) (coord.Op, time.Duration) {
	st := &coord.VariableSet{Name: f.str("name"), Data: f.m.Get("data")}
	if f.m.Get("key") != nil {
		st.Future, st.Key = true, f.key("key")
	}
	return st, -1
}

func variableGet(f *fields) (coord.Op, time.Duration) {
	t := f.timeout("timeout")
	return &coord.VariableGet{Name: f.str("name"), NoWait: t == 0}, t
}

func queueCreate(f *fields) coord.Op {
	return &coord.QueueCreate{Name: f.str("name"), MaxSize: f.int("maxsize")}
}

func queuePut(f *fields) (coord.Op, time.Duration) {
	t := f.timeout("timeout")
	st := &coord.QueuePut{Name: f.str("name"), Data: f.m.Get("data"), NoWait: t == 0}
	if f.m.Get("key") != nil {
		st.Future, st.Key = true, f.key("key")
	}
	return st, t
}

func queueGet(f *fields) (coord.Op, time.Duration) {
	t := f.timeout("timeout")
	st := &coord.QueueGet{Name: f.str("name"), NoWait: t == 0}
	switch b := f.m.Get("batch").(type) {
	case bool:
		if b {
			st.Batch = -1
		}
	case int64:
		if b <= 0 {
			f.fail("batch", "True, False or a positive int", b)
		}
		st.Batch = b
		if t >= 0 {
			f.fail("timeout", "None with an integer batch (Dask queues don't support simultaneous use of integer batch sizes and timeouts)", f.m.Get("timeout"))
		}
	case nil:
	default:
		f.fail("batch", "True, False or a positive int", b)
	}
	return st, t
}

func publishPut(f *fields) (coord.Op, time.Duration) {
	st := &coord.PublishPut{Client: f.str("client"), UID: f.str("uid"), Names: f.list("names"),
		Data: f.list("data"), Override: f.bool("override")}
	for _, ks := range f.list("keys") {
		keys, err := protocol.KeysOf(ks)
		if err != nil {
			f.fail("keys", "a list of lists of dask keys", ks)
		}
		st.Keys = append(st.Keys, keys)
	}
	if len(st.Keys) != len(st.Names) || len(st.Data) != len(st.Names) {
		f.fail("names", "as long as keys and data", st.Names)
	}
	return st, -1
}

func publishDelete(f *fields) (coord.Op, time.Duration) {
	return &coord.PublishDelete{Client: f.str("client"), UID: f.str("uid"), Names: f.list("names")}, -1
}

func setMetadata(f *fields) coord.Op {
	return &coord.SetMetadata{Keys: f.list("keys"), Value: f.m.Get("value")}
}

func getMetadata(f *fields) coord.Op {
	st := &coord.GetMetadata{Keys: f.list("keys"), Default: f.m.Get("default"), HasDefault: true}
	if isNoDefault(st.Default) {
		st.Default, st.HasDefault = nil, false
	}
	return st
}

// isNoDefault recognises dask.typing.no_default, an Enum member that
// msgpack carries as {"__Enum__": True, "name": "no_default", ...}.
func isNoDefault(v any) bool {
	m, ok := v.(*protocol.Map)
	return ok && m.Get("__Enum__") == true && m.Get("name") == "no_default"
}

// coordinationStreamStimulus converts the extensions' client stream ops;
// ok is false for other ops.
func coordinationStreamStimulus(client string, f *fields, b scheduler.Base) (scheduler.Stimulus, bool) {
	op := coordinationStreamOp(client, f)
	if op == nil {
		return nil, false
	}
	return &scheduler.CoordOp{Base: b, Op: op}, true
}

func coordinationStreamOp(client string, f *fields) coord.Op {
	switch f.op {
	case "publish_flush_batched_send":
		return &coord.PublishFlush{Client: client, UID: f.str("uid")}
	case "variable-future-received-confirm":
		return &coord.VariableFutureReceived{Client: client, Name: f.str("name"),
			Key: f.key("key"), Token: f.str("token")}
	case "variable_delete":
		return &coord.VariableDelete{Name: f.str("name")}
	case "queue-future-release":
		return &coord.QueueFutureRelease{Client: client, Name: f.str("name"), Key: f.key("key")}
	case "queue_release":
		return &coord.QueueRelease{Name: f.str("name")}
	}
	return nil
}
