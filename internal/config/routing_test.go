package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

const routingProviders = `providers:
  a: {base_url: "https://a.example/v1", api_key: k}
  b: {base_url: "https://b.example/v1", api_key: k}
`

// Routing policies, weights and fallbacks: each case is a models section
// and the errors it must yield ("line: field" and a piece of the message),
// in order; none means it loads.
func TestRoutingValidation(t *testing.T) {
	type want struct{ at, msg string }
	tests := []struct {
		name   string
		models string
		want   []want
	}{
		{"weighted with weights", `models:
  - name: m
    routing: weighted
    providers: [{provider: a, weight: 3}, {provider: b}]
`, nil},
		{"every policy loads", `models:
  - {name: m1, routing: measured, providers: [{provider: a}]}
  - {name: m2, routing: least_busy, providers: [{provider: a}]}
  - {name: m3, routing: lowest_cost, providers: [{provider: a}]}
  - {name: m4, routing: lowest_latency, providers: [{provider: a}]}
`, nil},
		{"unknown policy", `models:
  - name: m
    routing: fastest
    providers: [{provider: a}]
`, []want{{"t.yaml:6: models[0].routing", `must be one of measured, weighted, least_busy, lowest_cost, lowest_latency, got "fastest"`}}},
		{"weight out of range", `models:
  - name: m
    routing: weighted
    providers:
      - {provider: a, weight: 1001}
      - {provider: b, weight: -1}
`, []want{
			{"t.yaml:7: models[0].providers", "needs at least one provider with a weight above 0"},
			{"t.yaml:8: models[0].providers[0].weight", "must be between 0 and 1000, got 1001"},
			{"t.yaml:9: models[0].providers[1].weight", "must be between 0 and 1000, got -1"},
		}},
		{"weight on a measured model", `models:
  - name: m
    providers: [{provider: a, weight: 2}]
`, []want{{"t.yaml:6: models[0].providers[0].weight", "only applies with routing: weighted (this model's routing is measured)"}}},
		{"all weights zero", `models:
  - name: m
    routing: weighted
    providers: [{provider: a, weight: 0}, {provider: b, weight: 0}]
`, []want{{"t.yaml:7: models[0].providers", "needs at least one provider with a weight above 0"}}},
		{"fallbacks as a list and as a mapping", `models:
  - {name: small, context_length: 8000, providers: [{provider: a}], fallbacks: [big]}
  - {name: big, providers: [{provider: b}], fallbacks: {models: [huge], on: [context_window]}}
  - {name: huge, providers: [{provider: b}]}
`, nil},
		{"fallback to an unknown model", `models:
  - {name: m, providers: [{provider: a}], fallbacks: [nope]}
`, []want{{"t.yaml:5: models[0].fallbacks", `unknown model "nope"`}}},
		{"fallback to itself", `models:
  - {name: m, providers: [{provider: a}], fallbacks: [m]}
`, []want{{"t.yaml:5: models[0].fallbacks", `model "m" falls back to itself`}}},
		{"fallback cycle", `models:
  - {name: x, providers: [{provider: a}], fallbacks: [y]}
  - {name: y, providers: [{provider: a}], fallbacks: {models: [z]}}
  - {name: z, providers: [{provider: a}], fallbacks: [x]}
`, []want{{"t.yaml:5: models[0].fallbacks", "fallback cycle x -> y -> z -> x"}}},
		{"unknown condition", `models:
  - {name: x, providers: [{provider: a}], fallbacks: {models: [y], on: [timeout]}}
  - {name: y, providers: [{provider: a}]}
`, []want{{"t.yaml:5: models[0].fallbacks.on", `must be among error, context_window, content_policy, rate_limit, budget, got "timeout"`}}},
		{"unknown field in fallbacks", `models:
  - {name: x, providers: [{provider: a}], fallbacks: {model: [y]}}
  - {name: y, providers: [{provider: a}]}
`, []want{{"t.yaml:5: models[0].fallbacks", `unknown field "model" (known: models, on)`}}},
		{"empty fallbacks", `models:
  - {name: x, providers: [{provider: a}], fallbacks: []}
`, []want{{"t.yaml:5: models[0].fallbacks", "names no model"}}},
		{"no condition: the fallbacks would never be tried", `models:
  - {name: x, providers: [{provider: a}], fallbacks: {models: [y], on: []}}
  - {name: y, providers: [{provider: a}]}
`, []want{{"t.yaml:5: models[0].fallbacks.on", "names no condition; list some of error, context_window, content_policy, rate_limit, budget, or leave on out"}}},
		{"itself twice: said once, then the repeat", `models:
  - {name: x, providers: [{provider: a}], fallbacks: [x, x]}
`, []want{
			{"t.yaml:5: models[0].fallbacks", `model "x" falls back to itself`},
			{"t.yaml:5: models[0].fallbacks", `model "x" is listed twice`},
		}},
		{"a cycle met from its middle is named from its first model", `models:
  - {name: w, providers: [{provider: a}], fallbacks: [z]}
  - {name: x, providers: [{provider: a}], fallbacks: [y]}
  - {name: y, providers: [{provider: a}], fallbacks: [z]}
  - {name: z, providers: [{provider: a}], fallbacks: [x]}
`, []want{{"t.yaml:6: models[1].fallbacks", "fallback cycle x -> y -> z -> x;"}}},
		{"two cycles through one model", `models:
  - {name: x, providers: [{provider: a}], fallbacks: [y, z]}
  - {name: y, providers: [{provider: a}], fallbacks: [x]}
  - {name: z, providers: [{provider: a}], fallbacks: [x]}
`, []want{
			{"t.yaml:5: models[0].fallbacks", "fallback cycle x -> y -> x;"},
			{"t.yaml:5: models[0].fallbacks", "fallback cycle x -> z -> x;"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(routingProviders+tt.models), "t.yaml")
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("want it to load, got %v", err)
				}
				return
			}
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("want *Errors, got %v", err)
			}
			if len(*errs) != len(tt.want) {
				t.Fatalf("want %d errors, got %d:\n%v", len(tt.want), len(*errs), err)
			}
			for i, w := range tt.want {
				got := (*errs)[i].Error()
				if !strings.HasPrefix(got, w.at) || !strings.Contains(got, w.msg) {
					t.Errorf("error %d: want %q ... %q, got %q", i, w.at, w.msg, got)
				}
			}
		})
	}
}

func TestRoutingDefaults(t *testing.T) {
	c, err := Parse([]byte(routingProviders+`models:
  - {name: small, routing: weighted, providers: [{provider: a}, {provider: b, weight: 4}], fallbacks: [big]}
  - {name: big, providers: [{provider: b}], fallbacks: {models: [small2], on: [rate_limit]}}
  - {name: small2, providers: [{provider: a}]}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	small, big, small2 := c.Model("small"), c.Model("big"), c.Model("small2")
	if small.Policy() != RoutingWeighted || big.Policy() != RoutingMeasured {
		t.Errorf("policies: %q %q", small.Policy(), big.Policy())
	}
	if w := []int{small.Providers[0].EntryWeight(), small.Providers[1].EntryWeight()}; !slices.Equal(w, []int{1, 4}) {
		t.Errorf("weights %v, want [1 4]", w)
	}
	if !slices.Equal(small.Fallbacks.On, FallbackConditions) {
		t.Errorf("default on = %v, want every condition", small.Fallbacks.On)
	}
	if !big.Fallbacks.Covers(FallbackRateLimit) || big.Fallbacks.Covers(FallbackError) {
		t.Errorf("big covers %v", big.Fallbacks.On)
	}
	if small2.Fallbacks.Covers(FallbackError) {
		t.Error("a model without fallbacks covers nothing")
	}
}

// A long fallback chain is checked in one walk, and a cycle through
// thousands of models is named in a line of bounded length.
func TestLongFallbackChains(t *testing.T) {
	const n = 5000
	chain := func(closed bool) []byte {
		var b strings.Builder
		b.WriteString(routingProviders + "models:\n")
		for i := range n {
			next := i + 1
			if i == n-1 {
				if !closed {
					fmt.Fprintf(&b, "  - {name: m%d, providers: [{provider: a}]}\n", i)
					continue
				}
				next = 0
			}
			fmt.Fprintf(&b, "  - {name: m%d, providers: [{provider: a}], fallbacks: [m%d]}\n", i, next)
		}
		return []byte(b.String())
	}
	if _, err := Parse(chain(false), "t.yaml"); err != nil {
		t.Fatalf("an open chain of %d fallbacks must load: %v", n, err)
	}
	_, err := Parse(chain(true), "t.yaml")
	var errs *Errors
	if !errors.As(err, &errs) || len(*errs) != 1 {
		t.Fatalf("want one error, got %v", err)
	}
	got := (*errs)[0].Error()
	want := "t.yaml:5: models[0].fallbacks: fallback cycle m0 -> m1 -> m2 -> m3 -> (4993 more) -> m4997 -> m4998 -> m4999 -> m0;"
	if !strings.HasPrefix(got, want) || len(got) > 300 {
		t.Errorf("got %q,\nwant %q... (short)", got, want)
	}
}
