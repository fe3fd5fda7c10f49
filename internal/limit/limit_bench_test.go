package limit

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkBucketTake is one admission: the global, provider and tenant
// RPM and TPM buckets debited together (6 debits), as the request path does.
func BenchmarkBucketTake(b *testing.B) {
	m := NewMemory()
	rpm := Rate{Limit: 1 << 40, Window: time.Minute}
	ds := []Debit{
		{Key: "g:rpm", Rate: rpm, Cost: 1}, {Key: "g:tpm", Rate: rpm, Cost: 900},
		{Key: "p:openai:rpm", Group: "p:openai", Rate: rpm, Cost: 1}, {Key: "p:openai:tpm", Group: "p:openai", Rate: rpm, Cost: 900},
		{Key: "t:acme:rpm", Rate: rpm, Cost: 1}, {Key: "t:acme:tpm", Rate: rpm, Cost: 900},
	}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		if r := m.Take(now, ds, nil); r.Refused >= 0 {
			b.Fatal("refused")
		}
	}
}

// BenchmarkEstimateTokens is the conservative TPM estimate of a request.
func BenchmarkEstimateTokens(b *testing.B) {
	for _, size := range []int{2 << 10, 50 << 10} {
		var msgs []string
		body := ""
		for i := 0; len(body) < size; i++ {
			msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"Question %d about shipment SHP-%05d in Zürich — what is \"late\" here?"}`, i, i))
			body = `{"model":"gpt-4o-mini","messages":[` + strings.Join(msgs, ",") + `],"max_tokens":512,"n":1,"stream":true}`
		}
		t := Target{Type: "openai", Known: true, ModelCeiling: 16384}
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			raw := []byte(body)
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if e := EstimateTokens(raw, t); e.Total <= 0 {
					b.Fatal("no estimate")
				}
			}
		})
	}
}
