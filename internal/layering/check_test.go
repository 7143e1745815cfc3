package layering

import (
	"slices"
	"testing"
)

const testModule = "example.com/m"

func mod(rel ...string) []string {
	out := make([]string, len(rel))
	for i, r := range rel {
		out[i] = testModule + "/" + r
	}
	return out
}

// The checker must find each kind of forbidden edge, name it, and report
// nothing else: the imports of today's floor plan around it pass.
func TestCheckReportsExactlyTheForbiddenEdge(t *testing.T) {
	allowed := []pkg{
		{ImportPath: testModule + "/internal/domain/fault"},
		{ImportPath: testModule + "/internal/domain/order", Imports: mod("internal/domain/fault")},
		{ImportPath: testModule + "/internal/platform/cassandra", Imports: append(mod("internal/domain/fault"), "github.com/apache/cassandra-gocql-driver/v2")},
		{ImportPath: testModule + "/ledger/ledgertest", Imports: mod("ledger", "internal/platform/cassandra")},
		{ImportPath: testModule + "/internal/app/workflow", Imports: mod("ledger", "projection", "internal/stores/versions", "internal/domain/order"),
			TestImports: mod("ledger/ledgertest", "internal/adapters/outbox", "internal/adapters/outbox/outboxtest")},
		{ImportPath: testModule + "/internal/adapters/grpcapi", Imports: mod("internal/app/workflow", "internal/adapters/auth", "proto/atlasmart/orders/v1")},
		{ImportPath: testModule + "/internal/adapters/auth", XTestImports: mod("internal/tools/devpki")},
		{ImportPath: testModule + "/internal/tools/devsetup", Imports: mod("internal/adapters/auth", "internal/tools/clientcreds")},
		{ImportPath: testModule + "/internal/tools/clientcreds", Imports: mod("proto/client")},
		{ImportPath: testModule + "/cmd/orderd", Imports: mod("internal/adapters/grpcapi", "internal/tools/devsetup", "internal/tools/invariant", "reconciler", "cql")},
		{ImportPath: testModule + "/e2e", Imports: mod("internal/tools/localcluster"), TestImports: mod("ledger/ledgertest", "internal/tools/orderconsumer/store/storetest")},
	}
	if got := check(testModule, allowed); len(got) != 0 {
		t.Fatalf("the allowed graph was refused: %v", got)
	}
	for _, tc := range []struct {
		name string
		p    pkg
		want violation
	}{
		{"a store imports a use case",
			pkg{ImportPath: testModule + "/ledger", Imports: mod("internal/platform/cassandra", "internal/app/workflow")},
			violation{"ledger", "internal/app/workflow", "layer store may not import layer app"}},
		{"a store imports an inbound adapter",
			pkg{ImportPath: testModule + "/internal/stores/versions", Imports: mod("internal/adapters/metrics")},
			violation{"internal/stores/versions", "internal/adapters/metrics", "layer store may not import layer adapter"}},
		{"the domain imports more than the vocabulary",
			pkg{ImportPath: testModule + "/internal/domain/order", Imports: mod("internal/domain/fault", "internal/platform/cassandra")},
			violation{"internal/domain/order", "internal/platform/cassandra", "layer domain may not import layer platform"}},
		{"the vocabulary imports the domain",
			pkg{ImportPath: testModule + "/internal/domain/fault", Imports: mod("internal/domain/order")},
			violation{"internal/domain/fault", "internal/domain/order", "layer vocabulary may not import layer domain"}},
		{"the request path imports a tool",
			pkg{ImportPath: testModule + "/internal/adapters/grpcapi", Imports: mod("internal/app/workflow", "internal/tools/loadgen")},
			violation{"internal/adapters/grpcapi", "internal/tools/loadgen", "layer adapter may not import layer tool"}},
		{"a server package links the client library",
			pkg{ImportPath: testModule + "/internal/adapters/auth", Imports: mod("proto/client")},
			violation{"internal/adapters/auth", "proto/client", "layer adapter may not import layer client"}},
		{"a binary imports another binary's package",
			pkg{ImportPath: testModule + "/cmd/orderctl", Imports: mod("cmd/orderconsumer/store")},
			violation{"cmd/orderctl", "cmd/orderconsumer/store", "layer command may not import layer command"}},
		{"a test imports a deployment check",
			pkg{ImportPath: testModule + "/e2e", XTestImports: mod("deploy/local")},
			violation{"e2e", "deploy/local", "nothing imports layer deploy, not even a test"}},
		{"non-test code imports a fake",
			pkg{ImportPath: testModule + "/internal/app/workflow", Imports: mod("ledger", "ledger/ledgertest")},
			violation{"internal/app/workflow", "ledger/ledgertest", "only tests and other test-support packages import a test-support package"}},
		{"a package outside every layer",
			pkg{ImportPath: testModule + "/internal/misc"},
			violation{"internal/misc", "internal/misc", "the package is in no layer (add its path to the layers table)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(testModule, append(slices.Clone(allowed), tc.p))
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("check reported %v; want exactly %v", got, tc.want)
			}
		})
	}
}

// Every layer the tables name has a row in mayImport, so a missing row is
// never read as "imports nothing" by accident.
func TestEveryLayerHasItsRules(t *testing.T) {
	for _, l := range layers {
		if _, ok := mayImport[l.layer]; !ok {
			t.Errorf("layer %s (%s) has no mayImport row", l.layer, l.prefix)
		}
	}
}
