package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain lets the harness re-execute the test binary as its children
// (upstream, baseline, loadgen), exactly as it re-executes the bench binary.
func TestMain(m *testing.M) {
	if os.Getenv("BENCH_CHILD") == "1" {
		os.Exit(dispatch(os.Args[1:]))
	}
	os.Exit(m.Run())
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestSmoke builds the gateway from this tree and runs every mode of the
// harness for a fraction of a second (the metered modes included, with a
// redis-server the harness starts), so the harness cannot rot. It checks
// that each mode produced results for each target with no error and no cut
// stream, and that the JSON report was written; it asserts no timing.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gateway and runs it")
	}
	dir := t.TempDir()
	gw := filepath.Join(dir, "switchboard")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	args := []string{"build", "-o", gw}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command(goTool, append(args, "switchboard/cmd/switchboard")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	rep, err := Run(Options{Gateway: gw, Out: out, Smoke: true, Self: []string{self},
		Progress: testWriter{t}, Table: testWriter{t}})
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	if n := len(plan(true)); len(rep.Modes) != n {
		t.Fatalf("%d modes ran, want %d", len(rep.Modes), n)
	}
	for _, m := range rep.Modes {
		if m.Skipped != "" {
			// Without redis-server the metered Redis modes cannot run; as
			// with redistest, that is a skip unless CI is set.
			if (m.Meter == meterRedis || m.Queue) && redisBinary() == "" && os.Getenv("CI") == "" {
				t.Logf("%s skipped: %s", m.Name, m.Skipped)
				continue
			}
			t.Errorf("%s skipped: %s", m.Name, m.Skipped)
			continue
		}
		for _, name := range targetNames {
			r := m.Targets[name]
			switch {
			case r == nil:
				t.Errorf("%s: no result for %s", m.Name, name)
			case r.OK == 0 || r.Errors > 0 || r.Cut > 0 || r.NotSent > 0:
				t.Errorf("%s/%s: ok=%d errors=%d cut=%d not_sent=%d %v", m.Name, name, r.OK, r.Errors, r.Cut, r.NotSent, r.ErrorSamples)
			case m.Kind == kindStreamOpen || m.Kind == kindStreamConc:
				if r.Chunks == 0 || r.TTFB.N == 0 || r.TTFT.N == 0 {
					t.Errorf("%s/%s: streamed %d chunks, %d TTFB and %d TTFT samples", m.Name, name, r.Chunks, r.TTFB.N, r.TTFT.N)
				}
			case r.Latency.N == 0:
				t.Errorf("%s/%s: no latency samples", m.Name, name)
			}
			if name != "direct" && r != nil && r.ProxyRSSPeakKB == 0 {
				t.Errorf("%s/%s: no RSS read for the proxy", m.Name, name)
			}
		}
	}
	if len(rep.Checks) == 0 {
		t.Error("no target was evaluated")
	}
	b, err := os.ReadFile(filepath.Join(out, "latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("latest.json: %v", err)
	}
	if len(back.Modes) != len(rep.Modes) || back.Modes[0].Targets["gateway"].Hists["latency"].Count() == 0 {
		t.Errorf("latest.json does not round-trip the report")
	}
	if _, err := os.Stat(filepath.Join(out, "latest.md")); err != nil {
		t.Error(err)
	}

	// The hedge mode, on the same binary: every setting served every
	// request, and the upstreams saw at least one call per request.
	hr, err := Hedge(HedgeOptions{Gateway: gw, Out: out, Requests: 40, Concurrency: 4, Warm: 10, TTFT: 2 * time.Millisecond,
		TailFrac: 0.1, TailMult: 20, Afters: []string{"5ms", "p90"}, Progress: testWriter{t}})
	if err != nil {
		t.Fatalf("hedge mode: %v", err)
	}
	if len(hr.Runs) != 3 {
		t.Fatalf("hedge mode ran %d settings, want 3", len(hr.Runs))
	}
	for _, r := range hr.Runs {
		if r.Errors > 0 || r.TTFTP50 <= 0 || r.Calls < int64(r.Requests) {
			t.Errorf("hedge %s: errors %d, p50 %v ms, %d calls for %d requests", r.Setting, r.Errors, r.TTFTP50, r.Calls, r.Requests)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "hedge-latest.md")); err != nil {
		t.Error(err)
	}

	// The cache mode, on the same binary: the hit target is all hits, the
	// miss target none.
	cr, err := Cache(CacheOptions{Gateway: gw, Out: out, Self: []string{self}, Requests: 30, Concurrency: []int{2}, Progress: testWriter{t}})
	if err != nil {
		t.Fatalf("cache mode: %v", err)
	}
	if len(cr.Runs) != 6 {
		t.Fatalf("cache mode ran %d targets, want 6", len(cr.Runs))
	}
	for _, r := range cr.Runs {
		want := map[string]int{"proxy": 0, "hit": r.Requests, "miss": 0}[r.Target]
		if r.Errors > 0 || r.P50 <= 0 || r.Hits != want {
			t.Errorf("cache %s stream=%v: errors %d, p50 %v ms, %d hits (want %d)", r.Target, r.Stream, r.Errors, r.P50, r.Hits, want)
		}
	}

	// The ledger mode, briefly, on each store it runs on: every request
	// served and counted, its cost settled exactly, nothing held.
	for _, st := range []string{meterSQLite, meterRedis} {
		if st == meterRedis && redisBinary() == "" && os.Getenv("CI") == "" {
			t.Log("ledger redis skipped: redis-server is not installed")
			continue
		}
		lr, err := Ledger(gw, st, out, 300, 4, testWriter{t})
		if err != nil {
			t.Fatalf("ledger %s: %v", st, err)
		}
		if lr.Served != 300 || lr.Refused != 0 || lr.Counted != 300 || lr.Settled != lr.Expected || lr.Held != 0 || len(lr.Samples) == 0 {
			t.Errorf("ledger %s: %+v", st, lr)
		}
	}
}
