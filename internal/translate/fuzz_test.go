package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"switchboard/internal/sse"
)

// seedStreams adds the recorded streams of a pair as fuzz seeds.
func seedStreams(f *testing.F, pair string) {
	files, _ := filepath.Glob(filepath.Join("testdata", pair, "stream_*.in.sse"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(""))
	f.Add([]byte("data: {}\n\n"))
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"))
}

// drain reads a translating stream to its end: it must neither panic nor
// yield more than a bounded amount for a finite input.
func drain(t *testing.T, r *Reader, in []byte) {
	_ = r.Prime()
	out, _ := io.ReadAll(io.LimitReader(r, int64(len(in))*64+4096))
	if len(out) > len(in)*64+2048 {
		t.Fatalf("output %d bytes for %d bytes of input", len(out), len(in))
	}
	_ = r.Close()
	_ = r.Usage()
}

var fuzzChatReq = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"n":2}`)

func FuzzAnthropicStream(f *testing.F) {
	seedStreams(f, "openai_anthropic")
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := NewOpenAIAnthropic(defaultStreamReq)
		if err != nil {
			t.Fatal(err)
		}
		drain(t, NewReader(io.NopCloser(bytes.NewReader(in)), tr.Stream()), in)
	})
}

func FuzzConverseStream(f *testing.F) {
	seedStreams(f, "openai_converse")
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := NewOpenAIConverse(defaultStreamReq)
		if err != nil {
			t.Fatal(err)
		}
		drain(t, NewReader(io.NopCloser(bytes.NewReader(in)), tr.Stream()), in)
	})
}

func FuzzGeminiStream(f *testing.F) {
	seedStreams(f, "openai_gemini")
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := NewOpenAIGemini(fuzzChatReq)
		if err != nil {
			t.Fatal(err)
		}
		drain(t, NewReader(io.NopCloser(bytes.NewReader(in)), tr.Stream()), in)
	})
}

func FuzzMessagesStream(f *testing.F) {
	seedStreams(f, "anthropic_openai")
	f.Fuzz(func(t *testing.T, in []byte) {
		s := NewMessagesStream("m")
		r := sse.NewReader(bytes.NewReader(in))
		n := 0
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			evs, _ := s.Chunk(ev.Data)
			n += len(evs)
		}
		n += len(s.Finish())
		if n > len(in)*8+8 {
			t.Fatalf("%d events for %d bytes of input", n, len(in))
		}
		_ = s.Usage()
	})
}

// FuzzRequests feeds any bytes to the request translators: a refusal is
// fine, a panic is not.
func FuzzRequests(f *testing.F) {
	for _, dir := range []string{"openai_anthropic", "openai_gemini", "anthropic_openai", "gemini_openai", "responses_openai"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "req_*.in.json"))
		for _, p := range files {
			b, _ := os.ReadFile(p)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		_, _ = NewOpenAIAnthropic(in)
		_, _ = NewOpenAIGemini(in)
		_, _ = NewOpenAIConverse(in)
		_, _ = MessagesToChat(in)
		_, _, _ = ChatToMessages(in, "m")
		_ = ErrorToAnthropic(400, in)
		_ = AnthropicErrorToOpenAI(400, in)
		_ = GeminiErrorToOpenAI(400, in)
		_ = ErrorToGemini(400, in)
		if g, err := FromGemini(in, "m", true); err == nil {
			_, _, _ = g.Answer(in, "")
		}
		if r, err := FromResponses(in); err == nil {
			_, _, _ = r.Answer(in, "")
		}
		_, _ = jsonSchema(in, "schema")
	})
}

// FuzzInboundRequests checks what the inbound translators accept: the
// internal form they produce is a chat request the provider translators
// read (or refuse with a *FieldError), never a panic or invalid JSON.
func FuzzInboundRequests(f *testing.F) {
	for _, dir := range []string{"anthropic_openai", "gemini_openai", "responses_openai"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "req_*.in.json"))
		for _, p := range files {
			b, _ := os.ReadFile(p)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var outs []*Inbound
		if m, err := FromMessages(in); err == nil {
			outs = append(outs, m)
		}
		if g, err := FromGemini(in, "m", false); err == nil {
			outs = append(outs, &g.Inbound)
		}
		if r, err := FromResponses(in); err == nil {
			outs = append(outs, &r.Inbound)
		}
		for _, o := range outs {
			if !json.Valid(o.Body) {
				t.Fatalf("internal form is not JSON: %s", o.Body)
			}
			_ = DroppedHeader(o.Dropped)
			for _, next := range []func([]byte) error{
				func(b []byte) error { _, err := NewOpenAIAnthropic(b); return err },
				func(b []byte) error { _, err := NewOpenAIGemini(b); return err },
			} {
				var fe *FieldError
				if err := next(o.Body); err != nil && !errors.As(err, &fe) {
					t.Fatalf("provider translator failed with %T %v on %s", err, err, o.Body)
				}
			}
		}
	})
}

// FuzzClientStreams feeds any chunk stream to the client stream
// translators: bounded output, no panic.
func FuzzClientStreams(f *testing.F) {
	for _, dir := range []string{"anthropic_openai", "gemini_openai", "responses_openai"} {
		seedStreams(f, dir)
	}
	g, _ := FromGemini([]byte(`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`), "m", true)
	r, _ := FromResponses([]byte(`{"model":"m","input":"hi","stream":true,"reasoning":{"summary":"auto"},"tools":[{"type":"custom","name":"apply_patch"}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, s := range []ClientStream{NewMessagesStream("m"), g.Stream(""), r.Stream("")} {
			out := clientStreamSSE(s, in)
			if len(out) > len(in)*64+16384 {
				t.Fatalf("%T: %d bytes out for %d in", s, len(out), len(in))
			}
		}
	})
}
