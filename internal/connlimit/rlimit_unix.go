//go:build unix

package connlimit

import "syscall"

// DefaultMax sizes the cap from the process's file-descriptor limit: every
// client request may hold an upstream connection too, and the process needs
// some for its store, logs and listeners, so half of what is left after a
// reserve. At least 64.
func DefaultMax() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return fromNofile(r.Cur)
}
