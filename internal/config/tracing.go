package config

import (
	"net/url"
	"strings"
	"time"
)

// Tracing exports OpenTelemetry traces over OTLP (see docs/tracing.md).
// Every field may also come from the standard OTEL_* variables, which
// apply where the file is silent.
type Tracing struct {
	// Enabled: default off, unless the file omits it and
	// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// is set (OTEL_SDK_DISABLED=true turns that off again).
	Enabled *bool `yaml:"enabled"`
	// Endpoint is the collector's URL (http:// without TLS, https://
	// with). For http/protobuf a URL without a path gets /v1/traces.
	// Default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318
	// (http://localhost:4317 for grpc).
	Endpoint string `yaml:"endpoint"`
	// Protocol: http/protobuf or grpc. Default
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
	// else http/protobuf.
	Protocol string `yaml:"protocol"`
	// Headers are sent with every export (a collector's API key: use
	// ${ENV}). Default OTEL_EXPORTER_OTLP_HEADERS.
	Headers map[string]string `yaml:"headers"`
	// ServiceName is service.name. Default OTEL_SERVICE_NAME, else
	// switchboard.
	ServiceName string `yaml:"service_name"`
	// SampleRatio samples this share of the traces a client did not
	// start (a client's sampled traceparent is always followed), 0..1.
	// Default: OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, else 1.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// CaptureContent puts the request's messages and a unary answer's
	// choices on the spans (gen_ai.input.messages, gen_ai.output.messages).
	// Default false: no prompt or answer text leaves the gateway.
	CaptureContent bool `yaml:"capture_content"`
	// QueueSize bounds the ended spans waiting for export; when full a
	// span is dropped and counted (switchboard_trace_spans_total{outcome=
	// "dropped"}), never waited for. Default 4096, range 1..1,000,000.
	QueueSize int `yaml:"queue_size"`
	// BatchSize is the most spans sent in one export. Default 512, range
	// 1..queue_size.
	BatchSize int `yaml:"batch_size"`
	// BatchTimeout is the longest an ended span waits for others to share
	// its export. Default 2 s, range 10 ms..60 s.
	BatchTimeout Duration `yaml:"batch_timeout"`
	// ExportTimeout bounds one export, its retries included. Default 10 s,
	// range 100 ms..60 s.
	ExportTimeout Duration `yaml:"export_timeout"`
}

// Tracing protocols.
const (
	TracingHTTP = "http/protobuf"
	TracingGRPC = "grpc"
)

func (l *loader) tracingDefaults(c *Config) {
	t := &c.Tracing
	setDefault(l, "tracing.queue_size", &t.QueueSize, 4096)
	setDefault(l, "tracing.batch_size", &t.BatchSize, 512)
	setDefault(l, "tracing.batch_timeout", &t.BatchTimeout, Duration(2*time.Second))
	setDefault(l, "tracing.export_timeout", &t.ExportTimeout, Duration(10*time.Second))
}

func (l *loader) validateTracing(c *Config) {
	t := &c.Tracing
	if t.Protocol != "" {
		l.oneOf("tracing.protocol", t.Protocol, []string{TracingHTTP, TracingGRPC})
	}
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			l.errAt("tracing.endpoint", "want an http:// or https:// URL such as http://otel-collector:4318, got %q", t.Endpoint)
		}
	}
	if r := t.SampleRatio; r != nil {
		l.floatRange("tracing.sample_ratio", *r, 0, 1)
	}
	if l.intRange("tracing.queue_size", int64(t.QueueSize), 1, 1_000_000) {
		l.intRange("tracing.batch_size", int64(t.BatchSize), 1, int64(t.QueueSize))
	}
	l.durRange("tracing.batch_timeout", t.BatchTimeout, 10*time.Millisecond, time.Minute)
	l.durRange("tracing.export_timeout", t.ExportTimeout, 100*time.Millisecond, time.Minute)
	for k := range t.Headers {
		if k == "" || strings.IndexFunc(k, notTokenChar) >= 0 {
			l.errAt("tracing.headers", "header names are letters, digits and -, got %q", k)
		}
	}
}
