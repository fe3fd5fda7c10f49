package main

import (
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
)

// SIGHUP and SIGUSR1 reload the config even with file watching off
// (config_poll_interval 0); a change that needs a restart is named in the
// log.
func TestSignalsReloadAndNameRestartFields(t *testing.T) {
	base := "providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\nperformance: {config_poll_interval: 0}\n"
	p := startProc(t, "signals", base, "")
	cfg := configPathOf(t, p)
	for i, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGUSR1} {
		model := []string{"m2", "m3"}[i]
		next := strings.Replace(base, "models:\n", "models:\n  - name: "+model+"\n    providers: [{provider: a}]\n", 1)
		if i == 1 {
			next += "logging: {format: json}\n" // read at start only
		}
		if err := os.WriteFile(cfg, []byte(next), 0o600); err != nil {
			t.Fatal(err)
		}
		p.signal(sig)
		// The signal's name is the reload's trigger in the log.
		waitLog(t, p, map[syscall.Signal]string{syscall.SIGHUP: "trigger=hangup", syscall.SIGUSR1: `trigger="user defined signal 1"`}[sig])
		resp, err := procClient.Get(p.URL + "/v1/models/" + model)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("after %v, %s: %d %s", sig, model, resp.StatusCode, b)
		}
	}
	waitLog(t, p, "take effect only after a restart")
	if !strings.Contains(p.logs(), "logging.format") {
		t.Fatalf("the restart warning does not name logging.format:\n%s", p.logs())
	}
}
