package coord

import (
	"slices"
	"sort"
)

// MultiLocks: distributed/multi_lock.py MultiLockExtension. Each lock name
// has a FIFO of MultiLock instances (ids) requesting it; the first holds
// it. A request is granted once it holds num_locks of its locks; the
// requests it no longer needs are then withdrawn. MultiLocks have no leases
// in distributed either: a dead holder keeps its locks.

// MultiLockAcquire is multi_lock_acquire; the answer is true or false.
type MultiLockAcquire struct {
	Call
	Locks    []string
	ID       string
	NumLocks int64
}

// MultiLockRelease is multi_lock_release.
type MultiLockRelease struct {
	Call
	ID string
}

type multiLockExt struct {
	locks        map[string][]string        // lock -> requesting ids, holder first
	requests     map[string]map[string]bool // id -> locks requested
	requestsLeft map[string]int64           // id -> locks still needed
	waiters      map[string]int64           // id -> parked acquire
}

func (c *Coordinator) dispatchMultiLock(op Op) bool {
	switch x := op.(type) {
	case *MultiLockAcquire:
		c.multiLockAcquire(x)
	case *MultiLockRelease:
		c.multiLockRelease(x)
	default:
		return false
	}
	return true
}

func (m *multiLockExt) init() {
	if m.locks == nil {
		m.locks = map[string][]string{}
		m.requests = map[string]map[string]bool{}
		m.requestsLeft = map[string]int64{}
		m.waiters = map[string]int64{}
	}
}

// multiLockAcquire mirrors MultiLockExtension.acquire.
func (c *Coordinator) multiLockAcquire(x *MultiLockAcquire) {
	m := &c.mlock
	m.init()
	if _, dup := m.requests[x.ID]; dup {
		c.host.Reply(x.ReplyTo, builtinError("RuntimeError", "MultiLock %s already requested its locks", x.ID))
		return
	}
	if x.NumLocks <= 0 || int64(len(x.Locks)) < x.NumLocks {
		c.host.Reply(x.ReplyTo, builtinError("ValueError", "num_locks must be in 1..%d, got %d", len(x.Locks), x.NumLocks))
		return
	}
	if m.request(x.Locks, x.ID, x.NumLocks) {
		c.host.Reply(x.ReplyTo, true)
		return
	}
	id, locks := x.ReplyTo, x.Locks
	m.waiters[x.ID] = id
	c.park(id, func(why WaitEnd) {
		delete(m.waiters, x.ID)
		c.multiLockRetain(locks, x.ID)
		c.timeoutAnswer(id, why, false)
	})
}

// request mirrors MultiLockExtension._request_locks: queue up on every lock,
// least contended first, until num locks are held.
func (m *multiLockExt) request(locks []string, id string, num int64) bool {
	req := map[string]bool{}
	for _, l := range locks {
		req[l] = true
	}
	m.requests[id] = req
	m.requestsLeft[id] = num
	sorted := slices.Clone(locks)
	sort.SliceStable(sorted, func(i, j int) bool { return len(m.locks[sorted[i]]) < len(m.locks[sorted[j]]) })
	for i, l := range sorted {
		m.locks[l] = append(m.locks[l], id)
		if len(m.locks[l]) == 1 {
			m.requestsLeft[id]--
			if m.requestsLeft[id] == 0 {
				for _, rest := range sorted[i+1:] {
					delete(req, rest)
				}
				return true
			}
		}
	}
	return false
}

// multiLockRelease mirrors MultiLockExtension.release.
func (c *Coordinator) multiLockRelease(x *MultiLockRelease) {
	m := &c.mlock
	req, ok := m.requests[x.ID]
	if !ok {
		c.host.Reply(x.ReplyTo, builtinError("KeyError", "%s", x.ID))
		return
	}
	locks := make([]string, 0, len(req))
	for l := range req {
		locks = append(locks, l)
	}
	slices.Sort(locks)
	c.multiLockRetain(locks, x.ID)
}

// multiLockRetain mirrors MultiLockExtension._retain_locks: leave the
// queues of locks, passing held ones to the next in line, and grant the
// requests that now hold enough.
func (c *Coordinator) multiLockRetain(locks []string, id string) {
	m := &c.mlock
	var ready []string
	for _, l := range locks {
		q := m.locks[l]
		if len(q) > 0 && q[0] == id {
			q = q[1:]
			if len(q) > 0 {
				next := q[0]
				m.requestsLeft[next]--
				if m.requestsLeft[next] <= 0 {
					m.requestsLeft[next] = 0
					if !slices.Contains(ready, next) {
						ready = append(ready, next)
					}
				}
			}
		} else {
			q = slices.DeleteFunc(q, func(x string) bool { return x == id })
		}
		if len(q) == 0 {
			delete(m.locks, l)
		} else {
			m.locks[l] = q
		}
	}
	delete(m.requests, id)
	delete(m.requestsLeft, id)
	for _, w := range ready {
		if to, ok := m.waiters[w]; ok {
			delete(m.waiters, w)
			c.answer(to, true)
		}
	}
}

// MultiLockHolders lists, per lock, the ids queued on it (holder first).
func (c *Coordinator) MultiLockHolders() map[string][]string {
	out := make(map[string][]string, len(c.mlock.locks))
	for l, q := range c.mlock.locks {
		out[l] = slices.Clone(q)
	}
	return out
}
