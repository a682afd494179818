# syntax=docker/dockerfile:1
# The coordinator image: zshard-coordinator (and zshardctl, for `kubectl exec`
# administration; etcd for the HA overlay's etcd members) built by the
# project's own CMake on Debian 12, shipped on debian:12-slim with only the
# shared libraries the binaries load, run as an unprivileged user. Build from the repository root:
#   docker build -f deploy/docker/coordinator.Dockerfile -t zshard/coordinator:0.1.0 .

ARG DEBIAN_IMAGE=debian:12

# ---- builder: toolchain, -dev packages and the CMake build ------------------
FROM ${DEBIAN_IMAGE} AS builder
WORKDIR /src
# The dependency list lives in one place; copy it alone first so the package
# layer is cached across source edits.
COPY deploy/install-deps.sh deploy/install-deps.sh
RUN bash deploy/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DZSHARD_WITH_CUDA=OFF \
 && cmake --build build --target zshard-coordinator zshardctl -j"$(nproc)" \
 && strip build/bin/zshard-coordinator build/bin/zshardctl

# ---- runtime: shared libraries only, no compiler, no headers ----------------
FROM debian:12-slim AS runtime
ARG DEBIAN_FRONTEND=noninteractive
# Runtime halves of the -dev packages the build links (Debian 12 names):
# gRPC++ (with reflection and health), protobuf, Abseil, SQLite, OpenSSL,
# cpp-httplib (Prometheus endpoint); ca-certificates for TLS peers; and
# Debian's etcd-server, which the etcd members of deploy/k8s/overlays/ha
# run from this image (/usr/bin/etcd).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates \
      etcd-server \
      libabsl20220623 \
      libcpp-httplib0.11 \
      libgrpc++1.51 \
      libgrpc29 \
      libprotobuf32 \
      libsqlite3-0 \
      libssl3 \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 zshard \
 && useradd --system --uid 10001 --gid zshard --home-dir /var/lib/zshard \
      --shell /usr/sbin/nologin zshard \
 && install -d -o zshard -g zshard -m 0750 /var/lib/zshard
COPY --from=builder /src/build/bin/zshard-coordinator /usr/local/bin/zshard-coordinator
COPY --from=builder /src/build/bin/zshardctl /usr/local/bin/zshardctl
# Fail the image build, not the pod, when a runtime library is missing.
RUN if ldd /usr/local/bin/zshard-coordinator /usr/local/bin/zshardctl | grep -F 'not found'; then \
      echo 'coordinator image: missing runtime libraries' >&2; exit 1; \
    fi
USER 10001:10001
WORKDIR /var/lib/zshard
# 7700: gRPC (coordinator, rendezvous, dashboard, admin, grpc.health.v1);
# 9400: Prometheus text metrics at /metrics.
EXPOSE 7700 9400
ENTRYPOINT ["/usr/local/bin/zshard-coordinator"]
CMD ["--job", "/etc/zshard/job/job.json", "--listen", "0.0.0.0:7700", \
     "--state-dir", "/var/lib/zshard", "--http-listen", "0.0.0.0:9400", \
     "--log-format", "json"]
