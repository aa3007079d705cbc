//go:build unix

package comm

import "syscall"

// fileLimit is the process's soft limit on open files (RLIMIT_NOFILE), or
// 0 when it cannot be read or is unlimited.
func fileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0
	}
	return int(rl.Cur)
}
