package scheduler

import "daskgo/protocol"

// HeartbeatInterval is distributed's heartbeat_interval(n): the period, in
// seconds, that workers are told to heartbeat at when n workers are known.
// The outer ring needs it for the register-worker reply.
func HeartbeatInterval(n int) float64 { return heartbeatInterval(n) }

// KeyPrefix is distributed's key_split: the task prefix a key belongs to
// (tools outside the engine group by it, e.g. the simulator's memory trace).
func KeyPrefix(k protocol.Key) string { return keySplit(k) }
