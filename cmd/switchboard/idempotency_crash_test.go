package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchboard/internal/store/redistest"
)

// keyed posts a chat request with an Idempotency-Key.
func keyed(t *testing.T, url, key, prompt string) (status int, body string, replayed bool) {
	t.Helper()
	status, body, replayed, err := keyedErr(url, key, prompt)
	if err != nil {
		t.Fatalf("keyed request: %v", err)
	}
	return status, body, replayed
}

func keyedErr(url, key, prompt string) (status int, body string, replayed bool, err error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}]}`, prompt)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := procClient.Do(req)
	if err != nil {
		return 0, "", false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true", nil
}

// Issue 27, item 2: a gateway killed (kill -9) with a keyed request in
// flight leaves its claim behind. The claim is a lease its owner renews,
// so a retry runs within seconds: on another replica sharing Redis (the
// lease lapses), and on the same gateway restarted on its SQLite file
// (the dead process's claims are dropped at open). Before, every retry
// waited timeouts.request and got 409 for about ten minutes.
func TestIdempotencyClaimDiesWithItsOwner(t *testing.T) {
	up := newUpstream(t)
	base := fmt.Sprintf(`providers:
  a: {base_url: "%s/a/v1", api_key: k}
models:
  - name: m
    providers: [{provider: a}]
performance: {probing_enabled: false, config_poll_interval: 0}
timeouts: {request: 20s}
idempotency: {lease: 1s}
`, up.URL)

	t.Run("fleet", func(t *testing.T) {
		srv := redistest.Start(t)
		yaml := base + fmt.Sprintf("redis: {url: %q, command_timeout: 2s}\n", srv.URL)
		g1, g2 := startProc(t, "g1", yaml, ""), startProc(t, "g2", yaml, "")
		go keyedErr(g1.URL, "order-1", "hangonce:fleet1") // its gateway dies
		up.waitCall(t, "fleet1", 1)
		g1.signal(syscall.SIGKILL)
		start := time.Now()
		status, body, _ := keyed(t, g2.URL, "order-1", "hangonce:fleet1")
		if status != 200 || content(body) != "answer fleet1 by " {
			t.Fatalf("the retry after the crash: %d %s", status, body)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the retry ran after %s", d)
		}
		if status, _, replayed := keyed(t, g2.URL, "order-1", "hangonce:fleet1"); status != 200 || !replayed {
			t.Fatalf("the next retry is not a replay: %d", status)
		}
	})

	t.Run("restart", func(t *testing.T) {
		dir := t.TempDir()
		g := launchProc(t, "g", base, dir)
		g.waitListening(t)
		go keyedErr(g.URL, "order-2", "hangonce:restart1") // its gateway dies
		up.waitCall(t, "restart1", 1)
		g.signal(syscall.SIGKILL)
		g = launchProc(t, "g-again", base, dir)
		g.waitListening(t)
		start := time.Now()
		status, body, _ := keyed(t, g.URL, "order-2", "hangonce:restart1")
		if status != 200 || content(body) != "answer restart1 by " || time.Since(start) > 5*time.Second {
			t.Fatalf("the retry after the restart: %d after %s: %s", status, time.Since(start), body)
		}
	})
}
