// Command bench is Switchboard's benchmark harness. It compares, in one
// run and side by side, a client talking to a fake upstream directly, the
// same through a bare httputil.ReverseProxy (the baseline), and the same
// through the gateway built from this tree, and prints ratios.
//
//	bench [run] --gateway PATH [--out DIR] [--smoke] [--profile] [--only MODES]
//	bench upstream --listen ADDR          the fake OpenAI-compatible upstream
//	bench baseline --listen ADDR --upstream URL
//	bench loadgen                         the load generator (jobs on stdin)
//	bench report [--md] latest.json       re-render a saved run
//	bench compare a.json b.json ...       medians of the targets over runs
//	bench soak --gateway PATH [--duration 10m]   long mixed load with faults: leaks?
//	bench hedge --gateway PATH            TTFT tail with hedging off and on (see hedge.go)
//	bench cache --gateway PATH            a cache hit's latency against the bare proxy's (see cache.go)
//	bench ledger --gateway PATH --store sqlite|redis [--requests N]   the long metered run (see ledger.go)
//
// Every part runs in its own process so that each one's CPU time and RSS
// can be read from /proc. ./scripts/bench builds everything and runs it;
// BENCHMARKS.md explains the method and the figures.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
)

func main() {
	os.Exit(dispatch(os.Args[1:]))
}

// dispatch runs a subcommand; the harness re-executes this binary (or the
// test binary, see smoke_test.go) with one of the child subcommands.
func dispatch(args []string) int {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runMain(args)
	case "upstream":
		return upstreamMain(args)
	case "baseline":
		return baselineMain(args)
	case "loadgen":
		return loadgenMain(args)
	case "report":
		return reportMain(args)
	case "compare":
		return compareMain(args)
	case "soak":
		return soakMain(args)
	case "hedge":
		return hedgeMain(args)
	case "cache":
		return cacheMain(args)
	case "ledger":
		return ledgerMain(args)
	}
	fmt.Fprintf(os.Stderr, "bench: unknown command %q (run, upstream, baseline, loadgen, report, compare, soak, hedge, cache, ledger)\n", cmd)
	return 2
}

// hello is a child's first stdout line.
type hello struct {
	Addr       string `json:"addr,omitempty"`
	Nofile     uint64 `json:"nofile"`
	NofileHard uint64 `json:"nofile_hard"`
}

func announce(h hello) {
	b, _ := json.Marshal(h)
	os.Stdout.Write(append(b, '\n'))
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
}

// quietLog drops net/http's per-connection error lines (clients that go
// away are normal under load).
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }
