module github.com/atlasmart/orderd

go 1.26.8

require (
	github.com/apache/cassandra-gocql-driver/v2 v2.1.2
	github.com/google/uuid v1.6.0
	golang.org/x/sync v0.25.0
	golang.org/x/text v0.44.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
	gopkg.in/inf.v0 v0.9.1
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
