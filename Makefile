# object-store-operator. `make test` is the test command; `make run` runs the
# operator against a local control plane built from pinned modules.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The same static build the container image ships.
BUILD_FLAGS := -trimpath -ldflags "-s -w -X main.version=$(VERSION)"
# The image is tagged with the chart's appVersion, the tag the chart's
# default image names, so `make image` builds what `helm install` runs.
# REGISTRY=registry.example.com/team prefixes it for a push (the chart's
# image.registry); IMAGE overrides the whole name.
APP_VERSION := $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' helm/object-store-operator/Chart.yaml)
REGISTRY ?=
IMAGE   ?= $(if $(REGISTRY),$(patsubst %/,%,$(REGISTRY))/)object-store-operator:$(APP_VERSION)

.PHONY: all build tools test run bench bench-scale bench-pull bench-update bench-fleet bench-rotation bench-availability fuzz image clean

all: build

## build: the static operator binary in bin/operator
build:
	CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -o bin/operator ./cmd/operator

## tools: etcd, kube-apiserver, kube-controller-manager, kubectl, helm, the MinIO releases of hack/minio/releases and mc into bin/, and promtool (Debian package prometheus) when missing (no-op when current)
tools:
	@hack/build-tools.sh
	@hack/promtool.sh

## test: go vet, unit tests and end-to-end tests against the local control plane
# Every package runs (-count=1): the end-to-end packages read the chart,
# the CRD and bin/ through child processes, which Go's test cache cannot
# see, and in one go test the unit packages run beside them (while the
# end-to-end package's serial tests mostly wait) instead of before them.
# They take about 10 minutes on 2 cores (real MinIO clusters, several
# operator processes); the timeout leaves room on a loaded machine.
test: tools
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 60m ./...

## run: the local control plane under .local/ and the operator in the foreground
run: tools build
	$(GO) build -o bin/run ./hack/run
	bin/run

## bench: the upgrade server against nginx on loopback (installs nginx and wrk if missing)
bench: build
	hack/bench.sh

## fuzz: a short run of each fuzz target
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseSHA256Sum -fuzztime 30s ./binstore
	$(GO) test -run '^$$' -fuzz FuzzResolve -fuzztime 30s ./upgradeserver
	$(GO) test -run '^$$' -fuzz FuzzDecide -fuzztime 30s ./updates
	$(GO) test -run '^$$' -fuzz FuzzWindow -fuzztime 30s ./internal/window

## image: the container image the chart runs by default, object-store-operator:<chart appVersion> (REGISTRY=... prefixes it; needs a Docker engine)
image:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .
	@echo "built $(IMAGE); load it into the cluster's nodes or push it (docs/install.md)"

clean:
	rm -rf bin .local

## bench-scale: the mount-secret controller with 10,000 ObjectStores, 1,000 namespaces and 3,000 unrelated 200 KiB Secrets; 1,000 Current ObjectStores at steady state: the operator's API requests per second, CPU and RSS
bench-scale: tools
	$(GO) test ./test/e2e -run '^$$' -bench 'BenchmarkMountSecretScale|BenchmarkSteadyStateAPIRate' -benchtime 1x -timeout 90m

## bench-pull: image change -> 128 MiB binary listed, and the operator's peak RSS during the pull; 100 tenants on 20 distinct binaries under 100 labels, three replicas: time until every tenant's URL serves its bytes everywhere, store bytes, peak RSS
bench-pull: tools
	$(GO) test ./test/e2e -run '^$$' -bench 'BenchmarkImageChangeToListed|BenchmarkHundredTenantsTwentyBinaries' -benchtime 1x -timeout 30m

## bench-update: image change -> four MinIO nodes updated in place (real MinIO, pinned module)
bench-update: tools
	$(GO) test ./test/e2e -run '^$$' -bench BenchmarkImageChangeToUpdatedInPlace -benchtime 1x -timeout 20m

## bench-availability: an S3 client writing and reading every 50 ms, round-robin over a real 4-node MinIO (EC:2) with one retry on another node: failed requests and the longest gap during the operator's certificate restart vs kubectl rollout restart, its in-place update vs mc admin update by hand, and its rolling fallback
bench-availability: tools
	$(GO) test ./test/e2e -run '^$$' -bench BenchmarkAvailability -benchtime 1x -timeout 40m -v

## bench-fleet: 20 real single-node MinIO tenants change image at once: never more than 4 updates in flight, seconds until all current, the operator's CPU seconds and peak RSS; then with MinIO's update disabled on all 20, the failure budget halts the release after 3 and 17 are never called; and 1,000 Current ObjectStores against a fake admin API: the operator's API requests per second at steady state
bench-fleet: tools
	$(GO) test ./test/e2e -run '^$$' -bench 'BenchmarkFleetOfTwentyUpdates|BenchmarkFleetOfTwentyHalts|BenchmarkSteadyStateAPIRate' -benchtime 1x -timeout 60m

## bench-rotation: a custom certificate Secret updated -> the new certificate served (20 rotations; median and max)
bench-rotation: tools
	$(GO) test ./test/e2e -run '^$$' -bench BenchmarkCustomCertificateRotation -benchtime 20x -timeout 10m
