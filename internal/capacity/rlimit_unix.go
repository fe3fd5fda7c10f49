//go:build unix

package capacity

import "syscall"

// Connections is the default of limits.max_connections, sized from the
// process's file-descriptor limit: every client request may hold an
// upstream connection too, and the process needs some for its store, logs
// and listeners, so half of what is left after a reserve. At least 64.
func Connections() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return fromNofile(r.Cur)
}
