// Command example is what a client team's order pipeline looks like with
// the orderd client: each business intent (one order to place) gets one
// request_id, kept across every retry, and the client library does the
// retrying, so the pipeline sees an order or a final error — never an
// error it must retry itself.
//
//	go run github.com/atlasmart/orderd/proto/client/example \
//	    -addr 127.0.0.1:8080 -ca-file .dev/ca.pem -intents 1000
//
// With the token in $ORDERD_API_KEY (make run prints one). It prints one
// JSON summary on stdout; -out writes one JSON line per intent (its
// request_id, order_id and outcome); progress goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
	"github.com/atlasmart/orderd/proto/client"
)

// summary is what the run printed.
type summary struct {
	Intents int `json:"intents"`
	// Orders is the intents that ended with an order; Replayed of them
	// were answered from orderd's record of an earlier attempt.
	Orders   int `json:"orders"`
	Replayed int `json:"replayed"`
	// RetryableErrors is the intents that ended with an error a later retry
	// could still complete (client.IsRetryable): the library's job is to
	// keep this at 0.
	RetryableErrors int `json:"retryable_errors"`
	// FinalErrors is the intents that ended with a final error (invalid,
	// conflict, failed, denied).
	FinalErrors int     `json:"final_errors"`
	Seconds     float64 `json:"seconds"`
}

// intent is one line of -out.
type intent struct {
	RequestID string `json:"request_id"`
	OrderID   string `json:"order_id,omitempty"`
	Replayed  bool   `json:"replayed,omitempty"`
	Error     string `json:"error,omitempty"`
}

func main() {
	var (
		addr        = flag.String("addr", "127.0.0.1:8080", "orderd's gRPC address (a gRPC target: dns:///host:port spreads calls over every address)")
		intents     = flag.Int("intents", 1000, "orders to place, one business intent each")
		concurrency = flag.Int("concurrency", 16, "intents in flight at once")
		customers   = flag.Int("customers", 20, "customers the orders are spread over")
		prefix      = flag.String("customer-prefix", "example", "customer ids are PREFIX-N")
		out         = flag.String("out", "", "write one JSON line per intent to this file")
		tokenFile   = flag.String("token-file", "", "file holding an API key or JWT (default: $ORDERD_API_KEY)")
		creds       client.Credentials
	)
	flag.StringVar(&creds.CAFile, "ca-file", "", "PEM CA that signed orderd's certificate (default: system roots)")
	flag.StringVar(&creds.CertFile, "cert-file", "", "PEM client certificate (mutual TLS identity)")
	flag.StringVar(&creds.KeyFile, "key-file", "", "PEM key of -cert-file")
	flag.BoolVar(&creds.Plaintext, "plaintext", false, "no TLS, no credentials (orderd -insecure)")
	flag.Parse()
	log.SetFlags(0)
	creds.Token = os.Getenv("ORDERD_API_KEY")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			log.Fatal(err)
		}
		creds.Token = strings.TrimSpace(string(b))
	}

	// A pipeline that can wait: up to 20 attempts per call, inside a
	// two-minute budget per intent, rides out a database node or an orderd
	// instance going away.
	c, err := client.New(*addr, client.WithCredentials(creds), client.WithPolicy(client.Policy{MaxAttempts: 20}))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	start := time.Now()
	results := make([]intent, *intents)
	var done atomic.Int64
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(*concurrency)
	for i := range *intents {
		g.Go(func() error {
			results[i] = place(ctx, c, fmt.Sprintf("%s-%d", *prefix, i%*customers), i)
			if n := done.Add(1); n%10 == 0 || int(n) == *intents {
				fmt.Fprintf(os.Stderr, "progress %d/%d\n", n, *intents)
			}
			return nil
		})
	}
	_ = g.Wait()

	s := summary{Intents: *intents, Seconds: time.Since(start).Seconds()}
	for _, r := range results {
		switch {
		case r.Error == "":
			s.Orders++
			if r.Replayed {
				s.Replayed++
			}
		case strings.HasPrefix(r.Error, "retryable: "):
			s.RetryableErrors++
		default:
			s.FinalErrors++
		}
	}
	if *out != "" {
		if err := writeLines(*out, results); err != nil {
			log.Fatal(err)
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(s)
}

// place is one business intent: one order, one request_id, whatever it
// takes. The request_id is made here once (a real pipeline stores it with
// the intent before the first call, so that a restart retries it too).
func place(ctx context.Context, c *client.Client, customer string, i int) intent {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req := &ordersv1.CreateOrderRequest{
		RequestId:  client.NewRequestID(),
		CustomerId: customer,
		Currency:   "EUR",
		Total:      fmt.Sprintf("%d.%02d", 10+i%90, i%100),
	}
	resp, err := c.CreateOrder(ctx, req)
	r := intent{RequestID: req.GetRequestId()}
	var ce *client.Error
	switch {
	case err == nil:
		r.OrderID, r.Replayed = resp.GetOrder().GetOrderId(), resp.GetReplayed()
	case client.IsRetryable(err):
		r.Error = "retryable: " + err.Error() // the pipeline would retry it later, with req.RequestId
	case errors.As(err, &ce):
		r.Error = "final: " + ce.Error()
	default:
		r.Error = "final: " + err.Error()
	}
	return r
}

func writeLines(path string, rs []intent) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
