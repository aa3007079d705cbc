package coord

import (
	"slices"
	"strings"
	"time"
)

// Semaphores and Locks: distributed/semaphore.py SemaphoreExtension
// (distributed.Lock is a Semaphore with max_leases=1). A lease is held until
// released or until its holder stops refreshing it: the holding Client or
// Worker refreshes every lease-timeout/5, and the scheduler drops leases
// older than lease-timeout every lease-validation-interval
// (SemaphoreExtension._check_lease_timeout, run here on Tick). So a lease
// held by a process that died frees up after about the lease timeout.

// SemaphoreRegister is semaphore_register (SemaphoreExtension.create).
type SemaphoreRegister struct {
	Call
	Name      string
	MaxLeases int64
	// LeaseTimeout: 0 means leases never time out (lease-timeout "inf").
	LeaseTimeout time.Duration
}

// SemaphoreAcquire is semaphore_acquire; the answer is true or false.
type SemaphoreAcquire struct {
	Call
	Name    string
	LeaseID string
	// NoWait: the caller's timeout is 0 (Lock.acquire(blocking=False)):
	// answer false at once instead of parking. A positive timeout is the
	// outer ring's: it sends CancelWait when it passes.
	NoWait bool
}

// SemaphoreRelease is semaphore_release.
type SemaphoreRelease struct {
	Call
	Name    string
	LeaseID string
}

// SemaphoreClose is semaphore_close.
type SemaphoreClose struct {
	Call
	Name string
}

// SemaphoreRefreshLeases is semaphore_refresh_leases.
type SemaphoreRefreshLeases struct {
	Call
	Name     string
	LeaseIDs []string
}

// SemaphoreValue is semaphore_value: the number of leases held.
type SemaphoreValue struct {
	Call
	Name string
}

type semaphore struct {
	maxLeases    int64
	leaseTimeout time.Duration
	leases       map[string]time.Time // lease id -> last refreshed
	waiters      []semWaiter          // FIFO of parked acquires
	// acquires and releases count leases granted and given back
	// (SemaphoreExtension.metrics' acquire_total and release_total)
	acquires, releases int64
	// avgPending is SemaphoreExtension's average_pending_lease_time: on
	// every acquire's answer, (avg + time it waited) / 2.
	avgPending time.Duration
}

// noteWait folds one acquire's wait into avgPending, as
// SemaphoreExtension.acquire does before it returns.
func (sem *semaphore) noteWait(d time.Duration) { sem.avgPending = (sem.avgPending + d) / 2 }

// SemaphoreView is one semaphore's figures for the dashboard and /metrics
// (distributed's dask_semaphore_* metrics).
type SemaphoreView struct {
	Name                       string
	MaxLeases, Active, Pending int64
	AcquireTotal, ReleaseTotal int64
	AveragePending             time.Duration
}

// Semaphores lists every semaphore by name.
func (c *Coordinator) Semaphores() []SemaphoreView {
	out := make([]SemaphoreView, 0, len(c.sem.sems))
	for name, sem := range c.sem.sems {
		out = append(out, SemaphoreView{Name: name, MaxLeases: sem.maxLeases, Active: int64(len(sem.leases)),
			Pending: int64(len(sem.waiters)), AcquireTotal: sem.acquires, ReleaseTotal: sem.releases,
			AveragePending: sem.avgPending})
	}
	slices.SortFunc(out, func(a, b SemaphoreView) int { return strings.Compare(a.Name, b.Name) })
	return out
}

type semWaiter struct {
	replyTo int64
	leaseID string
	since   time.Time
}

type semaphoreExt struct {
	sems      map[string]*semaphore
	lastCheck time.Time
}

func (c *Coordinator) dispatchSemaphore(op Op) bool {
	switch x := op.(type) {
	case *SemaphoreRegister:
		c.semaphoreRegister(x)
	case *SemaphoreAcquire:
		c.semaphoreAcquire(x)
	case *SemaphoreRelease:
		c.semaphoreRelease(x)
	case *SemaphoreClose:
		c.semaphoreClose(x)
	case *SemaphoreRefreshLeases:
		c.semaphoreRefreshLeases(x)
	case *SemaphoreValue:
		c.host.Reply(x.ReplyTo, c.SemaphoreLeases(x.Name))
	default:
		return false
	}
	return true
}

// SemaphoreLeases is the number of leases held on name (0 if unknown).
func (c *Coordinator) SemaphoreLeases(name string) int64 {
	if sem := c.sem.sems[name]; sem != nil {
		return int64(len(sem.leases))
	}
	return 0
}

// semaphoreRegister mirrors SemaphoreExtension.create: the first
// registration fixes max_leases and the lease timeout.
func (c *Coordinator) semaphoreRegister(x *SemaphoreRegister) {
	if sem := c.sem.sems[x.Name]; sem != nil {
		if sem.maxLeases != x.MaxLeases {
			c.host.Reply(x.ReplyTo, builtinError("ValueError", "Inconsistent max leases: %d, expected: %d", x.MaxLeases, sem.maxLeases))
		}
		return
	}
	if c.sem.sems == nil {
		c.sem.sems = map[string]*semaphore{}
	}
	c.sem.sems[x.Name] = &semaphore{maxLeases: x.MaxLeases, leaseTimeout: x.LeaseTimeout, leases: map[string]time.Time{}}
}

// semaphoreAcquire mirrors SemaphoreExtension.acquire: take a lease if one
// is free (or this lease id holds one already: requests are idempotent),
// else wait for a release.
func (c *Coordinator) semaphoreAcquire(x *SemaphoreAcquire) {
	sem := c.sem.sems[x.Name]
	if sem == nil {
		c.host.Reply(x.ReplyTo, builtinError("RuntimeError", "Semaphore or Lock `%s` not known.", x.Name))
		return
	}
	if _, held := sem.leases[x.LeaseID]; held || int64(len(sem.leases)) < sem.maxLeases {
		if !held {
			sem.acquires++
		}
		sem.leases[x.LeaseID] = c.now
		sem.noteWait(0)
		c.host.Reply(x.ReplyTo, true)
		return
	}
	if x.NoWait || x.ReplyTo == 0 {
		sem.noteWait(0)
		c.host.Reply(x.ReplyTo, false)
		return
	}
	since := c.now
	sem.waiters = append(sem.waiters, semWaiter{replyTo: x.ReplyTo, leaseID: x.LeaseID, since: since})
	id := x.ReplyTo
	c.park(id, func(why WaitEnd) {
		sem.noteWait(c.now.Sub(since))
		sem.waiters = slices.DeleteFunc(sem.waiters, func(w semWaiter) bool { return w.replyTo == id })
		c.timeoutAnswer(id, why, false)
	})
}

// semaphoreRelease mirrors SemaphoreExtension.release; releasing an unknown
// semaphore or lease only logs, as there.
func (c *Coordinator) semaphoreRelease(x *SemaphoreRelease) {
	sem := c.sem.sems[x.Name]
	if sem == nil {
		c.host.Logf(LogWarn, "", "", "", "Tried to release Lock or Semaphore `%s` but it is not known.", x.Name)
		return
	}
	if _, ok := sem.leases[x.LeaseID]; !ok {
		c.host.Logf(LogWarn, "", "", "", "Tried to release Lock or Semaphore but it was already released: name=%s, lease_id=%s. "+
			"This can happen if the Lock or Semaphore timed out before.", x.Name, x.LeaseID)
		return
	}
	delete(sem.leases, x.LeaseID)
	sem.releases++
	c.semaphoreGrant(sem)
}

// semaphoreGrant hands freed leases to waiters, oldest first (distributed
// wakes all of them and the first to retry wins).
func (c *Coordinator) semaphoreGrant(sem *semaphore) {
	for len(sem.waiters) > 0 && int64(len(sem.leases)) < sem.maxLeases {
		w := sem.waiters[0]
		sem.waiters = sem.waiters[1:]
		sem.leases[w.leaseID] = c.now
		sem.acquires++
		sem.noteWait(c.now.Sub(w.since))
		c.answer(w.replyTo, true)
	}
}

// semaphoreClose mirrors SemaphoreExtension.close (a hard close). Parked
// acquires fail as a later retry would in distributed.
func (c *Coordinator) semaphoreClose(x *SemaphoreClose) {
	sem := c.sem.sems[x.Name]
	if sem == nil {
		return
	}
	if len(sem.leases) > 0 {
		c.host.Logf(LogWarn, "", "", "", "Closing semaphore %s but there remain %d unreleased leases", x.Name, len(sem.leases))
	}
	delete(c.sem.sems, x.Name)
	for _, w := range sem.waiters {
		c.answer(w.replyTo, builtinError("RuntimeError", "Semaphore or Lock `%s` not known.", x.Name))
	}
}

// semaphoreRefreshLeases mirrors SemaphoreExtension.refresh_leases,
// including its overbooking: an unknown (timed out) lease id is re-added.
func (c *Coordinator) semaphoreRefreshLeases(x *SemaphoreRefreshLeases) {
	sem := c.sem.sems[x.Name]
	if sem == nil {
		return
	}
	for _, id := range x.LeaseIDs {
		if _, ok := sem.leases[id]; !ok {
			c.host.Logf(LogError, "", "", "", "Refreshing an unknown lease ID %s for %c. This might be due to leases timing out "+
				"and may cause overbooking of the semaphore!", id, x.Name)
		}
		sem.leases[id] = c.now
	}
}

// checkLeaseTimeouts mirrors SemaphoreExtension._check_lease_timeout, run
// at most every lease-validation-interval.
func (c *Coordinator) checkLeaseTimeouts() {
	if len(c.sem.sems) == 0 || c.now.Sub(c.sem.lastCheck) < c.leaseValidationInterval {
		return
	}
	c.sem.lastCheck = c.now
	names := make([]string, 0, len(c.sem.sems))
	for name := range c.sem.sems {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sem := c.sem.sems[name]
		if sem.leaseTimeout <= 0 {
			continue
		}
		ids := make([]string, 0, len(sem.leases))
		for id, seen := range sem.leases {
			if c.now.Sub(seen) > sem.leaseTimeout {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			c.host.Logf(LogInfo, "", "", "", "Lease %s for %s timed out after %s", id, name, c.now.Sub(sem.leases[id]))
			delete(sem.leases, id)
		}
		c.semaphoreGrant(sem)
	}
}
