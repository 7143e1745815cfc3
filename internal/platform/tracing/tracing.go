// Package tracing is what orderd and the reference consumer share of
// OpenTelemetry: the tracer provider a mode names, the one propagator (W3C
// trace context and baggage) for gRPC metadata and Kafka record headers,
// and a log handler that puts the trace and span ids of the call a line is
// written for into the line.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Modes are the values of a -tracing setting.
const Modes = "off, stdout or otlp"

// NewProvider returns the tracer provider for mode ("", "off": nil). The
// OTLP exporter reads the standard OTEL_EXPORTER_OTLP_* variables
// (endpoint, headers, TLS); the resource is service (OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override it); the sampler reads
// OTEL_TRACES_SAMPLER (default: sample what the caller sampled, and every
// root). stdout writes each span as JSON to stderr.
func NewProvider(ctx context.Context, mode, service string) (*sdktrace.TracerProvider, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch mode {
	case "", "off":
		return nil, nil
	case "stdout":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	case "otlp":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing %q: use %s", mode, Modes)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing exporter %s: %w", mode, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Propagator is how trace context travels between processes: the W3C
// traceparent/tracestate and baggage headers, in gRPC metadata and in Kafka
// record headers alike.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// TraceParent is ctx's span context as a W3C traceparent header value, ""
// when ctx holds none: what a store keeps to continue the trace later.
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c.Get("traceparent")
}

// WithTraceParent returns ctx continuing the trace of traceparent (as a
// remote parent), in place of any span ctx holds; ctx as it is when
// traceparent is empty or not a valid one.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	remote := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(remote)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// The attributes LogHandler adds.
const (
	KeyTraceID = "trace_id"
	KeySpanID  = "span_id"
)

// LogHandler wraps h so that every record logged with a context that holds
// a span (a traced call: the gRPC request, the record a consumer applies)
// carries that span's trace_id and span_id (hex, as W3C traceparent writes
// them), so a log search by trace id finds every line of one call, in
// every process it crossed. Records logged without a context, or with one
// that holds no span, are passed on unchanged.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(KeyTraceID, sc.TraceID().String()), slog.String(KeySpanID, sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }
