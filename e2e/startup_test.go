package e2e

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/tools/freeport"
)

// TestTakenPortFailsTheStartNamingIt: when the gRPC or the health address is
// already in use, `orderd serve` exits 1 by itself (after its cluster
// connect: it binds its ports only when it can serve them, so that clients
// are refused rather than left hanging while it connects), with one line
// that names the address, the setting to change and the cause, and never
// says it serves.
func TestTakenPortFailsTheStartNamingIt(t *testing.T) {
	for _, c := range []struct {
		name, what, setting string
		env                 func(taken string) []string
	}{
		{"grpc", "gRPC", "grpc-addr, ORDERD_GRPC_ADDR", func(string) []string { return nil }},
		{"health", "health", "health-addr, ORDERD_HEALTH_ADDR", func(taken string) []string { return []string{"ORDERD_HEALTH_ADDR=" + taken} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			held, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			taken := held.Addr().String()
			grpcAddr, metricsAddr := taken, freeAddr(t)
			if c.name != "grpc" {
				grpcAddr = freeAddr(t)
			}
			p, err := spawnOrderd("serve", grpcAddr, metricsAddr, c.env(taken)...)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.stop() }()

			if code := p.waitExit(t, 90*time.Second); code != 1 {
				t.Fatalf("exit code %d, want 1; output:\n%s", code, p.output.String())
			}
			out := p.output.String()
			want := "orderd: listen for " + c.what + " on " + taken + " (" + c.setting + "): bind: address already in use\n"
			if !strings.Contains(out, want) {
				t.Errorf("output does not say %q:\n%s", want, out)
			}
			if strings.Contains(out, `msg=serving`) {
				t.Errorf("orderd said it serves although a port was taken:\n%s", out)
			}
		})
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestStartAsksAgainWhileTheSchemaCheckTimesOut starts the built binary
// with its first two schema-check reads timing out, as they can just after
// a node is lost, before its peers take it for down: it says it retries,
// then serves. Before, the first timeout ended the start, telling the
// operator to run `orderd migrate` on a migrated keyspace.
func TestStartAsksAgainWhileTheSchemaCheckTimesOut(t *testing.T) {
	p := startOrderd(t, "ORDERD_CQL_FAULTS=migrate.applied=timeout*2")
	out := p.output.String()
	if n := strings.Count(out, `msg="cluster not answering the schema check yet; retrying"`); n != 2 {
		t.Fatalf("%d retry lines, want 2:\n%s", n, out)
	}
	if strings.Contains(out, "orderd migrate") {
		t.Errorf("a timed-out schema check was taken for a keyspace to migrate:\n%s", out)
	}
}
