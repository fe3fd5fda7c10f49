package jsoncheck

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestDepth(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tt := range []struct {
		name  string
		body  string
		valid bool
	}{
		{"flat object", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true},
		{"at the bound", deep(MaxDepth), true},
		{"one past the bound", deep(MaxDepth + 1), false},
		{"a million levels", `{"model":"m","x":` + deep(1_000_000) + `}`, false},
		{"brackets inside strings do not nest", `{"s":"` + strings.Repeat("[{", 5000) + `"}`, true},
		{"escaped quote keeps the string open", `{"s":"\"` + strings.Repeat("[", 5000) + `"}`, true},
		{"many siblings are not depth", "[" + strings.Repeat("[],", 5000) + "[]]", true},
		{"invalid JSON", `{"model":`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Valid([]byte(tt.body)); got != tt.valid {
				t.Fatalf("Valid = %v, want %v", got, tt.valid)
			}
		})
	}
}

func BenchmarkValid(b *testing.B) {
	body := []byte(`{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"hello there, how are you today?"},`, 100) + `{"role":"user","content":"hi"}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		Valid(body)
	}
}

func BenchmarkGjsonOnly(b *testing.B) {
	body := []byte(`{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"hello there, how are you today?"},`, 100) + `{"role":"user","content":"hi"}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		gjson.ValidBytes(body)
	}
}
