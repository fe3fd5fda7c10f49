package track

import (
	"testing"
	"time"

	"switchboard/internal/sse"
)

func TestGeminiStream(t *testing.T) {
	t0 := time.Unix(0, 0)
	evs := []string{
		`{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"Hi"}]},"index":0}],"usageMetadata":{"promptTokenCount":9}}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":4,"thoughtsTokenCount":2,"totalTokenCount":15}}`,
	}
	st := NewStream(Gemini, t0)
	for i, d := range evs {
		st.See(&sse.Event{Data: []byte(d)}, t0.Add(time.Duration(i+1)*time.Second))
		if i == 1 && st.Final {
			t.Fatal("usage beside unfinished content counted as final")
		}
	}
	if st.Thinking != 1 || st.Content != 2 {
		t.Fatalf("thinking %d content %d, want 1 and 2", st.Thinking, st.Content)
	}
	want := Usage{Input: 9, Output: 6, Reasoning: 2, HasInput: true, HasOutput: true, Known: true}
	if st.Usage != want || !st.Final {
		t.Fatalf("usage %+v final %t, want %+v final", st.Usage, st.Final, want)
	}
	if r := st.Result(); r.TTFT != time.Second {
		t.Fatalf("TTFT %s, want 1s", r.TTFT)
	}
	u := Unary(Gemini, []byte(`{"candidates":[],"usageMetadata":{"promptTokenCount":5,"cachedContentTokenCount":2,"totalTokenCount":5}}`))
	if u.Input != 5 || u.CacheRead != 2 || !u.HasInput || !u.HasOutput || u.Output != 0 {
		t.Fatalf("unary usage %+v", u)
	}
}
