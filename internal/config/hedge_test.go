package config

import (
	"strings"
	"testing"
	"time"
)

const twoProviders = `providers:
  p: {base_url: "https://p.example/v1", api_key: k}
  q: {base_url: "https://q.example/v1", api_key: k}
models:
  - name: m
    providers: [{provider: p}, {provider: q}]
`

func TestHedgeSettings(t *testing.T) {
	one := func(n int) *int { return &n }
	tests := []struct {
		name string
		yaml string
		want Hedge
		on   bool
	}{
		{"off by default", twoProviders, Hedge{}, false},
		{"global percentile, default max_extra", twoProviders + "hedge: {after: p90}\n",
			Hedge{After: HedgeDelay{Percentile: 90}, MaxExtra: one(1)}, true},
		{"global duration", twoProviders + "hedge: {after: 800ms, max_extra: 2}\n",
			Hedge{After: HedgeDelay{Fixed: Duration(800 * time.Millisecond)}, MaxExtra: one(2)}, true},
		{"seconds", twoProviders + "hedge: {after: 1.5}\n",
			Hedge{After: HedgeDelay{Fixed: Duration(1500 * time.Millisecond)}, MaxExtra: one(1)}, true},
		{"model wins over global", strings.Replace(twoProviders, "    providers:", "    hedge: {after: p99}\n    providers:", 1) +
			"hedge: {after: 2s}\n", Hedge{After: HedgeDelay{Percentile: 99}, MaxExtra: one(1)}, true},
		{"model opts out", strings.Replace(twoProviders, "    providers:", "    hedge: {after: p50, max_extra: 0}\n    providers:", 1) +
			"hedge: {after: 2s}\n", Hedge{After: HedgeDelay{Percentile: 50}, MaxExtra: one(0)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse([]byte(tt.yaml), "t.yaml", noEnv)
			if err != nil {
				t.Fatal(err)
			}
			h, on := c.HedgeFor(c.Model("m"))
			if on != tt.on || h.After != tt.want.After || (h.MaxExtra == nil) != (tt.want.MaxExtra == nil) ||
				h.MaxExtra != nil && *h.MaxExtra != *tt.want.MaxExtra {
				t.Fatalf("HedgeFor = %+v (max_extra %v), %v; want %+v, %v", h, h.MaxExtra, on, tt.want, tt.on)
			}
		})
	}
}

func TestHedgeErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"after required", twoProviders + "hedge: {max_extra: 1}\n", `t.yaml:7: hedge.after: required`},
		{"percentile too low", twoProviders + "hedge: {after: p10}\n", `t.yaml:7: hedge.after: percentile must be between p50 and p99, got p10`},
		{"percentile too high", twoProviders + "hedge: {after: p100}\n", `t.yaml:7: hedge.after: percentile must be between p50 and p99, got p100`},
		{"not a percentile", twoProviders + "hedge: {after: pfast}\n", `t.yaml:7: hedge.after: want a percentile p50..p99 or a duration`},
		{"zero delay", twoProviders + "hedge: {after: 0}\n", `t.yaml:7: hedge.after: must be between 1ms and 3600s, got 0s`},
		{"max_extra range", twoProviders + "hedge:\n  after: 1s\n  max_extra: 4\n", `t.yaml:9: hedge.max_extra: must be between 0 and 3, got 4`},
		{"unknown field", twoProviders + "hedge: {after: 1s, delay: 2}\n", `t.yaml:7: hedge.delay: unknown field (known: after, max_extra)`},
		{"one provider", `providers:
  p: {base_url: "https://p.example/v1", api_key: k}
models:
  - name: m
    hedge: {after: p90}
    providers: [{provider: p}]
`, `t.yaml:5: models[0].hedge: needs at least two providers`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(tt.yaml), "t.yaml", noEnv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
