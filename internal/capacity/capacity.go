// Package capacity sizes what one gateway process can hold at once from
// what really bounds it: open file descriptors and memory. It gives the
// default of limits.max_concurrency, so that a replica holds as many
// concurrent requests (LLM streams last seconds to minutes) as its
// descriptors and memory allow, not a fixed 256.
package capacity

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime/debug"
	"strconv"
)

const (
	// StreamBytes is the memory budgeted per held request: a held stream
	// costs 59–61 KB of RSS measured at 1,000 concurrent streams (its
	// client and upstream connections, their goroutines and buffers; see
	// BENCHMARKS.md), a bare ReverseProxy 56–57 KB.
	StreamBytes = 64 << 10
	// MemoryShare is the share of the memory limit held requests may
	// take; the rest is the heap of everything else and GC headroom.
	MemoryShare = 2 // one half

	// Floor and Ceiling bound the default: never below the old fixed
	// default, never above what the config accepts.
	Floor   = 256
	Ceiling = 1_000_000
)

// MaxConcurrency is the default of limits.max_concurrency: the smaller of
// the connection cap limits.max_connections defaults to (each request
// holds a client and an upstream socket) and the memory limit's share
// over StreamBytes, within [Floor, Ceiling].
func MaxConcurrency() int {
	return Size(Connections(), MemoryLimit())
}

// Size is MaxConcurrency for a descriptor bound and a memory limit in
// bytes (0 = unknown).
func Size(fdBound int, memLimit int64) int {
	n := fdBound
	if memLimit > 0 {
		n = min(n, int(min(memLimit/MemoryShare/StreamBytes, math.MaxInt32)))
	}
	return min(max(n, Floor), Ceiling)
}

// MemoryLimit is the smallest of GOMEMLIMIT, the cgroup's memory limit
// (v2 memory.max, or v1 memory.limit_in_bytes) and the machine's memory,
// in bytes; 0 when none can be read.
func MemoryLimit() int64 {
	var limit int64
	take := func(v int64) {
		if v > 0 && (limit == 0 || v < limit) {
			limit = v
		}
	}
	if v := debug.SetMemoryLimit(-1); v < math.MaxInt64 {
		take(v)
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		take(readInt(p))
	}
	take(memTotal())
	return limit
}

// readInt reads a number alone in a file ("max" and errors: 0).
func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || v <= 0 || v >= math.MaxInt64/2 { // cgroup v1 says "no limit" with a huge number
		return 0
	}
	return v
}

// memTotal is MemTotal of /proc/meminfo in bytes (0 when unreadable).
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if rest, ok := bytes.CutPrefix(line, []byte("MemTotal:")); ok {
			f := bytes.Fields(rest)
			if len(f) == 2 && string(f[1]) == "kB" {
				if v, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return v << 10
				}
			}
			return 0
		}
	}
	return 0
}

// reserve is what the process keeps for itself out of RLIMIT_NOFILE.
const reserve = 128

func fromNofile(n uint64) int {
	if n > 1<<40 { // RLIM_INFINITY and absurd values
		n = 1 << 40
	}
	m := int64(n) - reserve
	return int(max(64, min(m/2, 10_000_000)))
}
