package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A context from a W3C traceparent, as a server or consumer gets it.
func remoteContext(t *testing.T, traceparent string) context.Context {
	t.Helper()
	ctx := Propagator().Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	if !trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatalf("traceparent %q did not extract", traceparent)
	}
	return ctx
}

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := json.NewDecoder(buf)
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// Lines of a traced call carry its trace and span ids, through loggers
// derived with With and WithGroup alike; lines without one carry none.
func TestLogHandlerAddsTheTraceOfTheContext(t *testing.T) {
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := remoteContext(t, "00-"+traceID+"-"+spanID+"-01")
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil)))

	log.InfoContext(ctx, "traced", "n", 1)
	log.With("component", "x").WarnContext(ctx, "traced, derived")
	log.Info("no context")
	log.InfoContext(context.Background(), "no span")

	got := lines(t, &buf)
	if len(got) != 4 {
		t.Fatalf("%d lines, want 4: %v", len(got), got)
	}
	for _, l := range got[:2] {
		if l[KeyTraceID] != traceID || l[KeySpanID] != spanID {
			t.Errorf("line %q: trace_id %v span_id %v, want %s %s", l["msg"], l[KeyTraceID], l[KeySpanID], traceID, spanID)
		}
	}
	if got[1]["component"] != "x" {
		t.Errorf("the derived logger lost its attribute: %v", got[1])
	}
	for _, l := range got[2:] {
		if _, ok := l[KeyTraceID]; ok {
			t.Errorf("line %q without a span carries trace_id %v", l["msg"], l[KeyTraceID])
		}
	}
}

// A level the handler does not enable stays off: the wrapper does not log
// what its handler would not.
func TestLogHandlerKeepsTheLevel(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	log.InfoContext(remoteContext(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "below the level")
	if buf.Len() != 0 {
		t.Fatalf("an INFO line was written at level WARN: %s", buf.String())
	}
}

func TestNewProviderRefusesAnUnknownMode(t *testing.T) {
	if _, err := NewProvider(context.Background(), "jaeger", "x"); err == nil {
		t.Fatal("mode jaeger was accepted")
	}
	tp, err := NewProvider(context.Background(), "off", "x")
	if err != nil || tp != nil {
		t.Fatalf("off: %v, %v; want no provider", tp, err)
	}
}

// A traceparent kept and restored names the same trace and parent span; an
// empty or malformed one leaves the context as it is.
func TestTraceParentRoundTrips(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if got := TraceParent(remoteContext(t, tp)); got != tp {
		t.Errorf("TraceParent = %q, want %q", got, tp)
	}
	if got := TraceParent(context.Background()); got != "" {
		t.Errorf("TraceParent of no span = %q, want empty", got)
	}
	restored := WithTraceParent(context.Background(), tp)
	if got := TraceParent(restored); got != tp {
		t.Errorf("restored %q, want %q", got, tp)
	}
	other := remoteContext(t, "00-11111111111111111111111111111111-2222222222222222-01")
	if got := TraceParent(WithTraceParent(other, tp)); got != tp {
		t.Errorf("restored over another span: %q, want %q", got, tp)
	}
	for _, bad := range []string{"", "00-zz-yy-01", "not a traceparent"} {
		if got := TraceParent(WithTraceParent(other, bad)); got != "00-11111111111111111111111111111111-2222222222222222-01" {
			t.Errorf("WithTraceParent(%q) changed the context's trace to %q", bad, got)
		}
	}
}
