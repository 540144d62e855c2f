# Static operator binary on a minimal non-root base. CI builds the same
# binary with the same flags (`make build`).
FROM golang:1.26 AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/operator ./cmd/operator

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/operator /operator
# The update store; the chart mounts a writable volume here.
VOLUME ["/var/lib/object-store-operator/updates"]
# 4221: upgrade server (TLS); 8080: probes and metrics.
EXPOSE 4221 8080
USER 65532:65532
ENTRYPOINT ["/operator"]
