package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchboard/internal/store/redistest"
)

// One ingress-only and two worker processes: 300 mixed requests (unary
// and streamed, two providers, one flaky) are all answered, each by
// exactly one completed upstream answer.
func TestQueueProcesses300Mixed(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t)
	in := startProc(t, "ingress", queueYAML(srv.URL, up.URL, "in", ""), "ingress")
	startProc(t, "w1", queueYAML(srv.URL, up.URL, "w1", ""), "worker")
	startProc(t, "w2", queueYAML(srv.URL, up.URL, "w2", ""), "worker")
	var wg sync.WaitGroup
	sem := make(chan struct{}, 30)
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			id := fmt.Sprintf("r%d", i)
			model := []string{"m", "f"}[i%2]
			status, body, err := chat(context.Background(), in.URL, model, "plain:"+id, i%3 == 0)
			if err != nil || status != 200 || !strings.HasPrefix(content(body), "answer "+id+" by w") {
				t.Errorf("%s: %d %v %q", id, status, err, body)
			}
		}()
	}
	wg.Wait()
	up.mu.Lock()
	defer up.mu.Unlock()
	workers := map[string]int{}
	for i := range 300 {
		id := fmt.Sprintf("r%d", i)
		if up.ok[id] != 1 {
			t.Errorf("%s answered upstream %d times", id, up.ok[id])
		}
		for _, w := range up.calls[id] {
			workers[w]++
		}
	}
	if workers["in"] != 0 || workers["w1"] == 0 || workers["w2"] == 0 {
		t.Fatalf("calls by replica: %v", workers)
	}
}

// twoWorkers starts Redis, the upstream, an ingress and workers w1, w2.
func twoWorkers(t *testing.T) (*redistest.Server, *upstream, *proc, map[string]*proc) {
	srv := redistest.Start(t)
	up := newUpstream(t)
	in := startProc(t, "ingress", queueYAML(srv.URL, up.URL, "in", ""), "ingress")
	return srv, up, in, map[string]*proc{
		"w1": startProc(t, "w1", queueYAML(srv.URL, up.URL, "w1", ""), "worker"),
		"w2": startProc(t, "w2", queueYAML(srv.URL, up.URL, "w2", ""), "worker"),
	}
}

// kill -9 of the worker serving a unary call, or a stream before its
// first token: the other worker serves it and the client gets the whole
// answer, never an error.
func TestQueueWorkerKilledMidCall(t *testing.T) {
	srv, up, in, workers := twoWorkers(t)
	for _, tc := range []struct {
		id     string
		stream bool
	}{{"unary1", false}, {"stream1", true}} {
		first, _ := killServingWorker(t, up, in, workers, tc.id, tc.stream)
		// The survivor serves the next case; restart the dead one.
		workers[first] = startProc(t, first+"b", queueYAML(srv.URL, up.URL, first, ""), "worker")
	}
}

// killServingWorker sends a slow call for id, kills (SIGKILL) the worker
// that took it, and checks the other worker's whole answer reached the
// client; it returns the two workers.
func killServingWorker(t *testing.T, up *upstream, in *proc, workers map[string]*proc, id string, stream bool) (first, second string) {
	t.Helper()
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		s, b, err := chat(context.Background(), in.URL, "m", "slow:"+id, stream)
		done <- result{s, b, err}
	}()
	first = up.waitCall(t, id, 1)
	workers[first].signal(syscall.SIGKILL)
	second = up.waitCall(t, id, 2)
	r := <-done
	if r.err != nil || r.status != 200 || content(r.body) != "answer "+id+" by "+second || second == first {
		t.Fatalf("%s: first %s second %s: %d %v %q", id, first, second, r.status, r.err, r.body)
	}
	if stream && (strings.Contains(r.body, "error") || !strings.HasSuffix(r.body, "data: [DONE]\n\n")) {
		t.Fatalf("the stream showed the crash: %q", r.body)
	}
	return first, second
}

// A worker stopped (SIGSTOP) past its lease and then resumed can neither
// publish nor complete: the answer delivered is its replacement's.
func TestQueueStoppedWorkerIsFenced(t *testing.T) {
	_, up, in, workers := twoWorkers(t)
	type result struct {
		status int
		body   string
	}
	done := make(chan result, 1)
	go func() {
		s, b, _ := chat(context.Background(), in.URL, "m", "slow:fence1", false)
		done <- result{s, b}
	}()
	first := up.waitCall(t, "fence1", 1)
	workers[first].signal(syscall.SIGSTOP)
	second := up.waitCall(t, "fence1", 2) // after the 2 s lease expired
	workers[first].signal(syscall.SIGCONT)
	r := <-done
	if r.status != 200 || content(r.body) != "answer fence1 by "+second {
		t.Fatalf("first %s second %s: %d %q", first, second, r.status, r.body)
	}
	// The resumed worker finds its lease lost when it tries to complete.
	deadline := time.Now().Add(10 * time.Second)
	for metric(t, workers[first], "switchboard_queue_lease_losses_total") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the stopped worker never counted its lost lease: %s", workers[first].logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// One redelivery over the fleet, counted by whichever reaper did it.
	if n := metric(t, in, "switchboard_queue_redeliveries_total") + metric(t, workers["w1"], "switchboard_queue_redeliveries_total") +
		metric(t, workers["w2"], "switchboard_queue_redeliveries_total"); n != 1 {
		t.Fatalf("%v redeliveries", n)
	}
}

// metric reads one unlabelled sample from p's /metrics.
func metric(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	resp, err := procClient.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	t.Fatalf("%s has no %s", p.name, name)
	return 0
}

// A job no worker can route (their config lacks the model) is refused on
// every delivery, dead-lettered after max_deliveries, and `queue dlq
// retry` runs it again once a worker that knows it is up.
func TestQueueDLQAndRetry(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t)
	full := queueYAML(srv.URL, up.URL, "in", "")
	full = strings.Replace(full, "models:\n", "models:\n  - name: z\n    providers: [{provider: a}]\n", 1)
	in := startProc(t, "ingress", full, "ingress")
	old := startProc(t, "old", queueYAML(srv.URL, up.URL, "old", ""), "worker")
	status, body, _ := chat(context.Background(), in.URL, "z", "plain:dead1", false)
	if status != 502 || !strings.Contains(body, "job_failed") {
		t.Fatalf("dead job answered %d %s", status, body)
	}
	if !strings.Contains(old.logs(), `this worker's config has no model \"z\"`) {
		t.Fatalf("the old worker did not say why: %s", old.logs())
	}
	cfgPath := filepath.Join(t.TempDir(), "cli.yaml")
	os.WriteFile(cfgPath, []byte(full), 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"queue", "dlq", "list", "--config", cfgPath}, &out, &errb); code != 0 {
		t.Fatalf("dlq list: %d %s", code, errb.String())
	}
	var dead []struct {
		ID         string `json:"id"`
		Deliveries int    `json:"deliveries"`
		Error      string `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &dead); err != nil || len(dead) != 1 || dead[0].Deliveries != 3 {
		t.Fatalf("dlq list %s: %v", out.String(), err)
	}
	if strings.Contains(out.String(), "dead1") {
		t.Fatal("the DLQ envelope shows the prompt")
	}
	old.signal(syscall.SIGKILL) // it would refuse the retried job again
	startProc(t, "new", strings.Replace(full, `X-Worker: "in"`, `X-Worker: "new"`, -1), "worker")
	out.Reset()
	if code := run([]string{"queue", "dlq", "retry", dead[0].ID, "--config", cfgPath}, &out, &errb); code != 0 {
		t.Fatalf("dlq retry: %d %s", code, errb.String())
	}
	if w := up.waitCall(t, "dead1", 1); w != "new" {
		t.Fatalf("retried by %s", w)
	}
	out.Reset()
	run([]string{"queue", "stats", "--config", cfgPath}, &out, &errb)
	if !strings.Contains(out.String(), `"dlq": 0`) {
		t.Fatalf("stats after retry: %s", out.String())
	}
}

// A client that disconnects cancels its job: the worker stops the
// upstream call within a second.
func TestQueueCancellationReachesUpstream(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t)
	in := startProc(t, "ingress", queueYAML(srv.URL, up.URL, "in", ""), "ingress")
	startProc(t, "w1", queueYAML(srv.URL, up.URL, "w1", ""), "worker")
	for _, stream := range []bool{false, true} {
		id := fmt.Sprintf("hang%v", stream)
		ctx, cancel := context.WithCancel(context.Background())
		go chat(ctx, in.URL, "m", "hang:"+id, stream)
		up.waitCall(t, id, 1)
		left := time.Now()
		cancel()
		deadline := time.Now().Add(3 * time.Second)
		for {
			up.mu.Lock()
			gone, ok := up.gone[id]
			up.mu.Unlock()
			if ok {
				if d := gone.Sub(left); d > time.Second {
					t.Fatalf("stream=%v: the upstream saw the cancellation after %v", stream, d)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stream=%v: the upstream call was never canceled", stream)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if n := metric(t, in, "switchboard_queue_cancellations_total"); n != 2 {
		t.Fatalf("%v cancellations counted", n)
	}
}

// A worker killed after stream bytes reached the client: the origin ends
// the stream with an error event and [DONE] (a stream cannot be resumed
// by another worker), and the job is not run again.
func TestQueueWorkerKilledMidStream(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t)
	in := startProc(t, "ingress", queueYAML(srv.URL, up.URL, "in", ""), "ingress")
	w1 := startProc(t, "w1", queueYAML(srv.URL, up.URL, "w1", ""), "worker")
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"partial:cut1"}]}`
	req, _ := http.NewRequest(http.MethodPost, in.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := procClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	first, _ := rd.ReadString('\n')
	if !strings.Contains(first, "first") {
		t.Fatalf("first line %q", first)
	}
	start := time.Now()
	w1.signal(syscall.SIGKILL)
	rest, _ := io.ReadAll(rd)
	if !strings.Contains(string(rest), `"error"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("after the crash: %q", rest)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the stream ended %v after the crash", d)
	}
	startProc(t, "w2", queueYAML(srv.URL, up.URL, "w2", ""), "worker")
	time.Sleep(200 * time.Millisecond) // a redelivery would call within this
	up.mu.Lock()
	defer up.mu.Unlock()
	if n := len(up.calls["cut1"]); n != 1 {
		t.Fatalf("the cut stream was run %d times", n)
	}
}

// An ingress that dies while its job runs: its origin lease expires and
// the job is canceled, so the worker stops the upstream call.
func TestQueueOriginDeathCancelsJob(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t)
	in := startProc(t, "ingress", queueYAML(srv.URL, up.URL, "in", ""), "ingress")
	startProc(t, "w1", queueYAML(srv.URL, up.URL, "w1", ""), "all")
	go chat(context.Background(), in.URL, "m", "hang:orphan1", false)
	up.waitCall(t, "orphan1", 1)
	in.signal(syscall.SIGKILL)
	deadline := time.Now().Add(8 * time.Second) // origin_lease 2 s, reaper every 400 ms
	for {
		up.mu.Lock()
		_, gone := up.gone["orphan1"]
		up.mu.Unlock()
		if gone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphaned job's upstream call was never canceled")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The queue CLI's usage and refusals.
func TestQueueCLIUsage(t *testing.T) {
	dir := t.TempDir()
	noRedis := filepath.Join(dir, "c.yaml")
	os.WriteFile(noRedis, []byte("providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\n"), 0o644)
	t.Setenv("SWITCHBOARD_REDIS_URL", "")
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"queue", "--help"}, 0, "switchboard queue dlq show|retry|drop ID"},
		{[]string{"queue"}, 2, "usage:"},
		{[]string{"queue", "frob", "--config", noRedis}, 2, "usage:"},
		{[]string{"queue", "stats", "--config", noRedis}, 1, "no redis.url"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.out) {
			t.Errorf("%v: exit %d (want %d)\n%s%s", tc.args, code, tc.code, out.String(), errb.String())
		}
	}
}

// With Redis unreachable a queue command says so in one line of its own,
// not in go-redis's raw per-dial log lines ("redis: ... pool.go:...").
func TestQueueCLIQuietWithoutRedis(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte("providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\n"+
		"redis: {url: \"redis://"+addr+"\", connect_timeout: 0.2, command_timeout: 0.2}\nqueue: {mode: redis}\n"), 0o644)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "queue", "dlq", "show", "nope", "--config", cfg)
	cmd.Env = append(os.Environ(), "SWITCHBOARD_TEST_SERVE=1", "SWITCHBOARD_REDIS_URL=")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() == 0 || strings.Contains(string(out), "pool.go") || len(out) == 0 {
		t.Fatalf("exit %v, output:\n%s", cmd.ProcessState, out)
	}
}
