package config

import (
	"strings"
	"testing"
	"time"
)

// TestObserveConfig covers tracing:, tags: and alerts: (defaults, values
// and the errors that name their field).
func TestObserveConfig(t *testing.T) {
	const base = "providers: {p: {type: mock}}\nmodels: [{name: m, providers: [{provider: p}]}]\n"
	tests := []struct {
		name, yaml, err string
		check           func(t *testing.T, c *Config)
	}{
		{"defaults", "", "", func(t *testing.T, c *Config) {
			if c.Tracing.Enabled != nil || c.Tracing.QueueSize != 4096 || c.Tracing.BatchSize != 512 ||
				c.Tracing.ExportTimeout.D() != 10*time.Second || c.Tracing.CaptureContent {
				t.Errorf("tracing %+v", c.Tracing)
			}
			if c.Tags.MetricValues != 100 || c.Tags.FromMetadata {
				t.Errorf("tags %+v", c.Tags)
			}
			a := c.Alerts
			if a.On() || len(a.Events) != 3 || len(a.Thresholds) != 3 || a.Thresholds[1] != 80 || *a.Retries != 5 ||
				a.QuietPeriod.D() != 15*time.Minute {
				t.Errorf("alerts %+v", a)
			}
		}},
		{"tracing set", "tracing: {enabled: true, endpoint: 'http://c:4318', protocol: grpc, sample_ratio: 0.25, capture_content: true, headers: {X-Key: k}}\n", "",
			func(t *testing.T, c *Config) {
				if !*c.Tracing.Enabled || *c.Tracing.SampleRatio != 0.25 || c.Tracing.Protocol != TracingGRPC || c.Tracing.Headers["X-Key"] != "k" {
					t.Errorf("%+v", c.Tracing)
				}
			}},
		{"tracing bad protocol", "tracing: {protocol: thrift}\n", "tracing.protocol", nil},
		{"tracing bad endpoint", "tracing: {endpoint: 'c:4318'}\n", "tracing.endpoint", nil},
		{"tracing ratio", "tracing: {sample_ratio: 1.5}\n", "tracing.sample_ratio", nil},
		{"tracing batch over queue", "tracing: {queue_size: 10, batch_size: 11}\n", "tracing.batch_size", nil},
		{"tags set", "tags: {metric_keys: [team], tenants: {acme: {allowed: [team, feature], required: [team]}}}\n", "",
			func(t *testing.T, c *Config) {
				if r := c.Tags.Tenants["acme"]; r == nil || len(r.Required) != 1 || c.Tags.Default != nil || c.Tags.MetricKeys[0] != "team" {
					t.Errorf("tags %+v", c.Tags)
				}
			}},
		{"tags bad key", "tags: {tenants: {acme: {required: ['a b']}}}\n", "tags.tenants.acme.required", nil},
		{"tags too many metric keys", "tags: {metric_keys: [a, b, c, d, e, f]}\n", "tags.metric_keys", nil},
		{"alerts set", "alerts: {url: 'https://hooks.example/x', secret: 0123456789abcdef, thresholds: [90], events: [budget.threshold]}\n", "",
			func(t *testing.T, c *Config) {
				if !c.Alerts.On() || !c.Alerts.Sends(AlertBudget) || c.Alerts.Sends(AlertCircuit) {
					t.Errorf("%+v", c.Alerts)
				}
			}},
		{"alerts short secret", "alerts: {url: 'https://hooks.example/x', secret: short}\n", "alerts.secret", nil},
		{"alerts unknown event", "alerts: {url: 'https://h/x', secret: 0123456789abcdef, events: [spend]}\n", "alerts.events", nil},
		{"alerts threshold", "alerts: {thresholds: [0]}\n", "alerts.thresholds", nil},
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
			tc.check(t, c)
		})
	}
}

// TestAlertSecretNotShown: the secret never appears in an error.
func TestAlertSecretNotShown(t *testing.T) {
	const base = "providers: {p: {type: mock}}\nmodels: [{name: m, providers: [{provider: p}]}]\n"
	_, err := Parse([]byte(base+"alerts: {url: 'ftp://x', secret: tiny-secret-value}\n"), "t.yaml")
	if err == nil || strings.Contains(err.Error(), "tiny-secret-value") {
		t.Fatalf("%v", err)
	}
}
