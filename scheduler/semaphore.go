package scheduler

import (
	"slices"
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
	Base
	Call
	Name      string
	MaxLeases int64
	// LeaseTimeout: 0 means leases never time out (lease-timeout "inf").
	LeaseTimeout time.Duration
}

// SemaphoreAcquire is semaphore_acquire; the answer is true or false.
type SemaphoreAcquire struct {
	Base
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
	Base
	Call
	Name    string
	LeaseID string
}

// SemaphoreClose is semaphore_close.
type SemaphoreClose struct {
	Base
	Call
	Name string
}

// SemaphoreRefreshLeases is semaphore_refresh_leases.
type SemaphoreRefreshLeases struct {
	Base
	Call
	Name     string
	LeaseIDs []string
}

// SemaphoreValue is semaphore_value: the number of leases held.
type SemaphoreValue struct {
	Base
	Call
	Name string
}

type semaphore struct {
	maxLeases    int64
	leaseTimeout time.Duration
	leases       map[string]time.Time // lease id -> last refreshed
	waiters      []semWaiter          // FIFO of parked acquires
}

type semWaiter struct {
	replyTo int64
	leaseID string
}

type semaphoreExt struct {
	sems      map[string]*semaphore
	lastCheck time.Time
}

func (s *State) dispatchSemaphore(st Stimulus) bool {
	switch x := st.(type) {
	case *SemaphoreRegister:
		s.semaphoreRegister(x)
	case *SemaphoreAcquire:
		s.semaphoreAcquire(x)
	case *SemaphoreRelease:
		s.semaphoreRelease(x)
	case *SemaphoreClose:
		s.semaphoreClose(x)
	case *SemaphoreRefreshLeases:
		s.semaphoreRefreshLeases(x)
	case *SemaphoreValue:
		s.reply(x.ReplyTo, s.SemaphoreLeases(x.Name))
	default:
		return false
	}
	return true
}

// SemaphoreLeases is the number of leases held on name (0 if unknown).
func (s *State) SemaphoreLeases(name string) int64 {
	if sem := s.sem.sems[name]; sem != nil {
		return int64(len(sem.leases))
	}
	return 0
}

// semaphoreRegister mirrors SemaphoreExtension.create: the first
// registration fixes max_leases and the lease timeout.
func (s *State) semaphoreRegister(x *SemaphoreRegister) {
	if sem := s.sem.sems[x.Name]; sem != nil {
		if sem.maxLeases != x.MaxLeases {
			s.reply(x.ReplyTo, builtinError("ValueError", "Inconsistent max leases: %d, expected: %d", x.MaxLeases, sem.maxLeases))
		}
		return
	}
	if s.sem.sems == nil {
		s.sem.sems = map[string]*semaphore{}
	}
	s.sem.sems[x.Name] = &semaphore{maxLeases: x.MaxLeases, leaseTimeout: x.LeaseTimeout, leases: map[string]time.Time{}}
}

// semaphoreAcquire mirrors SemaphoreExtension.acquire: take a lease if one
// is free (or this lease id holds one already: requests are idempotent),
// else wait for a release.
func (s *State) semaphoreAcquire(x *SemaphoreAcquire) {
	sem := s.sem.sems[x.Name]
	if sem == nil {
		s.reply(x.ReplyTo, builtinError("RuntimeError", "Semaphore or Lock `%s` not known.", x.Name))
		return
	}
	if _, held := sem.leases[x.LeaseID]; held || int64(len(sem.leases)) < sem.maxLeases {
		sem.leases[x.LeaseID] = s.now
		s.reply(x.ReplyTo, true)
		return
	}
	if x.NoWait || x.ReplyTo == 0 {
		s.reply(x.ReplyTo, false)
		return
	}
	sem.waiters = append(sem.waiters, semWaiter{replyTo: x.ReplyTo, leaseID: x.LeaseID})
	id := x.ReplyTo
	s.park(id, func(why WaitEnd) {
		sem.waiters = slices.DeleteFunc(sem.waiters, func(w semWaiter) bool { return w.replyTo == id })
		s.timeoutAnswer(id, why, false)
	})
}

// semaphoreRelease mirrors SemaphoreExtension.release; releasing an unknown
// semaphore or lease only logs, as there.
func (s *State) semaphoreRelease(x *SemaphoreRelease) {
	sem := s.sem.sems[x.Name]
	if sem == nil {
		s.logf(LogWarn, "", "", "", "Tried to release Lock or Semaphore `%s` but it is not known.", x.Name)
		return
	}
	if _, ok := sem.leases[x.LeaseID]; !ok {
		s.logf(LogWarn, "", "", "", "Tried to release Lock or Semaphore but it was already released: name=%s, lease_id=%s. "+
			"This can happen if the Lock or Semaphore timed out before.", x.Name, x.LeaseID)
		return
	}
	delete(sem.leases, x.LeaseID)
	s.semaphoreGrant(sem)
}

// semaphoreGrant hands freed leases to waiters, oldest first (distributed
// wakes all of them and the first to retry wins).
func (s *State) semaphoreGrant(sem *semaphore) {
	for len(sem.waiters) > 0 && int64(len(sem.leases)) < sem.maxLeases {
		w := sem.waiters[0]
		sem.waiters = sem.waiters[1:]
		sem.leases[w.leaseID] = s.now
		s.answer(w.replyTo, true)
	}
}

// semaphoreClose mirrors SemaphoreExtension.close (a hard close). Parked
// acquires fail as a later retry would in distributed.
func (s *State) semaphoreClose(x *SemaphoreClose) {
	sem := s.sem.sems[x.Name]
	if sem == nil {
		return
	}
	if len(sem.leases) > 0 {
		s.logf(LogWarn, "", "", "", "Closing semaphore %s but there remain %d unreleased leases", x.Name, len(sem.leases))
	}
	delete(s.sem.sems, x.Name)
	for _, w := range sem.waiters {
		s.answer(w.replyTo, builtinError("RuntimeError", "Semaphore or Lock `%s` not known.", x.Name))
	}
}

// semaphoreRefreshLeases mirrors SemaphoreExtension.refresh_leases,
// including its overbooking: an unknown (timed out) lease id is re-added.
func (s *State) semaphoreRefreshLeases(x *SemaphoreRefreshLeases) {
	sem := s.sem.sems[x.Name]
	if sem == nil {
		return
	}
	for _, id := range x.LeaseIDs {
		if _, ok := sem.leases[id]; !ok {
			s.logf(LogError, "", "", "", "Refreshing an unknown lease ID %s for %s. This might be due to leases timing out "+
				"and may cause overbooking of the semaphore!", id, x.Name)
		}
		sem.leases[id] = s.now
	}
}

// checkLeaseTimeouts mirrors SemaphoreExtension._check_lease_timeout, run
// at most every lease-validation-interval.
func (s *State) checkLeaseTimeouts() {
	if len(s.sem.sems) == 0 || s.now.Sub(s.sem.lastCheck) < s.cfg.LeaseValidationInterval {
		return
	}
	s.sem.lastCheck = s.now
	names := make([]string, 0, len(s.sem.sems))
	for name := range s.sem.sems {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sem := s.sem.sems[name]
		if sem.leaseTimeout <= 0 {
			continue
		}
		ids := make([]string, 0, len(sem.leases))
		for id, seen := range sem.leases {
			if s.now.Sub(seen) > sem.leaseTimeout {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			s.logf(LogInfo, "", "", "", "Lease %s for %s timed out after %s", id, name, s.now.Sub(sem.leases[id]))
			delete(sem.leases, id)
		}
		s.semaphoreGrant(sem)
	}
}
