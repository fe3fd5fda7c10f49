package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"

	"switchboard/internal/config"
	"switchboard/internal/tags"
	"switchboard/internal/tracing/otlptest"
)

func on() *bool { b := true; return &b }

func cfgFor(endpoint string) config.Tracing {
	return config.Tracing{Enabled: on(), Endpoint: endpoint, QueueSize: 1024, BatchSize: 64,
		BatchTimeout: config.Duration(50 * time.Millisecond), ExportTimeout: config.Duration(2 * time.Second)}
}

func newTracer(t *testing.T, c config.Tracing, reg prometheus.Registerer) *Tracer {
	t.Helper()
	tr, err := New(c, Options{Registerer: reg, Getenv: func(string) (string, bool) { return "", false }, Version: "test"})
	if err != nil || tr == nil {
		t.Fatalf("New: %v %v", tr, err)
	}
	cfg := &config.Config{Providers: map[string]*config.Provider{
		"oa":  {Name: "oa", Type: "openai", BaseURL: "https://api.openai.com/v1"},
		"grq": {Name: "grq", Type: "openai", BaseURL: "https://api.groq.com/openai/v1"},
		"vl":  {Name: "vl", Type: "openai", BaseURL: "http://10.0.0.7:8000/v1"},
	}}
	tr.Configure(cfg)
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

func flush(t *testing.T, tr *Tracer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// A request continues the client's trace; its attempts are client spans
// under it with the GenAI attributes, and each attempt's traceparent is
// what an upstream would receive.
func TestRequestAndAttempts(t *testing.T) {
	for _, grpcMode := range []bool{false, true} {
		name := "http"
		if grpcMode {
			name = "grpc"
		}
		t.Run(name, func(t *testing.T) {
			var rcv *otlptest.Receiver
			c := config.Tracing{}
			if grpcMode {
				rcv = otlptest.StartGRPC(t)
				c = cfgFor(rcv.URL)
				c.Protocol = config.TracingGRPC
			} else {
				rcv = otlptest.Start(t)
				c = cfgFor(rcv.URL)
			}
			tr := newTracer(t, c, nil)

			const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
			req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader("{}"))
			req.Header.Set("Traceparent", "00-"+clientTrace+"-00f067aa0ba902b7-01")
			ctx, rq := tr.StartRequest(req, "/v1/chat/completions", "req_1")
			ts, _ := tags.Parse([]string{"team=search"})
			Caller(ctx, "acme", "k1", "gpt", "chat/completions", ts)

			// First attempt: a 503, then a retry event; second: the answer.
			a1ctx, a1 := tr.StartAttempt(ctx, AttemptInfo{Provider: "grq", Model: "llama", GatewayModel: "gpt", Endpoint: "chat/completions"})
			h := http.Header{}
			Inject(a1ctx, h)
			a1.Admitted(1000)
			a1.Failed(503, "server_error")
			a1.End()
			Event(ctx, "switchboard.retry", attribute.String("provider", "grq"))
			_, a2 := tr.StartAttempt(ctx, AttemptInfo{Provider: "oa", Model: "gpt-4o", GatewayModel: "gpt", Endpoint: "chat/completions", Retry: 1})
			a2.Answer([]byte(`{"id":"c1","model":"gpt-4o-2024","choices":[{"finish_reason":"stop","message":{"content":"hi"}}]}`), 12, 3, true, 4200)
			a2.End()
			a2.End() // twice is once
			rq.End(200)
			flush(t, tr)

			spans := otlptest.Trace(rcv.Spans(), clientTrace)
			if len(spans) != 3 {
				t.Fatalf("%d spans in the client's trace, want 3: %+v", len(spans), rcv.Spans())
			}
			server := otlptest.Named(spans, "POST /v1/chat/completions")
			if len(server) != 1 || server[0].ParentID != "00f067aa0ba902b7" || server[0].Kind != 2 {
				t.Fatalf("server span %+v", server)
			}
			sv := server[0]
			if sv.Attrs["switchboard.tenant"] != "acme" || sv.Attrs["switchboard.tag.team"] != "search" || sv.Attrs["http.response.status_code"] != int64(200) ||
				sv.Attrs["gen_ai.request.model"] != "gpt" || sv.Service != "switchboard" {
				t.Fatalf("server attrs %+v", sv.Attrs)
			}
			if sv.Event("switchboard.retry") == nil {
				t.Fatal("no retry event")
			}
			var first, second otlptest.Span
			for _, s := range spans {
				switch s.Name {
				case "chat llama":
					first = s
				case "chat gpt-4o":
					second = s
				}
			}
			for _, a := range []otlptest.Span{first, second} {
				if a.ParentID != sv.SpanID || a.Kind != 3 {
					t.Fatalf("attempt %q is not a client child of the server span: %+v", a.Name, a)
				}
			}
			if first.Attrs["gen_ai.provider.name"] != "groq" || first.Attrs["http.response.status_code"] != int64(503) ||
				first.Attrs["error.type"] != "server_error" || first.StatusCode != 2 || first.Attrs["switchboard.reserved_nano_usd"] != int64(1000) {
				t.Fatalf("first attempt %+v", first)
			}
			if want := "00-" + clientTrace + "-" + first.SpanID + "-01"; h.Get("Traceparent") != want {
				t.Fatalf("upstream traceparent %q, want %q", h.Get("Traceparent"), want)
			}
			a := second.Attrs
			if a["gen_ai.operation.name"] != "chat" || a["gen_ai.provider.name"] != "openai" ||
				a["gen_ai.request.model"] != "gpt-4o" || a["gen_ai.response.model"] != "gpt-4o-2024" || a["gen_ai.usage.input_tokens"] != int64(12) ||
				a["gen_ai.usage.output_tokens"] != int64(3) || a["switchboard.cost_nano_usd"] != int64(4200) {
				t.Fatalf("second attempt attrs %+v", a)
			}
			if fr, _ := a["gen_ai.response.finish_reasons"].([]any); len(fr) != 1 || fr[0] != "stop" {
				t.Fatalf("finish reasons %v", a["gen_ai.response.finish_reasons"])
			}
			if _, ok := a["gen_ai.output.messages"]; ok {
				t.Fatal("content captured without capture_content")
			}
		})
	}
}

// A queued job's trace: the ingress's server span, then on the worker a
// queue-wait span and the job's span, all one trace.
func TestJobContinuesTrace(t *testing.T) {
	rcv := otlptest.Start(t)
	tr := newTracer(t, cfgFor(rcv.URL), nil)
	ctx, ingress := tr.StartRequest(httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions", "r")
	tp := Traceparent(ctx)
	if tp == "" {
		t.Fatal("no traceparent")
	}
	enq := time.Now()
	wctx, job := tr.Job(context.Background(), tp, "/v1/chat/completions", "job1", enq, enq.Add(30*time.Millisecond))
	_, att := tr.StartAttempt(wctx, AttemptInfo{Provider: "vl", Model: "m", Endpoint: "chat/completions"})
	att.End()
	job.End(200)
	ingress.End(200)
	flush(t, tr)
	spans := rcv.Spans()
	if len(spans) != 4 {
		t.Fatalf("%d spans: %+v", len(spans), spans)
	}
	tid := spans[0].TraceID
	byName := map[string]otlptest.Span{}
	for _, s := range spans {
		if s.TraceID != tid {
			t.Fatalf("two traces: %+v", spans)
		}
		byName[s.Name] = s
	}
	root := byName["POST /v1/chat/completions"]
	wait, jb, at := byName["queue wait"], byName["job /v1/chat/completions"], byName["chat m"]
	if wait.ParentID != root.SpanID || jb.ParentID != root.SpanID || at.ParentID != jb.SpanID {
		t.Fatalf("tree: %+v", byName)
	}
	if d := time.Duration(wait.EndNano - wait.StartNano); d != 30*time.Millisecond {
		t.Fatalf("queue wait %v", d)
	}
	if at.Attrs["gen_ai.provider.name"] != "openai" || at.Attrs["server.address"] != "10.0.0.7" {
		t.Fatalf("vllm attempt %+v", at.Attrs)
	}
}

func TestCaptureContent(t *testing.T) {
	rcv := otlptest.Start(t)
	c := cfgFor(rcv.URL)
	c.CaptureContent = true
	tr := newTracer(t, c, nil)
	ctx, rq := tr.StartRequest(httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions", "r")
	tr.Input(ctx, []byte(`{"model":"m","messages":[{"role":"user","content":"secret plan"}]}`))
	_, a := tr.StartAttempt(ctx, AttemptInfo{Provider: "oa", Model: "m", Endpoint: "chat/completions"})
	a.Answer([]byte(`{"choices":[{"message":{"content":"the answer"}}]}`), 0, 0, false, -1)
	a.End()
	rq.End(200)
	flush(t, tr)
	var in, out string
	for _, s := range rcv.Spans() {
		if v, ok := s.Attrs["gen_ai.input.messages"].(string); ok {
			in = v
		}
		if v, ok := s.Attrs["gen_ai.output.messages"].(string); ok {
			out = v
		}
	}
	if !strings.Contains(in, "secret plan") || !strings.Contains(out, "the answer") {
		t.Fatalf("in %q out %q", in, out)
	}
}

// A collector that hangs costs dropped spans, counted, and no request
// time: ending spans never waits for the export.
func TestCollectorDownNeverWaits(t *testing.T) {
	block := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(block)
	c := cfgFor(hang.URL)
	c.QueueSize, c.BatchSize = 4, 2
	c.ExportTimeout = config.Duration(time.Second)
	reg := prometheus.NewRegistry()
	tr := newTracer(t, c, reg)
	start := time.Now()
	for range 200 {
		ctx, rq := tr.StartRequest(httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions", "r")
		_, a := tr.StartAttempt(ctx, AttemptInfo{Provider: "oa", Model: "m", Endpoint: "chat/completions"})
		a.End()
		rq.End(200)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("400 spans took %v with the collector hanging", d)
	}
	if n := testutil.ToFloat64(tr.queue.spans.WithLabelValues("dropped")); n < 300 {
		t.Fatalf("dropped %v of 400 with a queue of 4", n)
	}
}

func TestSampling(t *testing.T) {
	rcv := otlptest.Start(t)
	c := cfgFor(rcv.URL)
	zero := 0.0
	c.SampleRatio = &zero
	tr := newTracer(t, c, nil)
	// Not sampled: no span, and nothing sent upstream either way.
	ctx, rq := tr.StartRequest(httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions", "r")
	if Recording(ctx) {
		t.Fatal("recording at ratio 0")
	}
	rq.End(200)
	// A client's sampled trace is followed at any ratio.
	req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx, rq = tr.StartRequest(req, "/v1/chat/completions", "r")
	if !Recording(ctx) {
		t.Fatal("a sampled parent is not followed")
	}
	rq.End(200)
	flush(t, tr)
	if n := len(rcv.Spans()); n != 1 {
		t.Fatalf("%d spans, want the followed one", n)
	}
}

func TestResolve(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	half := 0.5
	tests := []struct {
		name string
		cfg  config.Tracing
		env  func(string) (string, bool)
		want Settings
	}{
		{"off by default", config.Tracing{}, env(), Settings{On: false, Endpoint: "http://localhost:4318", Protocol: "http/protobuf", Service: "switchboard"}},
		{"env endpoint turns on", config.Tracing{}, env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SERVICE_NAME", "gw"),
			Settings{On: true, Protocol: "http/protobuf", Service: "gw"}},
		{"sdk disabled", config.Tracing{}, env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SDK_DISABLED", "true"),
			Settings{On: false, Protocol: "http/protobuf", Service: "switchboard"}},
		{"config off wins", config.Tracing{Enabled: new(bool)}, env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
			Settings{On: false, Protocol: "http/protobuf", Service: "switchboard"}},
		{"grpc from env", config.Tracing{Enabled: on()}, env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
			Settings{On: true, Endpoint: "http://localhost:4317", Protocol: "grpc", Service: "switchboard"}},
		{"config wins", config.Tracing{Enabled: on(), Endpoint: "https://x", ServiceName: "s", SampleRatio: &half},
			env("OTEL_SERVICE_NAME", "gw", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
			Settings{On: true, Endpoint: "https://x", Protocol: "grpc", Service: "s", Ratio: &half}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Resolve(tc.cfg, tc.env)
			if got.On != tc.want.On || got.Endpoint != tc.want.Endpoint || got.Protocol != tc.want.Protocol || got.Service != tc.want.Service ||
				(got.Ratio == nil) != (tc.want.Ratio == nil) {
				t.Fatalf("got %+v want %+v", got, tc.want)
			}
		})
	}
	if httpEndpoint("http://c:4318") != "http://c:4318/v1/traces" || httpEndpoint("http://c:4318/custom") != "http://c:4318/custom" {
		t.Fatal("httpEndpoint")
	}
}

// A nil tracer is off: every call is a no-op, and no header is written.
func TestNilTracer(t *testing.T) {
	var tr *Tracer
	ctx, rq := tr.StartRequest(httptest.NewRequest("POST", "/v1/chat/completions", nil), "/x", "r")
	actx, a := tr.StartAttempt(ctx, AttemptInfo{Provider: "p"})
	a.Admitted(1)
	a.Failed(500, "x")
	a.Answer([]byte(`{}`), 1, 1, true, 0)
	a.End()
	rq.End(200)
	h := http.Header{}
	Inject(actx, h)
	if len(h) != 0 || Traceparent(actx) != "" || tr.Shutdown(context.Background()) != nil {
		t.Fatal("nil tracer did something")
	}
}

// gen_ai.provider.name and server.address: a known API host names the
// provider; else its type does, the clouds' on any of their hosts.
func TestDescribeProvider(t *testing.T) {
	for _, tc := range []struct {
		typ, base, system, host string
	}{
		{"openai", "https://api.openai.com/v1", "openai", "api.openai.com"},
		{"openai", "http://10.0.0.7:8000/v1", "openai", "10.0.0.7"},
		{"openai", "https://api.groq.com/openai/v1", "groq", "api.groq.com"},
		{"gemini", "https://proxy.internal/v1beta", "gcp.gemini", "proxy.internal"},
		{config.TypeAzure, "https://acme.cognitiveservices.azure.com/openai/v1", "azure.ai.openai", "acme.cognitiveservices.azure.com"},
		{config.TypeAzure, "https://acme.openai.azure.com/openai/v1", "azure.ai.openai", "acme.openai.azure.com"},
		{config.TypeBedrock, config.BedrockURL("eu-west-1"), "aws.bedrock", "bedrock-runtime.eu-west-1.amazonaws.com"},
		{config.TypeBedrock, "https://vpce-1.bedrock.internal", "aws.bedrock", "vpce-1.bedrock.internal"},
		{config.TypeVertex, config.VertexURL("us-central1"), "gcp.vertex_ai", "us-central1-aiplatform.googleapis.com"},
		{config.TypeMock, "", "switchboard.mock", ""},
	} {
		got := describe(&config.Provider{Type: tc.typ, BaseURL: tc.base})
		if got.system != tc.system || got.host != tc.host {
			t.Errorf("%s %s: system %q host %q, want %q %q", tc.typ, tc.base, got.system, got.host, tc.system, tc.host)
		}
	}
}
