module github.com/atlasmart/orderd/proto

// The API module: the proto files, their generated Go code and the Go
// client. It asks for the oldest Go and dependencies it works with, so a
// client team is not forced onto the service's toolchain; CI builds it with
// Go 1.24 (scripts/api-check.sh).
go 1.24.0

require (
	go.opentelemetry.io/otel/trace v1.39.0
	golang.org/x/sync v0.19.0
	google.golang.org/genproto/googleapis/api v0.0.0-20251202230838-ff82c1b0f217
	google.golang.org/grpc v1.79.3
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/metric v1.39.0 // indirect
)

require (
	github.com/google/uuid v1.6.0
	go.opentelemetry.io/otel v1.39.0
	golang.org/x/net v0.48.0 // indirect
	golang.org/x/sys v0.39.0 // indirect
	golang.org/x/text v0.32.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20251202230838-ff82c1b0f217
)
