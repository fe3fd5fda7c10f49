package config

import (
	"errors"
	"strings"
	"testing"
)

// TestSeedEnvAliases: the seed systems' variables set the fields they
// configured there; Switchboard's own variable wins when both are set.
func TestSeedEnvAliases(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		env       map[string]string
		redis     string
		retained  int
		responses bool
		err       string
	}{
		{"none", minimal, nil, "", 100000, false, ""},
		{"LLMSHIM_REDIS_URL", minimal, map[string]string{"LLMSHIM_REDIS_URL": "redis://shim:6379"}, "redis://shim:6379", 100000, false, ""},
		{"SWITCHBOARD_REDIS_URL wins", minimal, map[string]string{"LLMSHIM_REDIS_URL": "redis://shim:6379", EnvRedisURL: "redis://sb:6379"}, "redis://sb:6379", 100000, false, ""},
		{"empty alias changes nothing", minimal + "redis: {url: \"redis://file:1\"}\n", map[string]string{"LLMSHIM_REDIS_URL": ""}, "redis://file:1", 100000, false, ""},
		{"retained attempts", minimal, map[string]string{"LLMSHIM_GATEWAY_MAX_RETAINED_ACCOUNTING_ATTEMPTS": "2500"}, "", 2500, false, ""},
		{"retained attempts override the file", minimal + "spend: {max_retained_attempts: 7}\n", map[string]string{"LLMSHIM_GATEWAY_MAX_RETAINED_ACCOUNTING_ATTEMPTS": " 9 "}, "", 9, false, ""},
		{"retained attempts invalid", minimal, map[string]string{"LLMSHIM_GATEWAY_MAX_RETAINED_ACCOUNTING_ATTEMPTS": "lots"}, "", 0, false,
			`spend.max_retained_attempts: LLMSHIM_GATEWAY_MAX_RETAINED_ACCOUNTING_ATTEMPTS must be an integer between 1 and 10000000, got "lots"`},
		{"retained attempts out of range", minimal, map[string]string{"LLMSHIM_GATEWAY_MAX_RETAINED_ACCOUNTING_ATTEMPTS": "0"}, "", 0, false, "between 1 and 10000000"},
		{"thinking tracking 1", minimal, map[string]string{"RESPONSES_ENABLE_THINKING_TRACKING": "1"}, "", 100000, true, ""},
		{"thinking tracking true", minimal, map[string]string{"RESPONSES_ENABLE_THINKING_TRACKING": "TRUE"}, "", 100000, true, ""},
		{"thinking tracking 0", minimal, map[string]string{"RESPONSES_ENABLE_THINKING_TRACKING": "0"}, "", 100000, false, ""},
		{"file alone", minimal + "tracking: {responses: true}\n", nil, "", 100000, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse([]byte(tt.yaml), "t.yaml", mapEnv(tt.env))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				var es *Errors
				if !errors.As(err, &es) || len(*es) != 1 {
					t.Fatalf("want exactly one problem, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Redis.URL != tt.redis || c.Spend.MaxRetainedAttempts != tt.retained || c.Tracking.Responses != tt.responses {
				t.Fatalf("redis %q retained %d responses %v", c.Redis.URL, c.Spend.MaxRetainedAttempts, c.Tracking.Responses)
			}
		})
	}
}

// TestUnknownFieldsPolicy: strict by default (an error with its line);
// config.unknown_fields: warn loads the file and reports each as a warning,
// wherever the config: section sits in the file.
func TestUnknownFieldsPolicy(t *testing.T) {
	foreign := "puma:\n  threads: 16\nretries:\n  max_attempts: 2\n  jitter: full\n"
	tests := []struct {
		name     string
		yaml     string
		err      []string
		warnings []string
	}{
		{"strict by default", minimal + foreign, []string{"t.yaml:7: puma: unknown field", "t.yaml:11: retries.jitter: unknown field"}, nil},
		{"strict explicitly", minimal + foreign + "config: {unknown_fields: strict}\n", []string{"t.yaml:7: puma: unknown field"}, nil},
		{"warn after the fields", minimal + foreign + "config: {unknown_fields: warn}\n", nil,
			[]string{"t.yaml:7: puma: unknown field", "t.yaml:11: retries.jitter: unknown field"}},
		{"warn before the fields", "config:\n  unknown_fields: warn\n" + minimal + foreign, nil,
			[]string{"t.yaml:9: puma: unknown field", "t.yaml:13: retries.jitter: unknown field"}},
		{"warn keeps other errors", minimal + "config: {unknown_fields: warn}\nretries: {max_attempts: 50, backoff: 1}\n",
			[]string{"retries.max_attempts: must be between 1 and 10"}, nil},
		{"bad policy", minimal + "config: {unknown_fields: loose}\n", []string{`config.unknown_fields: must be one of strict, warn, got "loose"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse([]byte(tt.yaml), "t.yaml", mapEnv(nil))
			if tt.err != nil {
				if err == nil {
					t.Fatal("loaded; want an error")
				}
				for _, w := range tt.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if strings.Contains(tt.name, "keeps") && strings.Contains(err.Error(), "backoff") {
					t.Errorf("warn mode reported the unknown field as an error: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Retries.MaxAttempts != 2 {
				t.Fatalf("known fields next to unknown ones were lost: %+v", c.Retries)
			}
			if len(c.Warnings) != len(tt.warnings) {
				t.Fatalf("warnings %q", c.Warnings)
			}
			for i, w := range tt.warnings {
				if !strings.HasPrefix(c.Warnings[i], w) {
					t.Errorf("warning %d = %q, want prefix %q", i, c.Warnings[i], w)
				}
			}
		})
	}
}

// TestLimitsSeedFields: limits.advisory_prefix and limits.window, their
// defaults and their errors.
func TestLimitsSeedFields(t *testing.T) {
	def := Windows{WindowBucket, WindowBucket}
	tests := []struct {
		yaml, prefix string
		window       Windows
		err          string
	}{
		{minimal, DefaultAdvisoryPrefix, def, ""},
		{minimal + "limits: {advisory_prefix: X-MultiLLM-RateLimit}\n", "X-MultiLLM-RateLimit", def, ""},
		{minimal + "limits: {advisory_prefix: \"X-Rate Limit\"}\n", "", def, "limits.advisory_prefix: must be an HTTP header name"},
		{minimal + "limits: {advisory_prefix: \"\"}\n", "", def, "limits.advisory_prefix: must be an HTTP header name"},
		{minimal + "limits: {window: sliding}\n", DefaultAdvisoryPrefix, Windows{WindowSliding, WindowSliding}, ""},
		{minimal + "limits: {window: {rpm: sliding}}\n", DefaultAdvisoryPrefix, Windows{WindowSliding, WindowBucket}, ""},
		{minimal + "limits: {window: {tpm: sliding, rpm: bucket}}\n", DefaultAdvisoryPrefix, Windows{WindowBucket, WindowSliding}, ""},
		{minimal + "limits: {window: rolling}\n", "", def, "limits.window: want bucket or sliding"},
		{minimal + "limits: {window: {daily: sliding}}\n", "", def, `limits.window: unknown dimension "daily"`},
	}
	for _, tt := range tests {
		c, err := parse([]byte(tt.yaml), "t.yaml", mapEnv(nil))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v", tt.yaml, err)
			}
			continue
		}
		if err != nil || c.Limits.AdvisoryPrefix != tt.prefix || c.Limits.Window != tt.window ||
			c.Limits.Window.Sliding("rpm") != (tt.window.RPM == WindowSliding) || c.Limits.Window.Sliding("tpm") != (tt.window.TPM == WindowSliding) {
			t.Errorf("%q: %+v %v", tt.yaml, c.Limits, err)
		}
	}
}

// TestTenantCounting: limits.tenant_counting, request by default.
func TestTenantCounting(t *testing.T) {
	for _, tt := range []struct{ yaml, want, err string }{
		{minimal, CountRequests, ""},
		{minimal + "limits: {tenant_counting: attempt}\n", CountAttempts, ""},
		{minimal + "limits: {tenant_counting: request}\n", CountRequests, ""},
		{minimal + "limits: {tenant_counting: attempts}\n", "", "limits.tenant_counting"},
	} {
		c, err := parse([]byte(tt.yaml), "t.yaml", mapEnv(nil))
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: err %v", tt.yaml, err)
		case tt.err == "" && (err != nil || c.Limits.TenantCounting != tt.want):
			t.Errorf("%q: %v %v", tt.yaml, c, err)
		}
	}
}
