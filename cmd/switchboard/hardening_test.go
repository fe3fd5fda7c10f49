package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Secrets in a broken config are never printed: not by check, not in the
// "reload refused" log line of a running gateway.
func TestConfigErrorsHideSecrets(t *testing.T) {
	secrets := []string{"SECRET-KEY-LIST-1", "pa55w0rd-xyz", "sk-dangling-secret", "SECRET-TOKEN-77", "hdr-secret-99"}
	bad := `providers:
  a:
    type: openai
    base_url: https://user:pa55w0rd-xyz@api.example.com:bad/v1
    api_keys: "SECRET-KEY-LIST-1"
  b:
    type: openai
    base_url: https://api.example.com/v1
    api_key: "sk-dangling-secret${"
    headers: {Authorization: [hdr-secret-99]}
models:
  - name: m
    providers: [{provider: a}]
auth:
  token: [SECRET-TOKEN-77]
`
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check", path}, &out, &errb); code != 1 {
		t.Fatalf("check exit %d: %s", code, errb.String())
	}
	for _, field := range []string{"providers.a.base_url", "providers.a.api_keys", "providers.b.api_key", "auth.token", "providers.b.headers.Authorization"} {
		if !strings.Contains(errb.String(), field) {
			t.Errorf("check does not name %s:\n%s", field, errb.String())
		}
	}
	for _, s := range secrets {
		if strings.Contains(errb.String(), s) {
			t.Errorf("check printed the secret %q:\n%s", s, errb.String())
		}
	}

	// The same file arriving by hot reload is refused without printing them.
	p := startProc(t, "reload", "providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\nperformance: {config_poll_interval: 0.1}\n", "")
	cfg := configPathOf(t, p)
	if err := os.WriteFile(cfg, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, "config reload refused")
	for _, s := range secrets {
		if strings.Contains(p.logs(), s) {
			t.Errorf("the reload log printed the secret %q:\n%s", s, p.logs())
		}
	}
}

// Moving auth.keys_file to another file by hot reload moves the watch too:
// revoking a key in the new file takes effect without another reload.
func TestKeysFileWatchFollowsItsPath(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p+".tmp", []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil { // as editors save
			t.Fatal(err)
		}
		return p
	}
	k1 := write("keys1.json", `{"sk-one-111": {"tenant": "a"}}`)
	write("keys2.json", `{"sk-two-222": {"tenant": "b"}, "sk-three-333": {"tenant": "c"}}`)
	yaml := func(keys string) string {
		return fmt.Sprintf("providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\nperformance: {config_poll_interval: 0.1}\nauth:\n  keys_file: %s\n", keys)
	}
	p := startProc(t, "keys", yaml(k1), "")
	status := func(key string) int {
		req, _ := http.NewRequest(http.MethodGet, p.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if cond() {
				return
			}
		}
		t.Fatalf("%s: not within 10 s; logs:\n%s", what, p.logs())
	}
	if status("sk-one-111") != 200 || status("sk-three-333") != 401 {
		t.Fatal("initial keys not in force")
	}
	if err := os.WriteFile(configPathOf(t, p), []byte(yaml(filepath.Join(dir, "keys2.json"))), 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil("the moved keys file is in force", func() bool { return status("sk-three-333") == 200 })
	write("keys2.json", `{"sk-two-222": {"tenant": "b"}}`)
	waitUntil("a key revoked in the moved file is refused", func() bool { return status("sk-three-333") == 401 })
	if status("sk-two-222") != 200 || status("sk-one-111") != 401 {
		t.Fatal("keys after the revocation are wrong")
	}
}

// configPathOf is the config file startProc wrote for p.
func configPathOf(t *testing.T, p *proc) string {
	t.Helper()
	for i, a := range p.cmd.Args {
		if a == "--config" && i+1 < len(p.cmd.Args) {
			return p.cmd.Args[i+1]
		}
	}
	t.Fatal("no --config")
	return ""
}

func waitLog(t *testing.T, p *proc, s string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(p.logs(), s) {
			return
		}
	}
	t.Fatalf("log never said %q:\n%s", s, p.logs())
}
