# orderd — retry-safe order creation on Apache Cassandra.
#
#   make run    fetch what is needed, start the local three-node cluster if
#               none is reachable and the local Kafka broker, migrate, serve
#               on 127.0.0.1:8080 (order events to 127.0.0.1:19092)
#   make test   unit tests, the model check of the protocols (SPIN),
#               then e2e tests against a real three-node cluster and a real
#               Kafka broker (started for the run and stopped after it,
#               unless already up)
#
# See README.md. Settings: ORDERD_* (orderd), CASSANDRA_* (internal/tools/localcluster).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO       ?= go
BIN      := $(CURDIR)/bin
CLUSTER  := $(BIN)/cassandra-local
KAFKA    := $(BIN)/kafka-local
ORDERD   := $(BIN)/orderd
export ORDERD_CLUSTER_DIR ?= $(CURDIR)/.cluster

# Build stamp: `orderd version` and the orderd_build_info metric read these
# (internal/platform/buildinfo). GOFLAGS=-buildvcs=false builds record no revision, so
# it is passed here.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
PROMVER  := github.com/prometheus/common/version
LDFLAGS  := -X $(PROMVER).Version=$(VERSION) -X $(PROMVER).Revision=$(REVISION)

# Unit tests: every package of the service's module. The e2e suite (e2e/)
# is a Go module of its own, so testcontainers and the Docker client stay
# out of the service's go.mod; its targets run it with go -C e2e.
UNIT_PKGS = ./...
E2E      := $(GO) -C e2e

.PHONY: all build run test test-unit test-deploy k8s-validate model-check test-e2e cluster-up cluster-down cluster-status \
	cluster-wipe kafka-up kafka-down kafka-status images test-e2e-docker compose-smoke test-docker migrate dev-setup generate generate-check api-check lint fuzz cover clean bench-reconciler bench bench-soak robustness

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(ORDERD) ./cmd/orderd
	$(GO) build -o $(CLUSTER) ./cmd/cassandra-local
	$(GO) build -o $(KAFKA) ./cmd/kafka-local
	$(GO) build -o $(BIN)/orderconsumer ./cmd/orderconsumer
	$(GO) build -o $(BIN)/orderctl ./cmd/orderctl

# Start the local cluster only if nothing answers on the contact points.
cluster-up: build
	@if [ -n "$${ORDERD_CASSANDRA_CONTACT_POINTS:-}" ]; then \
		echo "using the cluster at ORDERD_CASSANDRA_CONTACT_POINTS=$$ORDERD_CASSANDRA_CONTACT_POINTS"; \
	else $(CLUSTER) up; fi

cluster-down: build
	$(CLUSTER) down

cluster-status: build
	$(CLUSTER) status

cluster-wipe: build
	$(CLUSTER) wipe

# The local single-node Kafka broker (KRaft, 127.0.0.1:19092; internal/tools/localcluster),
# serving SASL_SSL with the development certificate in .dev (users orderd and
# orderconsumer, passwords in .kafka/users/); ORDERD_KAFKA_PLAINTEXT=true for
# PLAINTEXT. The e2e tests start it themselves when it is not running. Skipped
# when ORDERD_KAFKA_BROKERS names other brokers, or delivery is off.
kafka-up: build dev-setup
	@if [ -n "$${ORDERD_KAFKA_BROKERS:-}" ]; then \
		echo "using the Kafka brokers at ORDERD_KAFKA_BROKERS=$$ORDERD_KAFKA_BROKERS"; \
	elif [ "$${ORDERD_DELIVERY:-true}" = false ]; then \
		echo "ORDERD_DELIVERY=false: no Kafka broker needed"; \
	else ORDERD_DEV_DIR=$(DEV) $(KAFKA) up; fi

kafka-down: build
	$(KAFKA) down

kafka-status: build
	$(KAFKA) status

migrate: cluster-up
	$(ORDERD) migrate

# Development credentials (a throwaway CA, server and client certificates,
# one API key printed once) in .dev/, made on the first run; the gRPC port
# serves TLS and checks every caller (docs/security.md).
DEV := $(CURDIR)/.dev

dev-setup: build
	@$(ORDERD) dev-setup -dir $(DEV)

# The local broker's SASL_SSL login, unless ORDERD_KAFKA_* say otherwise.
KAFKA_CLIENT_ENV = $(if $(ORDERD_KAFKA_BROKERS)$(filter true,$(ORDERD_KAFKA_PLAINTEXT)),,\
	ORDERD_KAFKA_USERNAME=$${ORDERD_KAFKA_USERNAME:-orderd} \
	ORDERD_KAFKA_PASSWORD_FILE=$${ORDERD_KAFKA_PASSWORD_FILE:-$(CURDIR)/.kafka/users/orderd.password} \
	ORDERD_KAFKA_TLS_CA_FILE=$${ORDERD_KAFKA_TLS_CA_FILE:-$(CURDIR)/.kafka/tls/ca.pem})

run: migrate dev-setup kafka-up
	ORDERD_TLS_CERT_FILE=$${ORDERD_TLS_CERT_FILE:-$(DEV)/server.pem} \
	ORDERD_TLS_KEY_FILE=$${ORDERD_TLS_KEY_FILE:-$(DEV)/server-key.pem} \
	ORDERD_TLS_CLIENT_CA_FILE=$${ORDERD_TLS_CLIENT_CA_FILE:-$(DEV)/ca.pem} \
	ORDERD_API_KEYS_FILE=$${ORDERD_API_KEYS_FILE:-$(DEV)/api-keys.json} \
	$(KAFKA_CLIENT_ENV) $(ORDERD) serve

test: test-unit model-check test-e2e

# Unit tests run twice over the packages with build-tagged code: the release
# build (failpoints refused) and the test build (-tags failpoints); the API
# module (proto/, its own Go module) is tested on its own.
test-unit:
	$(GO) vet ./...
	$(GO) vet -tags failpoints ./...
	$(GO) test -race -count=1 $(UNIT_PKGS)
	$(E2E) vet ./...
	cd proto && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	$(GO) test -race -count=1 -tags failpoints ./internal/platform/failpoint/ ./internal/app/workflow/ ./cmd/orderd/
	$(MAKE) test-deploy

# The deployment artefacts, each checked by the program its users run:
# Kubernetes manifests rendered with kustomize, decoded strictly into the
# upstream API types and applied to a real kube-apiserver with the
# operators' CRDs (built from the Kubernetes sources on the first run, 8
# minutes of CPU, then cached; needs etcd: apt-get install etcd-server;
# deploy/kubernetes/README.md), the alert rules with Prometheus's rule parser
# and rule tests. These are Go modules of their own so their large
# dependency graphs stay out of orderd's.
DEPLOY_MODULES := deploy/kubernetes deploy/monitoring
test-deploy:
	@command -v etcd >/dev/null 2>&1 || echo "test-deploy: no etcd: the Kubernetes API server test is skipped (fails with CI=true); apt-get install etcd-server"
	@for m in $(DEPLOY_MODULES); do \
		if [ -f $$m/go.mod ]; then echo "== $$m"; (cd $$m && $(GO) vet ./... && $(GO) test -count=1 -timeout 45m ./...) || exit 1; fi; \
	done

# The Kubernetes manifests against a real API server, verbosely: every
# object applied and read back. With KUBECONFIG set, a dry-run server-side
# apply against that cluster (it needs the operators' CRDs and the
# namespaces; nothing is written); without, the local kube-apiserver that
# make test-deploy runs.
k8s-validate:
	cd deploy/kubernetes && K8S_VALIDATE_KUBECONFIG="$${KUBECONFIG:-}" $(GO) test -count=1 -timeout 45m -v -run '^TestManifestsOnAPIServer$$' .

# The Promela models (model/README.md: CreateOrder's writes; changes, event
# delivery, mixed versions, clocks), checked with SPIN: the correct
# configurations must verify, the defects put back must be caught. Needs
# spin and gcc (apt-get install -y spin gcc); about a minute of CPU,
# MODEL_CHECK_JOBS (default 2) runs at once.
model-check:
	scripts/model-check.sh

# The e2e harness starts the cluster itself (and stops what it started).
# The tests marked isolated (e2e/main_test.go) run four at a time after the
# others. About 20 minutes on a quiet machine; the timeout leaves room for
# a busy one.
test-e2e:
	$(E2E) test -count=1 -p 1 -parallel 4 -timeout 35m -v . 2>&1 | tee $(BIN)/e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|e2e:|\s+\S+_test.go)' ; \
		rc=$${PIPESTATUS[0]}; [ $$rc -eq 0 ] || scripts/e2e-failures.sh $(BIN)/e2e.log; exit $$rc

# ---- With Docker (README.md, "With Docker"; deploy/docker/README.md)
#
# Container images, built here from Debian's packages, the Go module proxy
# and Maven Central (no registry needed; deploy/docker/images/build.sh):
# Cassandra and Kafka for the compose file and the e2e docker backend, and
# orderd's own from the Dockerfile. Needs a Docker engine (scripts/dockerd-up.sh
# starts Debian's) and debootstrap. The images pin their versions:
# Cassandra's is the local launcher's (localcluster.CassandraVersion; a test
# keeps them equal); the local Kafka launcher takes the newest 4.x.
IMAGE_CASSANDRA_VERSION ?= 5.0.9
IMAGE_KAFKA_VERSION     ?= 4.4.0
CASSANDRA_IMAGE ?= orderd/cassandra:$(IMAGE_CASSANDRA_VERSION)
KAFKA_IMAGE     ?= orderd/kafka:$(IMAGE_KAFKA_VERSION)
IMAGE_ENV = CASSANDRA_IMAGE=$(CASSANDRA_IMAGE) KAFKA_IMAGE=$(KAFKA_IMAGE)
images: build
	CASSANDRA_VERSION=$(IMAGE_CASSANDRA_VERSION) KAFKA_VERSION=$(IMAGE_KAFKA_VERSION) $(IMAGE_ENV) \
		deploy/docker/images/build.sh all

# The `docker compose` plugin, built from its Go module when the docker CLI
# has none (deploy/docker/images/compose-plugin.sh).
compose-plugin:
	@docker compose version >/dev/null 2>&1 || deploy/docker/images/compose-plugin.sh

# deploy/docker/compose.yaml run for real (deploy/docker/smoke.sh): the
# images above, the services up on the host's network (127.0.0.21-25,
# compose.host.yaml), one order created, retried and read back over gRPC and
# its event found on the broker, then everything removed. A few minutes:
# the three Cassandra nodes start one after another.
compose-smoke: images compose-plugin
	$(IMAGE_ENV) deploy/docker/smoke.sh

# Everything Docker: the compose smoke test and the e2e tests on containers.
# CI runs it after `make test`, as its own step with its own time.
test-docker: compose-smoke test-e2e-docker

# The e2e tests about the cluster itself (node kill and pause, quorum loss,
# the store contract suites, the fault tests), on three Cassandra containers
# and a Kafka container started by testcontainers-go on the host network
# (e2e/docker.go) instead of the local launcher's JVMs. Ryuk, the reaper
# container, needs an image from Docker Hub: the harness removes its own
# leftovers instead.
DOCKER_E2E_TESTS := TestClusterQuorumSurvivesOneNodeLossNotTwo TestLoadWithOneNodePaused TestLoadWithOneNodeKilled \
	TestTwoNodesDownFailsFastThenRecovers TestAmbiguousClaimIsSettledAsApplied TestHealthNotServingWhileClusterDown \
	TestLedgerContract TestLedgerTTL TestCoordinatorContract TestProjectionContract TestVersionsContract \
	TestKafkaPublisherMeetsThePublisherContract TestMigrateTwiceIsNoop TestCreateOrderAcceptOnce \
	TestCreateOrder32ConcurrentIdenticalAttempts
space := $(subst ,, )
test-e2e-docker: images
	ORDERD_E2E_CLUSTER=docker CASSANDRA_IMAGE=$(CASSANDRA_IMAGE) KAFKA_IMAGE=$(KAFKA_IMAGE) TESTCONTAINERS_RYUK_DISABLED=true \
	$(E2E) test -count=1 -p 1 -parallel 4 -timeout 30m -v -run '^($(subst $(space),|,$(strip $(DOCKER_E2E_TESTS))))$$' . 2>&1 | \
		tee $(BIN)/e2e-docker.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|e2e:|\s+\S+_test.go)' ; \
		rc=$${PIPESTATUS[0]}; [ $$rc -eq 0 ] || scripts/e2e-failures.sh $(BIN)/e2e-docker.log; exit $$rc

# The robustness suite alone (docs/robustness.md): DURATION of randomised
# traffic under faults (default 2m), SEED to replay a run's calls and
# faults. The run bounds itself: the traffic, then at most 3 minutes for the
# events and a minute per order for the check.
DURATION ?=
SEED     ?=
robustness:
	@mkdir -p $(BIN)
	ROBUSTNESS_DURATION=$(DURATION) ROBUSTNESS_SEED=$(SEED) $(E2E) test -count=1 -p 1 -timeout 0 -v -run '^TestRobustness$$' . 2>&1 | \
		tee $(BIN)/robustness.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|e2e:|\s+\S+_test.go)'

# Which statements no test reaches, over the unit tests and the e2e tests
# with the orderd processes they start (scripts/cover.sh): each package's
# share, every unreached block of the packages that decide an outcome, and
# bin/cover/cover.html. About as long as test-unit and test-e2e together.
cover:
	scripts/cover.sh

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzCanonicalize -fuzztime=60s ./internal/domain/order/

generate:
	scripts/generate.sh

generate-check:
	scripts/generate-check.sh

# The API module (proto/): tidy, vetted, unit-tested, free of the service's
# dependencies, and built with the oldest Go it supports (scripts/api-check.sh).
api-check:
	scripts/api-check.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(E2E) vet ./...
	$(GO) mod tidy -diff || { echo "go.mod is not tidy: run go mod tidy"; exit 1; }
	$(E2E) mod tidy -diff || { echo "e2e/go.mod is not tidy: run go -C e2e mod tidy"; exit 1; }
	scripts/buf-check.sh

clean:
	rm -rf $(BIN)

# Reconciler benchmarks: one pass finding 100 PENDING among
# 1,000 and among 100,000 COMPLETE requests (both times and their ratio), and
# one instance healing 10,000 PENDING requests (how long it takes).
bench-reconciler:
	$(E2E) test . -run '^$$' -bench 'Benchmark(Reconciler(FindPending|Heal)|DueQueueSweep)' -benchtime 1x -timeout 60m

# Benchmarks: orderd against statement plans issued
# directly (the two-LWT plan, the one-LWT plan, the projections alone,
# naive) at concurrency 1 to 64, a replay storm on one request id, the
# replay path, a mixed load, event delivery on against off (with the latency
# from the answer to a consumer's receipt and to the reference consumer's
# apply), claims committed at LOCAL_QUORUM against ANY, AmendOrder against
# CreateOrder, and the claim LWT with paxos v1 against v2 (the local cluster is
# restarted between them). Writes docs/benchmarks.md and
# docs/benchmark-latency.svg. Needs the local cluster (make cluster-up).
# BENCH_REQUESTS per driver and concurrency are split over BENCH_ROUNDS
# rounds; BENCH_PIN=1 pins the JVMs, orderd and the client to separate
# cores (orderbench run -pin). Event delivery on against off is a run of
# its own, always pinned (the broker never on the cluster's cores), with
# BENCH_OUTBOX_REQUESTS per driver and concurrency: rounds of several
# seconds at 64 streams. The cluster's collector (CASSANDRA_GC /
# CASSANDRA_G1_PAUSE_MS) and memtables (CASSANDRA_MEMTABLE) are those of its
# last start (the restarts below keep them).
BENCH_REQUESTS ?= 2000
BENCH_ROUNDS ?= 5
BENCH_PIN ?=
BENCH_OUTBOX_REQUESTS ?= 8000
BENCH_FLAGS = -requests $(BENCH_REQUESTS) -rounds $(BENCH_ROUNDS) $(if $(BENCH_PIN),-pin)
bench: build kafka-up
	$(GO) build -o $(BIN)/orderbench ./cmd/orderbench
	$(BIN)/orderbench run -orderd $(ORDERD) -phases compare,storm,replay,mix,commit,cost,instances,lwt,changes -label v2 $(BENCH_FLAGS) -json $(BIN)/bench-main.json
	$(BIN)/orderbench run -orderd $(ORDERD) -phases outbox -orderconsumer $(BIN)/orderconsumer -label v2 -requests $(BENCH_OUTBOX_REQUESTS) -rounds $(BENCH_ROUNDS) -pin -json $(BIN)/bench-outbox.json
	$(CLUSTER) down && CASSANDRA_PAXOS_VARIANT=v1 $(CLUSTER) up
	$(BIN)/orderbench run -orderd $(ORDERD) -phases lwt -label v1 $(BENCH_FLAGS) -json $(BIN)/bench-lwt-v1.json || { $(CLUSTER) down; $(CLUSTER) up; exit 1; }
	$(CLUSTER) down && $(CLUSTER) up
	$(BIN)/orderbench report -out docs/benchmarks.md -plot docs/benchmark-latency.svg $(BIN)/bench-main.json $(BIN)/bench-outbox.json $(BIN)/bench-lwt-v1.json $(wildcard $(BIN)/bench-soak.json)

# Soak: orderd as in production (event delivery on, the reference consumer
# applying every event) under an open loop of new orders for SOAK (1h) at
# SOAK_RATE calls/s, or at half the maximum measured in a 45 s closed loop
# first when SOAK_RATE is empty; a sample every minute of orderd's RSS and
# goroutines, the minute's latency, each node's pending compactions and
# system.paxos size, each JVM's GC pause time, the tombstone warnings and
# the consumer's lag, each series judged flat or not. SOAK_PAXOS_REPAIR
# (5m): run a paxos repair on each node in turn that often during the soak,
# as production's schedule does; empty: none.
# Writes bin/bench-soak.json; `make bench` afterwards puts its table, plot
# and verdicts in the report. Needs the local cluster and broker.
SOAK ?= 1h
SOAK_RATE ?=
SOAK_PAXOS_REPAIR ?= 5m
bench-soak: build kafka-up
	$(GO) build -o $(BIN)/orderbench ./cmd/orderbench
	$(BIN)/orderbench run -orderd $(ORDERD) -orderconsumer $(BIN)/orderconsumer -phases soak -soak $(SOAK) $(if $(SOAK_RATE),-soak-rate $(SOAK_RATE)) $(if $(SOAK_PAXOS_REPAIR),-soak-paxos-repair $(SOAK_PAXOS_REPAIR)) -json $(BIN)/bench-soak.json
