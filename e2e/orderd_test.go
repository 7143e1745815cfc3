package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/tools/freeport"
	"github.com/atlasmart/orderd/internal/tools/localcluster"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// orderdProcess is one running orderd binary.
type orderdProcess struct {
	addr        string
	metricsAddr string // its Prometheus /metrics listener
	cmd         *exec.Cmd
	output      *syncBuffer
	exited      chan struct{} // closed when the process has exited
	conn        *grpc.ClientConn
	client      ordersv1.OrderServiceClient
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launchOrderd starts `orderd serve` on a free loopback port against this
// run's keyspace, with extra ORDERD_* settings, and waits until its health
// service says SERVING.
func launchOrderd(env ...string) (*orderdProcess, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	return launchOrderdAt(addr, env...)
}

// launchOrderdAt is launchOrderd on a given address (to replace a process
// that died, behind the same address its clients use).
func launchOrderdAt(addr string, env ...string) (*orderdProcess, error) {
	return launchBinaryAt(orderdBinary, addr, env...)
}

// launchBinaryAt is launchOrderdAt of another orderd binary (an older
// release's).
func launchBinaryAt(binary, addr string, env ...string) (*orderdProcess, error) {
	metricsAddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	p, err := spawnBinary(binary, "serve", addr, metricsAddr, env...)
	if err != nil {
		return nil, err
	}
	conn, err := dial(addr, sec.defaultClient())
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("dial orderd: %w", err)
	}
	p.conn, p.client = conn, ordersv1.NewOrderServiceClient(conn)

	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: ordersv1.OrderService_ServiceDesc.ServiceName})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("orderd exited during start (%v):\n%s", p.cmd.ProcessState, p.output.String())
		default:
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("orderd not SERVING within 60s (last: %v %v):\n%s", resp.GetStatus(), err, p.output.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// spawnOrderd starts `orderd <command>` against this run's keyspace and
// broker, listening on addr (gRPC, for serve) and metricsAddr, with extra
// ORDERD_* settings; it does not wait for the process to be ready.
func spawnOrderd(command, addr, metricsAddr string, env ...string) (*orderdProcess, error) {
	return spawnBinary(orderdBinary, command, addr, metricsAddr, env...)
}

// spawnBinary is spawnOrderd of another orderd binary.
func spawnBinary(binary, command, addr, metricsAddr string, env ...string) (*orderdProcess, error) {
	p := &orderdProcess{addr: addr, metricsAddr: metricsAddr, output: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, command)
	p.cmd.Env = append(orderdEnv(),
		"ORDERD_CASSANDRA_CONTACT_POINTS="+strings.Join(cluster.ContactPoints(), ","),
		"ORDERD_KEYSPACE="+keyspace,
		"ORDERD_GRPC_ADDR="+addr,
		"ORDERD_METRICS_ADDR="+metricsAddr,
		"ORDERD_LOG_FORMAT=text",
		"ORDERD_KAFKA_BROKERS="+broker.Addr(),
		"ORDERD_KAFKA_TOPIC="+eventsTopic,
		"ORDERD_KAFKA_PARTITIONS=3",
	)
	p.cmd.Env = append(p.cmd.Env, kafkaEnv("ORDERD_", localcluster.OrderdUser)...)
	p.cmd.Env = append(append(p.cmd.Env, sec.serverEnv()...), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start orderd %s: %w", command, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	return p, nil
}

// startOrderd is launchOrderd for one test: the process stops when the test
// ends, and its output is logged if the test failed.
func startOrderd(t *testing.T, env ...string) *orderdProcess {
	t.Helper()
	return startBinary(t, orderdBinary, env...)
}

// startBinary is startOrderd of another orderd binary.
func startBinary(t *testing.T, binary string, env ...string) *orderdProcess {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := launchBinaryAt(binary, addr, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("orderd output:\n%s", p.output.String())
		}
	})
	return p
}

// stop sends SIGTERM and waits for a graceful exit (SIGKILL after 30 s).
func (p *orderdProcess) stop() error {
	if p.conn != nil {
		p.conn.Close()
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("orderd did not stop within 30s of SIGTERM")
	}
}

// waitExit waits for the process to exit by itself and returns its exit code.
func (p *orderdProcess) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("orderd still running after %s", within)
		return -1
	}
}

// freshSession opens a new session on this run's keyspace, so row checks see
// the cluster's state rather than anything cached by orderd or the test.
func freshSession(t *testing.T) *gocql.Session {
	t.Helper()
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Keyspace: keyspace})
	if err != nil {
		t.Fatalf("open a fresh session: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
