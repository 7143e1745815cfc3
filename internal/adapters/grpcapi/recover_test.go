package grpcapi

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A handler that panics is answered INTERNAL, with nothing of the panic in
// the message; the panic and its stack are logged; the next call is served.
func TestRecoverPanicsAnswersInternalAndKeepsServing(t *testing.T) {
	var logs bytes.Buffer
	intercept := RecoverPanics(slog.New(slog.NewTextHandler(&logs, nil)))
	info := &grpc.UnaryServerInfo{FullMethod: "/atlasmart.orders.v1.OrderService/CreateOrder"}

	resp, err := intercept(context.Background(), "req", info, func(context.Context, any) (any, error) {
		panic("secret detail: nil map in handler")
	})
	if resp != nil || status.Code(err) != codes.Internal || strings.Contains(err.Error(), "secret") {
		t.Fatalf("after a panic: %v, %v; want INTERNAL without the panic's text", resp, err)
	}
	if !strings.Contains(logs.String(), "secret detail") || !strings.Contains(logs.String(), "recover_test.go") {
		t.Errorf("log = %q, want the panic and its stack", logs.String())
	}

	resp, err = intercept(context.Background(), "req", info, func(context.Context, any) (any, error) { return "ok", nil })
	if resp != "ok" || err != nil {
		t.Errorf("the next call = %v, %v; want it served", resp, err)
	}
}
