package config

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestDurationUnmarshal(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{in: "2", want: 2 * time.Second},
		{in: "0", want: 0},
		{in: "0.5", want: 500 * time.Millisecond},
		{in: "1.25", want: 1250 * time.Millisecond},
		{in: "-3", want: -3 * time.Second}, // parses; validation rejects it
		{in: `"500ms"`, want: 500 * time.Millisecond},
		{in: "2m", want: 2 * time.Minute},
		{in: "1h30m", want: 90 * time.Minute},
		{in: `"30"`, want: 30 * time.Second},
		{in: "abc", err: true},
		{in: "true", err: true},
		{in: "1e30", err: true},
		{in: ".nan", err: true},
		{in: "[1]", err: true},
		{in: "{a: 1}", err: true},
	}
	for _, tt := range tests {
		var d Duration
		err := yaml.Unmarshal([]byte(tt.in), &d)
		switch {
		case tt.err && err == nil:
			t.Errorf("%s: got %s, want error", tt.in, d)
		case !tt.err && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case !tt.err && d.D() != tt.want:
			t.Errorf("%s: got %s, want %s", tt.in, d, tt.want)
		}
	}
}

func TestToggleUnmarshal(t *testing.T) {
	tests := []struct {
		in   string
		want Toggle
		err  bool
	}{
		{in: "false", want: Toggle{Disabled: true}},
		{in: "true", want: Toggle{}},
		{in: "15", want: Toggle{Value: sec(15)}},
		{in: "2.5", want: Toggle{Value: sec(2.5)}},
		{in: "1m", want: Toggle{Value: sec(60)}},
		{in: "off", err: true},
	}
	for _, tt := range tests {
		var got Toggle
		err := yaml.Unmarshal([]byte(tt.in), &got)
		switch {
		case tt.err && err == nil:
			t.Errorf("%s: got %+v, want error", tt.in, got)
		case !tt.err && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case !tt.err && got != tt.want:
			t.Errorf("%s: got %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestDurationMarshalRoundTrip(t *testing.T) {
	for _, v := range []any{ptr(sec(1.5)), &Toggle{Disabled: true}, &Toggle{}, &Toggle{Value: sec(90)}} {
		out, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back := v
		switch v.(type) {
		case *Duration:
			back = new(Duration)
		case *Toggle:
			back = new(Toggle)
		}
		if err := yaml.Unmarshal(out, back); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if !equalVal(v, back) {
			t.Errorf("round trip of %s changed the value", strings.TrimSpace(string(out)))
		}
	}
}

func equalVal(a, b any) bool {
	switch a := a.(type) {
	case *Duration:
		return *a == *b.(*Duration)
	case *Toggle:
		return *a == *b.(*Toggle)
	}
	return false
}

// Durations as they appear in a config file, including after env expansion.
func TestDurationFields(t *testing.T) {
	tests := []struct {
		val  string
		want time.Duration
	}{
		{"45", 45 * time.Second},
		{"1.5", 1500 * time.Millisecond},
		{`"90s"`, 90 * time.Second},
		{"2m", 2 * time.Minute},
		{"${T:-3}", 3 * time.Second},
		{"${T:-2500ms}", 2500 * time.Millisecond},
		{`"${T:-4}"`, 4 * time.Second},
	}
	for _, tt := range tests {
		c, err := parse([]byte(minimal+"timeouts:\n  read: "+tt.val+"\n"), "t.yaml", noEnv)
		if err != nil {
			t.Errorf("read: %s: %v", tt.val, err)
			continue
		}
		if got := c.Timeouts.Read.D(); got != tt.want {
			t.Errorf("read: %s = %s, want %s", tt.val, got, tt.want)
		}
	}
}

// minimal is a valid config of 6 lines; error cases append to it so their
// line numbers start at 7.
const minimal = `providers:
  p: {base_url: "https://p.example/v1", api_key: k}
models:
  - name: m
    providers:
      - provider: p
`
