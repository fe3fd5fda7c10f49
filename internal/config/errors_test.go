package config

import (
	"errors"
	"strings"
	"testing"
)

// Each case lists every expected error as "file:line: field" plus a piece
// of its message; the config must yield exactly those, in that order.
func TestErrors(t *testing.T) {
	type want struct{ at, msg string }
	tests := []struct {
		name string
		yaml string
		want []want
	}{
		{"unknown top-level field", minimal + "retry:\n  max_attempts: 3\n",
			[]want{{"t.yaml:7: retry", "unknown field (known: providers, models, timeouts"}}},
		{"unknown nested field", minimal + "retries:\n  max_attempt: 3\n",
			[]want{{"t.yaml:8: retries.max_attempt", "unknown field (known: max_attempts, backoff_base, max_rounds, max_backoff, on_429)"}}},
		{"unknown field in model provider entry", `providers:
  p: {base_url: "https://p.example", api_key: k}
models:
  - name: m
    providers:
      - provider: p
        priority: 2
`, []want{{"t.yaml:7: models[0].providers[0].priority", "unknown field (known: provider, model, primary, headers, weight)"}}},
		{"unknown field in provider", `providers:
  p:
    base_url: "https://p.example"
    apikey: k
models: [{name: m, providers: [{provider: p}]}]
`, []want{
			{"t.yaml:4: providers.p.apikey", "unknown field"},
		}},
		{"hosted types need a key", `providers:
  p:
    type: anthropic
    base_url: "https://p.example"
models: [{name: m, providers: [{provider: p}]}]
`, []want{
			{"t.yaml:2: providers.p.api_key", "required for type anthropic"},
		}},
		{"wrong type int", minimal + "retries:\n  max_attempts: three\n",
			[]want{{"t.yaml:8: retries.max_attempts", `want an integer, got "three"`}}},
		{"fraction for int", minimal + "retries:\n  max_rounds: 2.5\n",
			[]want{{"t.yaml:8: retries.max_rounds", `want an integer, got "2.5"`}}},
		{"wrong type bool", minimal + "tracking:\n  enabled: yes\n",
			[]want{{"t.yaml:8: tracking.enabled", `want true or false, got "yes"`}}},
		{"wrong type section", minimal + "timeouts: 30\n",
			[]want{{"t.yaml:7: timeouts", "want a mapping, got \"30\""}}},
		{"wrong type list", minimal + "providers2: x\n",
			[]want{{"t.yaml:7: providers2", "unknown field"}}},
		{"models not a list", "providers:\n  p: {base_url: \"https://p.example\", api_key: k}\nmodels:\n  m: {}\n",
			[]want{{"t.yaml:4: models", "want a list, got a mapping"}}},
		{"bad duration", minimal + "timeouts:\n  read: soon\n",
			[]want{{"t.yaml:8: timeouts.read", `want seconds or a duration such as "500ms", got "soon"`}}},
		{"bad ttft_timeout", `providers:
  p: {base_url: "https://p.example", api_key: k}
models:
  - name: m
    ttft_timeout: never
    providers: [{provider: p}]
`, []want{{"t.yaml:5: models[0].ttft_timeout", "or false"}}},
		{"out of range", minimal + "retries:\n  max_attempts: 11\n  backoff_base: 0\nlimits:\n  max_request_body: 100\n",
			[]want{
				{"t.yaml:8: retries.max_attempts", "must be between 1 and 10, got 11"},
				{"t.yaml:9: retries.backoff_base", "must be greater than 0 and at most 60s, got 0s"},
				{"t.yaml:11: limits.max_request_body", "must be between 1024 and 104857600, got 100"},
			}},
		{"negative duration", minimal + "timeouts:\n  open: -1\n",
			[]want{{"t.yaml:8: timeouts.open", "must be between 1s and 86400s, got -1s"}}},
		{"ttft below 1s", minimal + "timeouts:\n  ttft: 0.5\n",
			[]want{{"t.yaml:8: timeouts.ttft", "must be between 1s and 86400s, got 500ms"}}},
		{"model ttft_timeout zero", `providers:
  p: {base_url: "https://p.example", api_key: k}
models:
  - name: m
    ttft_timeout: 0
    providers: [{provider: p}]
`, []want{{"t.yaml:5: models[0].ttft_timeout", "use false to disable"}}},
		{"ranges elsewhere", minimal + `performance:
  probe_interval: 0
  probe_max_per_minute: 10001
  quota_pause_default_seconds: 0
metrics:
  tps_log:
    interval: 3601
    min_tokens: -1
health:
  breaker:
    threshold: 1001
    cooldown: 0
logging:
  level: verbose
  format: xml
`, []want{
			{"t.yaml:8: performance.probe_interval", "between 1 and 100000"},
			{"t.yaml:9: performance.probe_max_per_minute", "between 0 and 10000"},
			{"t.yaml:10: performance.quota_pause_default_seconds", "between 1 and 86400"},
			{"t.yaml:13: metrics.tps_log.interval", "between 0s and 3600s"},
			{"t.yaml:14: metrics.tps_log.min_tokens", "between 0 and 1000000000"},
			{"t.yaml:17: health.breaker.threshold", "between 0 and 1000"},
			{"t.yaml:18: health.breaker.cooldown", "between 1ms and 86400s"},
			{"t.yaml:20: logging.level", `must be one of debug, info, warn, error, got "verbose"`},
			{"t.yaml:21: logging.format", `must be one of text, json, got "xml"`},
		}},
		{"backoff above max_backoff", minimal + "retries:\n  backoff_base: 10\n  max_backoff: 5\n",
			[]want{{"t.yaml:9: retries.max_backoff", "must not be less than retries.backoff_base (10s)"}}},
		{"request shorter than ttft", minimal + "timeouts:\n  ttft: 60\n  request: 30\n",
			[]want{{"t.yaml:9: timeouts.request", "must not be shorter than timeouts.ttft (1m0s)"}}},
		{"ttft above default request", minimal + "timeouts:\n  ttft: 700\n",
			[]want{{"t.yaml:8: timeouts.ttft", "must not exceed timeouts.request (10m0s, the default)"}}},
		{"unknown provider reference", `providers:
  b: {base_url: "https://b.example", api_key: k}
  a: {base_url: "https://a.example", api_key: k}
models:
  - name: m
    providers:
      - provider: a
  - name: n
    providers:
      - provider: c
`, []want{{"t.yaml:10: models[1].providers[0].provider", `unknown provider "c" (known: a, b)`}}},
		{"duplicate model", minimal + "  - name: m\n    providers: [{provider: p}]\n",
			[]want{{"t.yaml:7: models[1].name", `duplicate model name "m" (first at line 4)`}}},
		{"missing base_url", `providers:
  p:
    api_key: k
models: [{name: m, providers: [{provider: p}]}]
`, []want{{"t.yaml:2: providers.p.base_url", "required"}}},
		{"bad url", `providers:
  p:
    base_url: "ftp://p.example"
    api_key: k
  q:
    base_url: "https://"
    api_key: k
models: [{name: m, providers: [{provider: p}, {provider: q}]}]
`, []want{
			{"t.yaml:3: providers.p.base_url", `want an http:// or https:// URL with a host, got "ftp://p.example"`},
			{"t.yaml:6: providers.q.base_url", "URL with a host"},
		}},
		{"provider rules", `providers:
  p:
    type: grpc
    base_url: "https://p.example"
    api_key: k
  q:
    base_url: "https://q.example"
    api_keys: ["", k2]
    headers:
      "Bad Header": x
      X-Ok: "a\r\nInjected: 1"
    mock:
      tokens: 3
models: [{name: m, providers: [{provider: p}, {provider: q}]}]
`, []want{
			{"t.yaml:3: providers.p.type", `must be one of openai, anthropic, gemini, mock, azure, bedrock, vertex, got "grpc"`},
			{"t.yaml:8: providers.q.api_keys[0]", "must not be empty"},
			{"t.yaml:10: providers.q.headers.Bad Header", `invalid header name "Bad Header"`},
			{"t.yaml:11: providers.q.headers.X-Ok", "must not contain CR, LF or NUL"},
			{"t.yaml:12: providers.q.mock", `only allowed with type: mock (type is "openai")`},
		}},
		{"mock ranges", `providers:
  m:
    type: mock
    mock:
      ttft_ms: -1
      tokens_per_second: 2e6
      tokens: 0
      fail_rate: 1.5
      fail_status: 200
      fail_first: -1
      cut_after_chunks: -2
models: [{name: x, providers: [{provider: m}]}]
`, []want{
			{"t.yaml:5: providers.m.mock.ttft_ms", "between 0 and 600000"},
			{"t.yaml:6: providers.m.mock.tokens_per_second", "between 0 and 1e+06"},
			{"t.yaml:7: providers.m.mock.tokens", "between 1 and 100000"},
			{"t.yaml:8: providers.m.mock.fail_rate", "between 0 and 1, got 1.5"},
			{"t.yaml:9: providers.m.mock.fail_status", "between 400 and 599"},
			{"t.yaml:10: providers.m.mock.fail_first", "must not be negative"},
			{"t.yaml:11: providers.m.mock.cut_after_chunks", "must not be negative"},
		}},
		{"model rules", `providers:
  p: {base_url: "https://p.example", api_key: k}
  q: {base_url: "https://q.example", api_key: k}
models:
  - context_length: -1
    probe_interval: 0
    providers:
      - provider: p
        primary: true
      - provider: q
        primary: true
      - provider: p
        model: ""
        headers: {"X:Y": v}
  - name: empty
  - name: nil-list
    providers: []
`, []want{
			{"t.yaml:5: models[0].name", "required"},
			{"t.yaml:5: models[0].context_length", "must not be negative"},
			{"t.yaml:6: models[0].probe_interval", "between 1 and 100000"},
			{"t.yaml:11: models[0].providers[1].primary", "providers[0] of this model is already primary"},
			{"t.yaml:12: models[0].providers[2].provider", `provider "p" is already listed at providers[0]`},
			{"t.yaml:13: models[0].providers[2].model", "must not be empty"},
			{"t.yaml:14: models[0].providers[2].headers.X:Y", "invalid header name"},
			{"t.yaml:15: models[1].providers", "at least one provider is required"},
			{"t.yaml:17: models[2].providers", "at least one provider is required"},
		}},
		{"no models", "providers:\n  p: {base_url: \"https://p.example\", api_key: k}\n",
			[]want{{"t.yaml:1: models", "at least one model is required"}}},
		{"empty file", "",
			[]want{{"t.yaml:1: models", "at least one model is required"}}},
		{"duplicate key", minimal + "retries:\n  max_rounds: 2\n  max_rounds: 3\n",
			[]want{{"t.yaml:9: retries.max_rounds", "duplicate key (first at line 8)"}}},
		{"syntax error", "providers:\n  p: [\n", []want{{"t.yaml:2", "did not find expected node content"}}},
		{"two documents", minimal + "---\nmodels: []\n", []want{{"t.yaml:7", "only one YAML document"}}},
		{"not a mapping", "- a\n- b\n", []want{{"t.yaml:1", "want a mapping, got a list"}}},
		{"several errors together", `providers:
  p:
    base_url: "not a url"
    api_key: ${MISSING_KEY}
    colour: blue
models:
  - name: m
    providers:
      - provider: nope
retries:
  max_attempts: 0
  max_rounds: many
timeouts:
  open: 2 minutes
`, []want{
			{"t.yaml:3: providers.p.base_url", "URL with a host"},
			{"t.yaml:4: providers.p.api_key", "environment variable MISSING_KEY is not set"},
			{"t.yaml:5: providers.p.colour", "unknown field"},
			{"t.yaml:9: models[0].providers[0].provider", `unknown provider "nope" (known: p)`},
			{"t.yaml:11: retries.max_attempts", "must be between 1 and 10, got 0"},
			{"t.yaml:12: retries.max_rounds", `want an integer, got "many"`},
			{"t.yaml:14: timeouts.open", `want seconds or a duration such as "500ms", got "2 minutes"`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse([]byte(tt.yaml), "t.yaml", noEnv)
			if err == nil {
				t.Fatalf("no error; config %+v", c)
			}
			if c != nil {
				t.Errorf("config returned together with errors")
			}
			var es *Errors
			if !errors.As(err, &es) {
				t.Fatalf("err is %T, want *Errors: %v", err, err)
			}
			lines := strings.Split(err.Error(), "\n")
			hint := 0 // one closing line explains unset variables
			if strings.Contains(err.Error(), "is not set") {
				hint = 1
				if last := lines[len(lines)-1]; !strings.Contains(last, "${") || !strings.Contains(last, "export") {
					t.Errorf("no one-line hint for unset variables: %q", last)
				}
			}
			if len(lines) != len(*es)+hint {
				t.Errorf("Error() has %d lines for %d errors", len(lines), len(*es))
			}
			if len(*es) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(*es), len(tt.want), err)
			}
			for i, w := range tt.want {
				got := (*es)[i].Error()
				if !strings.HasPrefix(got, w.at+": ") || !strings.Contains(got, w.msg) {
					t.Errorf("error %d = %q\nwant prefix %q containing %q", i, got, w.at+": ", w.msg)
				}
			}
		})
	}
}

func TestFieldErrorFormat(t *testing.T) {
	tests := []struct {
		e    FieldError
		want string
	}{
		{FieldError{File: "c.yaml", Line: 3, Field: "retries.max_attempts", Msg: "bad"}, "c.yaml:3: retries.max_attempts: bad"},
		{FieldError{File: "c.yaml", Line: 3, Msg: "bad"}, "c.yaml:3: bad"},
		{FieldError{Line: 1, Field: "models", Msg: "bad"}, "<config>:1: models: bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
	var fe *FieldError
	if err := error(Errors{&tests[0].e}); !errors.As(err, &fe) || fe.Line != 3 {
		t.Errorf("errors.As through Errors failed")
	}
}
