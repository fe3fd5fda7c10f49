//go:build containers

package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hostNetwork is what netavark changes on the host when compose's bridge
// network comes up: IPv4 forwarding and iptables rules. The compose test
// puts both back as they were (the issue: leave the host as found).
type hostNetwork struct {
	forward string
	tables  map[string]string // "iptables"/"ip6tables" -> iptables-save output
}

func snapshotHostNetwork(t *testing.T) hostNetwork {
	t.Helper()
	fw, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	h := hostNetwork{forward: strings.TrimSpace(string(fw)), tables: map[string]string{}}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		if out, err := exec.Command(cmd + "-save").Output(); err == nil {
			h.tables[cmd] = string(out)
		}
	}
	return h
}

// rules is iptables-save output without comments, counters, empty tables
// and builtin chains at their ACCEPT default: what a change would show.
func rules(dump string) string {
	var out []string
	table := ""
	for _, l := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l
		case strings.HasPrefix(l, "-A"):
			out = append(out, table+" "+l)
		case strings.HasPrefix(l, ":"):
			f := strings.Fields(l)
			if len(f) >= 2 && f[1] != "ACCEPT" {
				out = append(out, table+" "+f[0]+" "+f[1])
			}
		}
	}
	return strings.Join(out, "\n")
}

// restore puts forwarding and the iptables rules back, then checks that
// they are as found.
func (h hostNetwork) restore(t *testing.T) {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(h.forward), 0o644); err != nil {
		t.Errorf("restoring ip_forward: %v", err)
	}
	for cmd, before := range h.tables {
		now, err := exec.Command(cmd + "-save").Output()
		if err != nil || rules(string(now)) == rules(before) {
			continue
		}
		// Tables that were empty are flushed; the others restored whole.
		for _, l := range strings.Split(string(now), "\n") {
			if tbl, ok := strings.CutPrefix(l, "*"); ok && !strings.Contains(before, "\n*"+tbl+"\n") && !strings.HasPrefix(before, "*"+tbl+"\n") {
				exec.Command(cmd, "-t", tbl, "-F").Run()
				exec.Command(cmd, "-t", tbl, "-X").Run()
			}
		}
		if strings.TrimSpace(before) != "" {
			r := exec.Command(cmd + "-restore")
			r.Stdin = strings.NewReader(before)
			if out, err := r.CombinedOutput(); err != nil {
				t.Errorf("%s-restore: %v: %s", cmd, err, out)
			}
		}
		if after, _ := exec.Command(cmd + "-save").Output(); rules(string(after)) != rules(before) {
			t.Errorf("%s rules differ from before the test:\nbefore:\n%s\nafter:\n%s", cmd, rules(before), rules(string(after)))
		}
	}
	if fw, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); strings.TrimSpace(string(fw)) != h.forward {
		t.Errorf("ip_forward is %s, was %s", fw, h.forward)
	}
}

// redisImage makes a Redis image from the host's redis-server (CI cannot
// pull redis:7-alpine), run the way the official image runs it.
func redisImage(t *testing.T, p *Podman) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "redis-server is not installed (its binary becomes the compose test's Redis image)")
	}
	ref := fmt.Sprintf("localhost/switchboard-citest-redis:%d", os.Getpid())
	p.importRootfs(t, ref, map[string]string{"/usr/bin/redis-server": bin},
		"ENV PATH=/usr/bin", `CMD ["redis-server", "--protected-mode", "no", "--save", "", "--appendonly", "no"]`)
	t.Cleanup(func() { p.quiet("rmi", "-f", ref) })
	return ref
}

// prometheusImage makes a Prometheus image from the host's binary (Debian's
// prometheus package), laid out like prom/prometheus: /bin/prometheus as
// the entrypoint, /prometheus for its storage.
func prometheusImage(t *testing.T, p *Podman) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		unavailable(t, "prometheus is not installed (Debian package prometheus)")
	}
	ref := fmt.Sprintf("localhost/switchboard-citest-prometheus:%d", os.Getpid())
	p.importRootfs(t, ref, map[string]string{"/bin/prometheus": bin, "/prometheus": "", "/etc/prometheus": ""},
		`ENTRYPOINT ["/bin/prometheus"]`, "WORKDIR /prometheus")
	t.Cleanup(func() { p.quiet("rmi", "-f", ref) })
	return ref
}

// The fleet of compose.yaml, run as users run it (podman-compose up on
// the compose network, published ports), minus Grafana, whose image CI
// cannot pull: Redis, three replicas, the queue's ingress and two workers,
// Prometheus (Redis and Prometheus from the host's binaries). A request
// through the ingress is served by a worker; a burst over the three
// replicas is held to one shared RPM limit; Prometheus scrapes all six
// gateways with the token and has loaded the alert rules.
func TestCompose(t *testing.T) {
	p := needPodman(t)
	if _, err := exec.LookPath("podman-compose"); err != nil {
		unavailable(t, "podman-compose is not installed")
	}
	ref := buildImage(t, p)
	redis := redisImage(t, p)
	prom := prometheusImage(t, p)

	project := fmt.Sprintf("sbcitest%d", os.Getpid())
	ports := map[string]int{}
	env := append([]string{}, p.env...)
	env = append(env, "SWITCHBOARD_IMAGE="+ref, "REDIS_IMAGE="+redis, "PROMETHEUS_IMAGE="+prom)
	for _, k := range []string{"SWITCHBOARD_PORT_1", "SWITCHBOARD_PORT_2", "SWITCHBOARD_PORT_3", "SWITCHBOARD_PORT_INGRESS", "PROMETHEUS_PORT"} {
		ports[k] = freePort(t)
		env = append(env, fmt.Sprintf("%s=%d", k, ports[k]))
	}
	compose := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		args = append([]string{"-p", project, "-f", "compose.yaml"}, args...)
		t.Logf("$ podman-compose %s", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, "podman-compose", args...)
		cmd.Dir, cmd.Env = root, env
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// One compose test at a time on a machine: another's restore of the
	// host's rules would cut this one's published ports.
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "switchboard-compose-test.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() }) // closing releases the lock, after the restore below

	volumesBefore := map[string]bool{}
	for _, v := range strings.Fields(p.must(t, time.Minute, "volume", "ls", "-q")) {
		volumesBefore[v] = true
	}
	host := snapshotHostNetwork(t)
	t.Cleanup(func() {
		if out, err := compose(2*time.Minute, "down", "-t", "10"); err != nil {
			t.Errorf("podman-compose down: %v\n%s", err, tail(out, 2000))
		}
		p.quiet("network", "rm", "-f", project+"_default")
		for _, v := range strings.Fields(p.must(t, time.Minute, "volume", "ls", "-q")) {
			if !volumesBefore[v] {
				p.quiet("volume", "rm", "-f", v)
			}
		}
		host.restore(t)
	})
	services := []string{"redis", "switchboard-1", "switchboard-2", "switchboard-3", "ingress", "worker", "prometheus"}
	if out, err := compose(3*time.Minute, append([]string{"up", "-d", "--no-build"}, services...)...); err != nil {
		t.Fatalf("podman-compose up: %v\n%s", err, tail(out, 4000))
	}
	replicas := []string{"SWITCHBOARD_PORT_1", "SWITCHBOARD_PORT_2", "SWITCHBOARD_PORT_3"}
	for _, k := range append(replicas, "SWITCHBOARD_PORT_INGRESS") {
		waitHealthy(t, fmt.Sprintf("http://127.0.0.1:%d/health", ports[k]))
	}
	if out, _ := compose(time.Minute, "ps"); strings.Count(out, project+"_") < 8 {
		t.Fatalf("want 8 containers (redis, 3 replicas, ingress, 2 workers, prometheus):\n%s", out)
	}

	const key, rpm = "sk-compose-demo", 30 // deploy/compose/config.yaml
	post := func(port int) (int, http.Header) {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", port),
			strings.NewReader(`{"model":"demo-fast","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		c := &http.Client{Timeout: 60 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("request to :%d: %v", port, err)
			return 0, nil
		}
		defer resp.Body.Close()
		readAll(resp.Body)
		return resp.StatusCode, resp.Header
	}

	start := time.Now()
	// Through the ingress: the job runs on a worker, over Redis.
	if code, _ := post(ports["SWITCHBOARD_PORT_INGRESS"]); code != 200 {
		t.Fatalf("request through the ingress: %d", code)
	}

	// A burst of 1.5x the tenant's RPM spread over the three replicas: with
	// the limit shared through Redis about rpm pass in all (not rpm each).
	var mu sync.Mutex
	codes := map[int]int{}
	perReplica := map[string]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 9)
	for i := range rpm * 3 / 2 {
		wg.Add(1)
		sem <- struct{}{}
		go func(k string) {
			defer wg.Done()
			defer func() { <-sem }()
			code, _ := post(ports[k])
			mu.Lock()
			codes[code]++
			if code == 200 {
				perReplica[k]++
			}
			mu.Unlock()
		}(replicas[i%3])
	}
	wg.Wait()
	elapsed := time.Since(start)
	// The bucket refills at rpm/60 a second while the burst runs.
	ok := codes[200] + 1 // the ingress request counted too
	most := rpm + int(elapsed.Seconds()*rpm/60) + 1
	t.Logf("burst of %d over 3 replicas in %s: %v (per replica 200s %v)", rpm*3/2, elapsed.Round(time.Millisecond), codes, perReplica)
	if ok < rpm || ok > most || codes[429] == 0 || codes[200]+codes[429] != rpm*3/2 {
		t.Fatalf("with %d RPM shared by the fleet want %d..%d answered in all and the rest 429, got %v", rpm, rpm, most, codes)
	}
	if len(perReplica) != 3 {
		t.Errorf("every replica should have served part of the burst: %v", perReplica)
	}

	t.Run("Prometheus scrapes the fleet and loads the alerts", func(t *testing.T) {
		api := fmt.Sprintf("http://127.0.0.1:%d/api/v1/", ports["PROMETHEUS_PORT"])
		// Scrapes come every scrape_interval (15 s): wait for all six up.
		var up []string
		deadline := time.Now().Add(90 * time.Second)
		for {
			var r struct {
				Data struct {
					ActiveTargets []struct {
						Health    string
						LastError string `json:"lastError"`
						ScrapeURL string `json:"scrapeUrl"`
					} `json:"activeTargets"`
				}
			}
			getJSON(t, api+"targets", &r)
			up = up[:0]
			var errs []string
			for _, tg := range r.Data.ActiveTargets {
				if tg.Health == "up" {
					up = append(up, tg.ScrapeURL)
				} else {
					errs = append(errs, tg.ScrapeURL+": "+tg.Health+" "+tg.LastError)
				}
			}
			if len(up) == 6 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("targets up %v; others: %v", up, errs)
			}
			time.Sleep(time.Second)
		}
		var q struct {
			Data struct {
				Result []struct{ Value []any }
			}
		}
		getJSON(t, api+"query?query=switchboard_redis_up", &q)
		if len(q.Data.Result) != 6 {
			t.Errorf("switchboard_redis_up from %d gateways, want 6", len(q.Data.Result))
		}
		for _, r := range q.Data.Result {
			if len(r.Value) != 2 || r.Value[1] != "1" {
				t.Errorf("a gateway reports switchboard_redis_up %v", r.Value)
			}
		}
		var rules struct {
			Data struct {
				Groups []struct {
					Rules []struct{ Name, Health, Type string }
				}
			}
		}
		getJSON(t, api+"rules", &rules)
		n := 0
		for _, g := range rules.Data.Groups {
			for _, r := range g.Rules {
				if r.Type == "alerting" && r.Health != "err" {
					n++
				}
			}
		}
		if want := len(readAlerts(t).Groups[0].Rules); n != want {
			t.Errorf("Prometheus loaded %d alerting rules, alerts.yml has %d", n, want)
		}
	})
}

// getJSON decodes a Prometheus API answer into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
}
