package bedrock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/tidwall/gjson"

	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/provider/cloud/cloudtest"
)

var envCreds = aws.Credentials{AccessKeyID: "AKIAENVEXAMPLE", SecretAccessKey: "env-secret", SessionToken: "env-session-token"}

const model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

type seen struct {
	rawPath, auth string
	body          []byte
	sigErr        error
}

// fakeBedrock answers Converse, ConverseStream, InvokeModel and
// InvokeModelWithResponseStream, checking each SigV4 signature against
// creds (when set) and recording what it got.
type fakeBedrock struct {
	mu    sync.Mutex
	creds func() []aws.Credentials // the credentials a signature may come from
	reqs  []seen
	// fail, when set, answers instead (status, X-Amzn-ErrorType, body).
	fail func() (int, string, string)
	// frames writes the ConverseStream answer.
	frames func(w io.Writer)
}

func (f *fakeBedrock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s := seen{rawPath: r.URL.EscapedPath(), auth: r.Header.Get("Authorization"), body: body}
	if f.creds != nil && strings.HasPrefix(s.auth, "AWS4-HMAC-SHA256") {
		s.sigErr = errors.New("no credentials matched")
		for _, c := range f.creds() {
			if err := cloudtest.CheckSigV4(r, body, c, "us-east-1", "bedrock"); err == nil {
				s.sigErr = nil
				break
			} else {
				s.sigErr = err
			}
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, s)
	f.mu.Unlock()
	if s.sigErr != nil {
		w.Header().Set("X-Amzn-ErrorType", "UnrecognizedClientException:http://internal.amazon.com/coral/com.amazon.coral.service/")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"message":"The security token included in the request is invalid."}`))
		return
	}
	if f.fail != nil {
		status, typ, msg := f.fail()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(msg))
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/converse"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"output":{"message":{"role":"assistant","content":[{"text":"hi from converse"}]}},"stopReason":"end_turn","usage":{"inputTokens":12,"outputTokens":4,"totalTokens":16}}`))
	case strings.HasSuffix(r.URL.Path, "/converse-stream"):
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		if f.frames != nil {
			f.frames(w)
			return
		}
		converseFrames(w)
	case strings.HasSuffix(r.URL.Path, "/invoke"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"msg_bdrk_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"hi from invoke"}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":3}}`))
	case strings.HasSuffix(r.URL.Path, "/invoke-with-response-stream"):
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		for _, ev := range []string{
			`{"type":"message_start","message":{"id":"msg_bdrk_2","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"usage":{"input_tokens":9,"output_tokens":1}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`,
			`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":9,"outputTokenCount":3}}`,
		} {
			_ = cloudtest.Chunk(w, ev)
		}
	default:
		http.NotFound(w, r)
	}
}

func converseFrames(w io.Writer) {
	for _, f := range [][2]string{
		{"messageStart", `{"role":"assistant","p":"abc"}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hi "}}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"there"}}`},
		{"contentBlockStop", `{"contentBlockIndex":0}`},
		{"messageStop", `{"stopReason":"end_turn"}`},
		{"metadata", `{"usage":{"inputTokens":12,"outputTokens":2,"totalTokens":14},"metrics":{"latencyMs":100}}`},
	} {
		_ = cloudtest.Frame(w, f[0], []byte(f[1]))
	}
}

func (f *fakeBedrock) last() seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

func newProvider(t *testing.T, f *fakeBedrock, mod func(*config.Provider)) *Provider {
	up := httptest.NewServer(f)
	t.Cleanup(up.Close)
	c := &config.Provider{Name: "br", Type: config.TypeBedrock, Region: "us-east-1", BaseURL: up.URL}
	if mod != nil {
		mod(c)
	}
	return New(c, up.Client())
}

func chat(stream bool) *provider.Request {
	body := `{"model":"` + model + `","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	if stream {
		body = `{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	}
	return &provider.Request{Endpoint: provider.Chat, Model: model, Stream: stream, Body: []byte(body)}
}

func messages(stream bool) *provider.Request {
	s := "false"
	if stream {
		s = "true"
	}
	return &provider.Request{Endpoint: provider.Messages, Model: model, Stream: stream, Header: http.Header{"Anthropic-Beta": {"interleaved-thinking-2025-05-14"}},
		Body: []byte(`{"model":"` + model + `","stream":` + s + `,"max_tokens":100,"cache_control":{"type":"ephemeral"},"messages":[{"role":"user","content":"hi"}]}`)}
}

func read(t *testing.T, p *Provider, req *provider.Request) string {
	t.Helper()
	resp, err := p.Send(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every operation, signed with the environment's credentials (the session
// token carried), at Bedrock's paths with the model id escaped as AWS does.
func TestOperationsSigned(t *testing.T) {
	cloudtest.AWSEnv(t, envCreds)
	f := &fakeBedrock{creds: func() []aws.Credentials { return []aws.Credentials{envCreds} }}
	p := newProvider(t, f, nil)
	esc := "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0"
	tests := []struct {
		name     string
		req      *provider.Request
		path     string
		contains []string
	}{
		{"converse", chat(false), esc + "/converse", []string{`"content":"hi from converse"`, `"prompt_tokens":12`}},
		{"converse stream", chat(true), esc + "/converse-stream", []string{`"content":"hi "`, `"content":"there"`, `"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2`, "data: [DONE]"}},
		{"invoke", messages(false), esc + "/invoke", []string{`"id":"msg_bdrk_1"`}},
		{"invoke stream", messages(true), esc + "/invoke-with-response-stream", []string{"event: message_start\ndata: {", "event: content_block_delta\ndata:", `"text":"hi"`, "event: message_stop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := read(t, p, tt.req)
			s := f.last()
			if s.sigErr != nil {
				t.Fatalf("signature: %v", s.sigErr)
			}
			if s.rawPath != tt.path {
				t.Fatalf("path %s, want %s", s.rawPath, tt.path)
			}
			for _, c := range tt.contains {
				if !strings.Contains(out, c) {
					t.Fatalf("answer lacks %q:\n%s", c, out)
				}
			}
			if tt.req.Endpoint == provider.Messages {
				b := s.body
				if gjson.GetBytes(b, "anthropic_version").String() != AnthropicVersion || gjson.GetBytes(b, "model").Exists() ||
					gjson.GetBytes(b, "stream").Exists() || !gjson.GetBytes(b, "cache_control").Exists() ||
					gjson.GetBytes(b, "anthropic_beta.0").String() != "interleaved-thinking-2025-05-14" {
					t.Fatalf("invoke body %s", b)
				}
			}
		})
	}
}

// An assumed role's credentials sign the requests, its session token
// carried; the role is assumed once (cached) with the external id.
func TestAssumeRole(t *testing.T) {
	cloudtest.AWSEnv(t, aws.Credentials{AccessKeyID: "AKIABASE", SecretAccessKey: "base-secret"})
	sts := cloudtest.NewSTS(t, aws.Credentials{AccessKeyID: "AKIABASE", SecretAccessKey: "base-secret"},
		"arn:aws:iam::123456789012:role/bedrock-caller", "ext-42")
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
	f := &fakeBedrock{creds: sts.Issued}
	p := newProvider(t, f, func(c *config.Provider) {
		c.RoleARN, c.ExternalID = "arn:aws:iam::123456789012:role/bedrock-caller", "ext-42"
	})
	read(t, p, chat(false))
	read(t, p, chat(false))
	if s := f.last(); s.sigErr != nil {
		t.Fatalf("signature: %v", s.sigErr)
	}
	if n := len(sts.Issued()); n != 1 {
		t.Fatalf("role assumed %d times for two requests", n)
	}
	// Bedrock refuses the session (expired early): the credentials are
	// fetched anew for the next attempt.
	f.fail = func() (int, string, string) {
		return 403, "ExpiredTokenException", `{"message":"The security token included in the request is expired"}`
	}
	_, err := p.Send(context.Background(), chat(false))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 403 || pe.Retryable() || !strings.Contains(pe.Msg, "expired") {
		t.Fatalf("err %v", err)
	}
	f.fail = nil
	read(t, p, chat(false))
	if n := len(sts.Issued()); n != 2 {
		t.Fatalf("role assumed %d times, want a second time after the refusal", n)
	}
}

// A role the caller may not assume is a 401 naming STS's reason; an STS
// that does not answer fails the attempt within timeouts.open.
func TestAssumeRoleFailures(t *testing.T) {
	base := aws.Credentials{AccessKeyID: "AKIABASE", SecretAccessKey: "base-secret"}
	cloudtest.AWSEnv(t, base)
	sts := cloudtest.NewSTS(t, base, "arn:aws:iam::123456789012:role/other", "")
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
	f := &fakeBedrock{}
	up := httptest.NewServer(f)
	defer up.Close()
	cfg := &config.Provider{Name: "br", Region: "us-east-1", BaseURL: up.URL, RoleARN: "arn:aws:iam::123456789012:role/bedrock-caller"}
	_, err := New(cfg, up.Client()).Send(context.Background(), chat(false))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 401 || pe.Retryable() || !strings.Contains(pe.Msg, "AccessDenied: User: arn:aws:iam::123456789012:user/gw is not authorized") {
		t.Fatalf("err %#v", err)
	}
	if strings.Contains(pe.Msg+string(pe.Body), "base-secret") {
		t.Fatal("the secret reached the error")
	}
	sts.Hang.Store(true)
	client := provider.NewHTTPClient(provider.ClientOptions{Open: 150 * time.Millisecond, Read: time.Minute, Write: time.Minute})
	start := time.Now()
	_, err = New(cfg, client).Send(context.Background(), chat(false))
	if !errors.As(err, &pe) || pe.Kind != provider.KindTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("after %v: %#v", time.Since(start), err)
	}
	if len(f.reqs) != 0 {
		t.Fatal("an unsigned request reached Bedrock")
	}
}

// A Bedrock API key (config, else AWS_BEARER_TOKEN_BEDROCK) is sent as a
// bearer token, ahead of AWS credentials in the environment.
func TestAPIKeyPrecedence(t *testing.T) {
	cloudtest.AWSEnv(t, envCreds)
	f := &fakeBedrock{}
	read(t, newProvider(t, f, func(c *config.Provider) { c.APIKey = "bedrock-api-key-1" }), chat(false))
	if a := f.last().auth; a != "Bearer bedrock-api-key-1" {
		t.Fatalf("Authorization %q", a)
	}
	t.Setenv(EnvBearer, "bedrock-api-key-env")
	read(t, newProvider(t, f, nil), chat(false))
	if a := f.last().auth; a != "Bearer bedrock-api-key-env" {
		t.Fatalf("Authorization %q", a)
	}
}

// Throttling and quota errors are 429s (a pause and a fallback), before
// or inside a stream; other errors keep their status, in OpenAI's shape.
func TestErrors(t *testing.T) {
	cloudtest.AWSEnv(t, envCreds)
	tests := []struct {
		name   string
		status int
		typ    string
		want   int
	}{
		{"throttling", 429, "ThrottlingException", 429},
		{"quota", 400, "ServiceQuotaExceededException", 429},
		{"unavailable", 503, "ServiceUnavailableException", 503},
		{"validation", 400, "ValidationException", 400},
		{"no access", 403, "AccessDeniedException", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeBedrock{fail: func() (int, string, string) { return tt.status, tt.typ, `{"message":"because ` + tt.name + `"}` }}
			_, err := newProvider(t, f, nil).Send(context.Background(), chat(false))
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Status != tt.want || gjson.GetBytes(pe.Body, "error.code").String() != tt.typ ||
				gjson.GetBytes(pe.Body, "error.message").String() != "because "+tt.name {
				t.Fatalf("err %v body %s", err, pe.Body)
			}
		})
	}
	f := &fakeBedrock{frames: func(w io.Writer) {
		_ = cloudtest.Frame(w, "throttlingException", []byte(`{"message":"Too many tokens"}`))
	}}
	_, err := newProvider(t, f, nil).Send(context.Background(), chat(true))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 429 {
		t.Fatalf("stream exception: %v", err)
	}
	// Inside a native stream the exception is Anthropic's error event.
	var buf bytes.Buffer
	_ = cloudtest.Frame(&buf, "serviceUnavailableException", []byte(`{"message":"busy"}`))
	ev, err := newEvents(&buf, true).Next()
	if err != nil || ev.Name != "error" || gjson.GetBytes(ev.Data, "error.type").String() != "overloaded_error" {
		t.Fatalf("event %q %s %v", ev.Name, ev.Data, err)
	}
}

// A message whose declared length is past the bound is refused before it
// is read; a stream cut inside a message is an unexpected end.
func TestEventStreamBounds(t *testing.T) {
	huge := []byte{0x7f, 0, 0, 0, 0, 0, 0, 0}
	if _, err := newEvents(bytes.NewReader(huge), false).Next(); err != errTooLarge {
		t.Fatalf("err %v", err)
	}
	var buf bytes.Buffer
	_ = cloudtest.Frame(&buf, "messageStart", []byte(`{"role":"assistant"}`))
	cut := buf.Bytes()[:buf.Len()-3]
	if _, err := newEvents(bytes.NewReader(cut), false).Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("err %v", err)
	}
	if _, err := newEvents(bytes.NewReader(nil), false).Next(); err != io.EOF {
		t.Fatalf("err %v", err)
	}
}
