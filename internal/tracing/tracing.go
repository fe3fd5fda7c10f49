// Package tracing exports OpenTelemetry traces of the gateway's requests
// over OTLP (HTTP or gRPC): a server span per client request (continuing
// the client's W3C traceparent), a client span per provider attempt with
// the GenAI semantic conventions (gen_ai.*), and events for the attempt
// loop's decisions (retries, pauses, circuits, hedges, fallbacks,
// admission, spend). Each attempt's span is sent upstream as traceparent;
// a queued job carries its ingress span to the worker, so a request is one
// trace across replicas.
//
// A nil *Tracer is tracing off: every method is a no-op, and the planes
// call them unconditionally. Export never slows a request: an ended span
// is handed to a bounded queue without waiting (a full queue drops it,
// counted in switchboard_trace_spans_total{outcome="dropped"}), and one
// goroutine exports batches with a deadline.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"switchboard/internal/config"
)

// Tracer makes the gateway's spans. Create it with New; nil is off.
type Tracer struct {
	tp      *sdktrace.TracerProvider
	t       trace.Tracer
	content bool
	queue   *batcher
	// providers maps a provider's config name to its GenAI name and
	// host (Configure).
	providers atomic.Pointer[map[string]providerInfo]
}

// Options are what New needs besides the config.
type Options struct {
	// Registerer takes switchboard_trace_spans_total (nil: not registered).
	Registerer prometheus.Registerer
	// Log receives export failures (rate-limited by the batcher).
	Log *slog.Logger
	// Getenv reads the OTEL_* variables (nil: the process environment).
	Getenv func(string) (string, bool)
	// Version is service.version.
	Version string
}

// Settings are the effective tracing settings: the config, with the
// OTEL_* variables where it is silent.
type Settings struct {
	On bool
	// Endpoint is "" when the exporter is to read it from the environment.
	Endpoint string
	Protocol string
	Service  string
	// Ratio is nil when the sampler comes from OTEL_TRACES_SAMPLER (or
	// the SDK's default, parent-based always-on).
	Ratio *float64
}

// Resolve reads the effective settings of cfg under getenv.
func Resolve(cfg config.Tracing, getenv func(string) (string, bool)) Settings {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	env := func(k string) string { v, _ := getenv(k); return strings.TrimSpace(v) }
	s := Settings{Endpoint: cfg.Endpoint, Protocol: cfg.Protocol, Service: cfg.ServiceName, Ratio: cfg.SampleRatio}
	switch {
	case cfg.Enabled != nil:
		s.On = *cfg.Enabled
	default:
		s.On = (env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_ENDPOINT") != "") &&
			!strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") && env("OTEL_TRACES_EXPORTER") != "none"
	}
	if s.Protocol == "" {
		s.Protocol = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if s.Protocol == "" {
			s.Protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		if s.Protocol != config.TracingGRPC {
			s.Protocol = config.TracingHTTP // the spec's default (http/json is not supported: protobuf)
		}
	}
	if s.Endpoint == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		s.Endpoint = "http://localhost:4318"
		if s.Protocol == config.TracingGRPC {
			s.Endpoint = "http://localhost:4317"
		}
	}
	if s.Service == "" {
		s.Service = env("OTEL_SERVICE_NAME")
	}
	if s.Service == "" {
		s.Service = "switchboard"
	}
	return s
}

// New builds the tracer of cfg; nil (and no error) when tracing is off.
func New(cfg config.Tracing, o Options) (*Tracer, error) {
	s := Resolve(cfg, o.Getenv)
	if !s.On {
		return nil, nil
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	exp, err := exporter(cfg, s)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(context.Background(), resource.WithAttributes(
		attribute.String("service.name", s.Service), attribute.String("service.version", o.Version)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	q := newBatcher(exp, cfg.QueueSize, cfg.BatchSize, cfg.BatchTimeout.D(), cfg.ExportTimeout.D(), o.Log, o.Registerer)
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(q), sdktrace.WithResource(res)}
	if s.Ratio != nil {
		// A client's sampled traceparent is followed; a trace the gateway
		// starts is sampled at the ratio.
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*s.Ratio))))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracer{tp: tp, t: tp.Tracer("switchboard"), content: cfg.CaptureContent, queue: q}, nil
}

// exporter is the OTLP exporter of s; it does not connect until the first
// export (a collector that is down at boot is not an error).
func exporter(cfg config.Tracing, s Settings) (*otlptrace.Exporter, error) {
	timeout := cfg.ExportTimeout.D()
	// Retries stay within the export's deadline: the batcher never waits
	// longer than that for one batch.
	const first, most = 200 * time.Millisecond, time.Second
	ctx := context.Background()
	if s.Protocol == config.TracingGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithTimeout(timeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: first, MaxInterval: most, MaxElapsedTime: timeout})}
		if s.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(s.Endpoint))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithTimeout(timeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: first, MaxInterval: most, MaxElapsedTime: timeout})}
	if s.Endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(httpEndpoint(s.Endpoint)))
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	return otlptracehttp.New(ctx, opts...)
}

// httpEndpoint gives a base URL (no path) the traces path, as
// OTEL_EXPORTER_OTLP_ENDPOINT is read.
func httpEndpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return raw
	}
	u.Path = "/v1/traces"
	return u.String()
}

// Shutdown exports what is queued (within ctx) and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Flush exports what is queued now (tests; before a graceful exit).
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// CaptureContent reports tracing.capture_content.
func (t *Tracer) CaptureContent() bool { return t != nil && t.content }

// ratioString renders a ratio for logs.
func ratioString(r *float64) string {
	if r == nil {
		return "from OTEL_TRACES_SAMPLER (default parentbased_always_on)"
	}
	return strconv.FormatFloat(*r, 'g', -1, 64)
}

// Describe is the one log line naming where spans go.
func Describe(s Settings) []any {
	ep := "from OTEL_EXPORTER_OTLP_*"
	if u, err := url.Parse(s.Endpoint); err == nil && s.Endpoint != "" {
		ep = u.Redacted()
	}
	return []any{"endpoint", ep, "protocol", s.Protocol, "service", s.Service, "sample_ratio", ratioString(s.Ratio)}
}
