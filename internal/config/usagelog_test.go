package config

import (
	"strings"
	"testing"
	"time"
)

func TestUsageLogConfig(t *testing.T) {
	const base = "providers: {p: {type: mock}}\nmodels: [{name: m, providers: [{provider: p}]}]\n"
	tests := []struct {
		name, yaml, err string
		on              bool
		retention       time.Duration
		buffer          int
	}{
		{"defaults", "", "", true, 30 * 24 * time.Hour, 10_000},
		{"off", "usage_log: {enabled: false}\n", "", false, 30 * 24 * time.Hour, 10_000},
		{"set", "usage_log: {retention: 48h, buffer: 5, path: /tmp/u.db}\n", "", true, 48 * time.Hour, 5},
		{"retention too short", "usage_log: {retention: 10m}\n", "usage_log.retention", true, 0, 0},
		{"buffer zero", "usage_log: {buffer: 0}\n", "usage_log.buffer", true, 0, 0},
		{"unknown field", "usage_log: {rows: 3}\n", "usage_log.rows", true, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(base+tc.yaml), "t.yaml")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.UsageLog.On() != tc.on || c.UsageLog.Retention.D() != tc.retention || c.UsageLog.Buffer != tc.buffer {
				t.Fatalf("%+v", c.UsageLog)
			}
		})
	}
}
