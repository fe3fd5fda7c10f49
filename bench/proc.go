package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// clkTck is USER_HZ, the unit of utime/stime in /proc/<pid>/stat; 100 on
// every Linux architecture Go supports.
const clkTck = 100

// procStatus reads VmRSS and VmHWM (KiB) from /proc/<pid>/status.
func procStatus(pid int) (rssKB, hwmKB int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			rssKB = kbField(line)
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			hwmKB = kbField(line)
		}
	}
	return rssKB, hwmKB, nil
}

func kbField(line []byte) int64 {
	f := strings.Fields(string(line))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n
}

// resetHWM resets a process's peak RSS to its current RSS (Linux
// clear_refs "5"); false when the kernel or permissions refuse.
func resetHWM(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}

// procCPU returns user+system CPU time of a whole process in nanoseconds.
func procCPU(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces; fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')': state(3) ppid(4) ... utime is field 14, stime 15 (1-based
	// over the whole line), i.e. index 11 and 12 here.
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return (u + s) * (1e9 / clkTck)
}

// machineCPU returns busy and total jiffies over all CPUs from /proc/stat.
func machineCPU() (busy, total int64) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0
	}
	for i, s := range fields[1:] {
		n, _ := strconv.ParseInt(s, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// raiseNofile lifts the soft open-file limit to want (or to the hard limit,
// whichever is lower), trying to raise the hard limit too when want exceeds
// it. It returns the limits in force afterwards and why want was not met.
func raiseNofile(want uint64) (soft, hard uint64, why string) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, "getrlimit: " + err.Error()
	}
	if want > rl.Max {
		try := syscall.Rlimit{Cur: want, Max: want}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &try); err == nil {
			return want, want, ""
		} else {
			why = fmt.Sprintf("hard RLIMIT_NOFILE is %d and raising it failed: %v", rl.Max, err)
		}
	}
	rl.Cur = min(max(want, rl.Cur), rl.Max)
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	return rl.Cur, rl.Max, why
}

// ephemeralPorts is the size of the local port range.
func ephemeralPorts() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	lo, _ := strconv.Atoi(f[0])
	hi, _ := strconv.Atoi(f[1])
	return hi - lo + 1
}
