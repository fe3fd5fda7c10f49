package config

import (
	"errors"
	"strings"
	"testing"
)

func mapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestExpandEnv(t *testing.T) {
	env := mapEnv(map[string]string{"A": "alpha", "EMPTY": "", "N": "3"})
	tests := []struct {
		in, want, err string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha"},
		{in: "x-${A}-${N}", want: "x-alpha-3"},
		{in: "${EMPTY}", want: ""},
		{in: "${EMPTY:-d}", want: "d"},
		{in: "${UNSET:-d}", want: "d"},
		{in: "${UNSET:-}", want: ""},
		{in: "${A:-d}", want: "alpha"},
		{in: "${UNSET:-a:-b}", want: "a:-b"},
		{in: "$$", want: "$$"},
		{in: "$${A}", want: "$${A}"},
		{in: "$A and $", want: "$A and $"},
		{in: "pa$$word${A}", want: "pa$$wordalpha"},
		{in: "${UNSET}", err: "environment variable UNSET is not set"},
		{in: "${U1}${U2}", err: "environment variables U1, U2 are not set"},
		{in: "${A", err: "unterminated"},
		{in: "${1A}", err: "bad variable reference"},
		{in: "${}", err: "bad variable reference"},
		{in: "${A:-${B}}", err: "nested"},
	}
	for _, tt := range tests {
		got, err := expandEnv(tt.in, env)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("expandEnv(%q) error = %v, want %q", tt.in, err, tt.err)
			}
		case err != nil:
			t.Errorf("expandEnv(%q) error = %v", tt.in, err)
		case got != tt.want:
			t.Errorf("expandEnv(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

const envYAML = `providers:
  p:
    base_url: ${URL:-https://p.example/v1}
    api_key: "${KEY}"
models:
  - name: m
    providers: [{provider: p}]
retries:
  max_attempts: ${N:-3}
  backoff_base: ${BASE:-500ms}
`

func TestParseEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		key     string
		url     string
		n       int
		base    Duration
		wantErr string
	}{
		{name: "set", env: map[string]string{"KEY": "k", "URL": "http://x.example", "N": "7", "BASE": "1.5"},
			key: "k", url: "http://x.example", n: 7, base: sec(1.5)},
		{name: "defaults", env: map[string]string{"KEY": "k"},
			key: "k", url: "https://p.example/v1", n: 3, base: Duration(500e6)},
		{name: "missing", env: map[string]string{},
			wantErr: "t.yaml:4: providers.p.api_key: environment variable KEY is not set"},
		{name: "quoted stays a string", env: map[string]string{"KEY": "k", "N": "x"},
			wantErr: `t.yaml:9: retries.max_attempts: want an integer, got "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse([]byte(envYAML), "t.yaml", mapEnv(tt.env))
			if tt.wantErr != "" {
				var es *Errors
				if !errors.As(err, &es) || len(*es) != 1 || !strings.HasPrefix((*es)[0].Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one error starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := c.Providers["p"]
			if p.APIKey != tt.key || p.BaseURL != tt.url || c.Retries.MaxAttempts != tt.n || c.Retries.BackoffBase != tt.base {
				t.Errorf("got key=%q url=%q n=%d base=%s", p.APIKey, p.BaseURL, c.Retries.MaxAttempts, c.Retries.BackoffBase)
			}
		})
	}
}

func TestParseEnvProcess(t *testing.T) {
	t.Setenv("SWITCHBOARD_TEST_KEY", "from-env")
	c, err := Parse([]byte(strings.Replace(envYAML, "${KEY}", "${SWITCHBOARD_TEST_KEY}", 1)), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Providers["p"].APIKey; got != "from-env" {
		t.Errorf("api_key = %q", got)
	}
}

// A quoted number stays a string, so an int field rejects it even when the
// number came from the environment.
func TestQuotedEnvInt(t *testing.T) {
	y := strings.Replace(envYAML, "${N:-3}", `"${N:-3}"`, 1)
	_, err := parse([]byte(y), "t.yaml", mapEnv(map[string]string{"KEY": "k"}))
	if err == nil || !strings.Contains(err.Error(), `t.yaml:9: retries.max_attempts: want an integer, got "3" (a quoted string; remove the quotes)`) {
		t.Fatalf("err = %v", err)
	}
}
