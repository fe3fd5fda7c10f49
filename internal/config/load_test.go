package config

import (
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestLoadFull(t *testing.T) {
	t.Setenv("FIREWORKS_KEY", "fw-secret")
	t.Setenv("MAX_ATTEMPTS", "")        // empty: the default applies
	t.Setenv("OPENROUTER_URL", "")      // likewise
	t.Setenv("AUTH_TOKEN", "tok${X}en") // a value is expanded once, never again
	path := filepath.Join("testdata", "full.yaml")
	c, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Path != path {
		t.Errorf("Path = %q, want %q", c.Path, path)
	}

	fw := c.Providers["fireworks"]
	an := c.Providers["anthropic"]
	or := c.Providers["openrouter"]
	fake := c.Providers["fake"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"fireworks name", fw.Name, "fireworks"},
		{"fireworks type", fw.Type, TypeOpenAI},
		{"fireworks key", fw.Keys(), []string{"fw-secret"}},
		{"fireworks headers", fw.Headers, map[string]string{"X-Team": "core"}},
		{"anthropic type", an.Type, TypeAnthropic},
		{"anthropic keys", an.Keys(), []string{"key-one", "key-two"}},
		{"anthropic version", an.Headers["anthropic-version"], "2023-06-01"},
		{"openrouter url default", or.BaseURL, "https://openrouter.ai/api/v1"},
		{"mock", *fake.Mock, Mock{TTFTMs: 250, TokensPerSecond: 40.5, Tokens: 16, FailRate: 0.1, FailStatus: 500,
			FailHeaders: map[string]string{"Retry-After": "3"}, FailFirst: 2, CutAfterChunks: 5}},
		{"mock base_url", fake.BaseURL, ""},

		{"models", len(c.Models), 4},
		{"glm context", c.Model("glm-5").ContextLength, 131072},
		{"glm entry model", c.Model("glm-5").Providers[0].Model, "accounts/fireworks/routers/glm-5-fast"},
		{"glm primary", c.Model("glm-5").Primary(), 1},
		{"glm entry headers", c.Model("glm-5").Providers[1].Headers, map[string]string{"HTTP-Referer": "https://example.com"}},
		{"reasoner entry model default", c.Model("reasoner").Providers[0].Model, "reasoner"},
		{"reasoner primary default", c.Model("reasoner").Primary(), 0},
		{"unknown model", c.Model("nope"), (*Model)(nil)},

		{"ttft glm (global)", c.TTFTFor(c.Model("glm-5")), 15 * time.Second},
		{"ttft claude (false)", c.TTFTFor(c.Model("claude")), time.Duration(0)},
		{"ttft reasoner", c.TTFTFor(c.Model("reasoner")), 90 * time.Second},
		{"ttft true (global)", c.TTFTFor(c.Model("global-ttft")), 15 * time.Second},
		{"claude probing", c.ProbingFor(c.Model("claude")), false},
		{"claude auto_switch forced off", c.AutoSwitchFor(c.Model("claude")), false},
		{"glm auto_switch", c.AutoSwitchFor(c.Model("glm-5")), true},
		{"claude probe interval", c.ProbeIntervalFor(c.Model("claude")), 10},
		{"glm probe interval", c.ProbeIntervalFor(c.Model("glm-5")), 5},

		{"timeouts", c.Timeouts, Timeouts{Open: sec(10), Read: sec(120), Write: sec(45), TTFT: sec(15),
			Request: sec(120), Shutdown: Duration(500 * time.Millisecond)}},
		{"retries", c.Retries, Retries{MaxAttempts: 4, MaxRounds: 2, BackoffBase: Duration(250 * time.Millisecond), MaxBackoff: sec(30), On429: On429Pause}},
		{"logging", c.Logging, Logging{Level: "debug", Format: "json"}},
		{"tracking", c.Tracking.On(), false},
		{"tracking responses", c.Tracking.Responses, true},
		{"tps interval", *c.Metrics.TPSLog.Interval, Duration(0)},
		{"tps activity", c.Metrics.TPSLog.ActivityWindow, sec(20)},
		{"tps eval", c.Metrics.TPSLog.EvalWindow, sec(120)},
		{"tps min tokens", *c.Metrics.TPSLog.MinTokens, 0},
		{"perf", c.Performance, Performance{PrewarmConnections: true, ConnectionMaxAge: sec(300), ProbingEnabled: ptr(true), AutoSwitch: true,
			ProbeInterval: 5, ProbeMaxPerMinute: 60, SampleWindow: sec(600), ConfigPollInterval: ptr(Duration(0)),
			QuotaPauseDefaultSeconds: 120, WritePrimary: true}},
		{"auth", c.Auth, Auth{Token: "tok${X}en", MetricsToken: "scrape-only-token"}},
		{"limits", c.Limits.MaxRequestBody, int64(1 << 20)},
		{"breaker threshold", *c.Health.Breaker.Threshold, 0},
		{"breaker window", c.Health.Breaker.Window, sec(30)},
		{"breaker cooldown", c.Health.Breaker.Cooldown, sec(90)},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "minimal.yaml"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"timeouts", c.Timeouts, Timeouts{Open: sec(30), Read: sec(300), Write: sec(60), Request: sec(600), Shutdown: sec(30)}},
		{"retries", c.Retries, Retries{MaxAttempts: 3, BackoffBase: sec(2), MaxRounds: 3, MaxBackoff: sec(60), On429: On429Pause}},
		{"logging", c.Logging, Logging{Level: "info", Format: "text"}},
		{"tracking", c.Tracking.On(), true},
		{"tps", c.Metrics.TPSLog, TPSLog{Interval: ptr(sec(5)), ActivityWindow: sec(10), EvalWindow: sec(60), MinTokens: ptr(500)}},
		{"perf", c.Performance, Performance{ConnectionMaxAge: sec(300), ProbeInterval: 3, SampleWindow: sec(300), ConfigPollInterval: ptr(sec(2)), QuotaPauseDefaultSeconds: 60}},
		{"probing", c.Performance.Probing(), true},
		{"limits", c.Limits.MaxRequestBody, int64(10 << 20)},
		{"breaker", c.Health.Breaker, Breaker{Threshold: ptr(3), Window: sec(60), Cooldown: sec(60)}},
		{"provider", *c.Providers["openai"], Provider{Name: "openai", Type: TypeOpenAI, BaseURL: "https://api.openai.com/v1", APIKey: "sk-test"}},
		{"entry model", c.Models[0].Providers[0].Model, "gpt-4o"},
		{"ttft", c.TTFTFor(c.Models[0]), time.Duration(0)},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestMockDefaults(t *testing.T) {
	c, err := parse([]byte(`
providers:
  m: {type: mock}
models: [{name: x, providers: [{provider: m}]}]
`), "t.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *c.Providers["m"].Mock, (Mock{Tokens: 16, FailStatus: 500}); !reflect.DeepEqual(got, want) {
		t.Errorf("mock = %#v, want %#v", got, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "does-not-exist.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestAnchorsAndMerge(t *testing.T) {
	c, err := parse([]byte(`
providers:
  a: &base
    base_url: https://a.example/v1
    api_key: k
  b:
    <<: *base
    base_url: https://b.example/v1
models:
  - name: x
    providers: [{provider: a}, {provider: b}]
`), "t.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Providers["b"]; b.BaseURL != "https://b.example/v1" || b.APIKey != "k" {
		t.Errorf("b = %+v", b)
	}
}

func TestModelByHand(t *testing.T) {
	// Configs built in other packages' tests have no index; Model still works.
	c := &Config{Models: []*Model{{Name: "a"}, {Name: "b"}}}
	if m := c.Model("b"); m == nil || m.Name != "b" {
		t.Errorf("Model(b) = %v", m)
	}
}

func sec(n float64) Duration { return Duration(n * float64(time.Second)) }

func ptr[T any](v T) *T { return &v }

func noEnv(string) (string, bool) { return "", false }
