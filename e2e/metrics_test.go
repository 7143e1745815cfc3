package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// scrape reads one sample of orderd's /metrics (0 if absent).
func scrape(t *testing.T, p *orderdProcess, series string) float64 {
	t.Helper()
	v, _ := scrapeAt(t, p.metricsAddr, series)
	return v
}

// scrapeAt reads one sample from the /metrics at addr; false if the series
// is absent.
func scrapeAt(t *testing.T, addr, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s/metrics: %v", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`).FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("sample %s: %v", series, err)
	}
	return v, true
}

// TestMetricsCountWhatClientsSaw: a new request, its replay (from the replay
// cache) and a conflicting reuse move the outcome and gRPC counters an operator alerts on.
func TestMetricsCountWhatClientsSaw(t *testing.T) {
	p := startOrderd(t)
	series := map[string]string{
		"new":      `orderd_create_outcomes_total{outcome="new"}`,
		"replayed": `orderd_create_outcomes_total{outcome="replayed"}`,
		"conflict": `orderd_create_outcomes_total{outcome="conflict"}`,
		"ok":       `orderd_grpc_requests_total{code="OK",method="/atlasmart.orders.v1.OrderService/CreateOrder"}`,
		"failed":   `orderd_grpc_requests_total{code="FailedPrecondition",method="/atlasmart.orders.v1.OrderService/CreateOrder"}`,
		"cached":   `orderd_replay_cache_hits_total`,
		// The standard gRPC server metrics (go-grpc-middleware's), beside orderd's.
		"std_ok":     `grpc_server_handled_total{grpc_code="OK",grpc_method="CreateOrder",grpc_service="atlasmart.orders.v1.OrderService",grpc_type="unary"}`,
		"std_failed": `grpc_server_handled_total{grpc_code="FailedPrecondition",grpc_method="CreateOrder",grpc_service="atlasmart.orders.v1.OrderService",grpc_type="unary"}`,
		"std_timed":  `grpc_server_handling_seconds_count{grpc_method="CreateOrder",grpc_service="atlasmart.orders.v1.OrderService",grpc_type="unary"}`,
	}
	before := map[string]float64{}
	for k, s := range series {
		before[k] = scrape(t, p, s)
	}
	req := newRequest("3.30")
	if _, _, err := create(t, p.client, req); err != nil {
		t.Fatal(err)
	}
	if _, _, err := create(t, p.client, req); err != nil {
		t.Fatal(err)
	}
	conflicting := newRequest("4.40")
	conflicting.RequestId, conflicting.CustomerId = req.RequestId, req.CustomerId
	if _, _, err := create(t, p.client, conflicting); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("conflicting reuse: %v", err)
	}
	// The replay is answered from this instance's cache of recorded outcomes.
	want := map[string]float64{"new": 1, "replayed": 1, "conflict": 1, "ok": 2, "failed": 1, "cached": 1, "std_ok": 2, "std_failed": 1, "std_timed": 3}
	for k, s := range series {
		if got := scrape(t, p, s) - before[k]; got != want[k] {
			t.Errorf("%s went up by %v, want %v", s, got, want[k])
		}
	}
	// Shards still leased by a process an earlier test killed come free
	// when those leases expire (15 s).
	if _, err := eventually(30*time.Second, func() error {
		if v := scrape(t, p, `orderd_reconciler_owned_shards`); v < 1 {
			return fmt.Errorf("orderd_reconciler_owned_shards = %v", v)
		}
		return nil
	}); err != nil {
		t.Errorf("the reconciler inside serve should own shards: %v", err)
	}
}
