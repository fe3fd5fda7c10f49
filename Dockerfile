# Switchboard's container image: a static binary on scratch, run as UID 1000.
#
#   podman build --format docker -t switchboard .
#   docker build -t switchboard .
#
# --format docker keeps the HEALTHCHECK (podman's default OCI format drops
# it). VERSION and REVISION are baked into the binary (`switchboard version`)
# and the image labels. GO_IMAGE picks the builder, pinned to go.mod's Go
# (GOTOOLCHAIN=local keeps that one): any image with that Go at
# /usr/local/go and /bin/sh works. CI, which cannot pull, builds this same
# file with an image of the host's toolchain (see deploy/image_test.go).
ARG GO_IMAGE=docker.io/library/golang:1.26.8-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY internal ./internal
ARG VERSION=dev
ARG REVISION=unknown
# grpcnotrace: gRPC (under the OTLP exporters) would import x/net/trace
# and with it html/template, whose reflective method calls keep every
# exported method of every type in the binary (go-redis's alone is 3.5 MB):
# 38 MB instead of 28.
RUN CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath -tags grpcnotrace \
      -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
      -o /out/switchboard ./cmd/switchboard
# The runtime image has no shell, so its user database is written here
# with shell builtins only (the builder needs nothing but sh and go); the
# RUN after WORKDIR also makes the empty directory that becomes /config and
# /data, owned by UID 1000.
WORKDIR /out/etc
RUN printf 'root:x:0:0:root:/:/sbin/nologin\nswitchboard:x:1000:1000:switchboard:/data:/sbin/nologin\n' >passwd
WORKDIR /out/empty
RUN printf 'root:x:0:\nswitchboard:x:1000:\n' >/out/etc/group

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="switchboard" \
      org.opencontainers.image.description="OpenAI-compatible LLM gateway" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/etc/passwd /out/etc/group /etc/
COPY --from=build /out/switchboard /usr/local/bin/switchboard
COPY examples/demo.yaml /etc/switchboard/demo.yaml
COPY --from=build --chown=1000:1000 /out/empty /config
COPY --from=build --chown=1000:1000 /out/empty /data
ENV CONFIG_FILE=/config/config.yaml STATE_DIR=/data BIND=0.0.0.0 PORT=4567
USER 1000:1000
WORKDIR /data
EXPOSE 4567
VOLUME ["/config", "/data"]
# `switchboard healthcheck` asks http://127.0.0.1:$PORT/health.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/switchboard", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/switchboard"]
CMD ["serve"]
