package sse

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// cycle replays a buffer forever, so the reader's own buffer is reused and
// only per-event work is measured.
type cycle struct {
	b   []byte
	off int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], c.b[c.off:])
		n += k
		c.off = (c.off + k) % len(c.b)
	}
	return n, nil
}

// flushCounter is a client connection stand-in that accepts and flushes.
type flushCounter struct{ bytes, flushes int }

func (f *flushCounter) Write(p []byte) (int, error) { f.bytes += len(p); return len(p), nil }
func (f *flushCounter) Flush()                      { f.flushes++ }

func openAIChunk(i int, content string) string {
	return fmt.Sprintf(`data: {"id":"chatcmpl-9x8y7z","object":"chat.completion.chunk","created":1764547200,`+
		`"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,`+
		`"delta":{"content":%q},"logprobs":null,"finish_reason":null}],"usage":null,"n":%d}`, content, i) + "\n\n"
}

// BenchmarkRelayEvent is the per-event cost of the stream relay: one
// Reader.Next and one Writer.Raw (write + flush), on OpenAI chunks,
// Anthropic named events, CRLF line endings and a large tool-call chunk.
func BenchmarkRelayEvent(b *testing.B) {
	var openai, crlf, anthropic strings.Builder
	for i := range 64 {
		c := openAIChunk(i, " token")
		openai.WriteString(c)
		crlf.WriteString(strings.ReplaceAll(c, "\n", "\r\n"))
		fmt.Fprintf(&anthropic, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" token %d\"}}\n\n", i)
	}
	big := openAIChunk(0, strings.Repeat(`{\"query\":\"shipment status\",\"ids\":[1,2,3]} `, 100))
	cases := []struct{ name, stream string }{
		{"openai-chunk", openai.String()},
		{"openai-chunk-crlf", crlf.String()},
		{"anthropic-event", anthropic.String()},
		{"4KB-chunk", big},
	}
	for _, tc := range cases {
		events := strings.Count(tc.stream, "data: ")
		per := int64(len(tc.stream) / events)
		b.Run(tc.name+"/next", func(b *testing.B) {
			r := NewReader(&cycle{b: []byte(tc.stream)})
			b.SetBytes(per)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/next+raw", func(b *testing.B) {
			r := NewReader(&cycle{b: []byte(tc.stream)})
			fc := &flushCounter{}
			w := NewWriter(fc)
			b.SetBytes(per)
			b.ReportAllocs()
			for b.Loop() {
				ev, err := r.Next()
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Raw(ev.Raw); err != nil {
					b.Fatal(err)
				}
			}
			if fc.flushes == 0 {
				b.Fatal("no flush")
			}
		})
	}
	b.Run("writer-data", func(b *testing.B) {
		w := NewWriter(&flushCounter{})
		data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" token"}}`)
		b.ReportAllocs()
		for b.Loop() {
			_ = w.Event("content_block_delta", data)
		}
	})
}

func TestCycleReader(t *testing.T) {
	r := NewReader(&cycle{b: []byte(openAIChunk(1, "x"))})
	for range 3 {
		ev, err := r.Next()
		if err != nil || !bytes.Contains(ev.Data, []byte(`"content":"x"`)) {
			t.Fatalf("ev = %q, err = %v", ev.Data, err)
		}
	}
}
