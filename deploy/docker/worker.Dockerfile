# syntax=docker/dockerfile:1
# The worker image: zshard-worker built with CUDA and NCCL by the project's own
# CMake on an NVIDIA CUDA devel image, shipped on the matching CUDA runtime
# image (which carries libcudart and the NCCL runtime, libnccl2) with only the
# shared libraries the binary loads, run as an unprivileged user. The same
# image serves CPU workers (--device cpu). Build from the repository root:
#   docker build -f deploy/docker/worker.Dockerfile -t zshard/worker:0.1.0-cuda13.0 .
# CUDA 13 needs an NVIDIA driver >= 580 on the nodes; set CUDA_VERSION for
# older drivers (the code builds with CUDA 12.x too).

ARG CUDA_VERSION=13.0.2
ARG UBUNTU_VERSION=24.04

# ---- builder: CUDA toolkit + NCCL headers, -dev packages, CMake build -------
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION} AS builder
ARG DEBIAN_FRONTEND=noninteractive
# Ubuntu 24.04 carries the same gRPC 1.51 / protobuf 3.21 / Abseil 20220623
# as Debian 12; the devel image already has nvcc and libnccl-dev.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev libgloo-dev libgtest-dev libgmock-dev nlohmann-json3-dev \
      libsqlite3-dev libcpp-httplib-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DZSHARD_WITH_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="80;90" \
 && cmake --build build --target zshard-worker zshardctl -j"$(nproc)" \
 && strip build/bin/zshard-worker build/bin/zshardctl

# ---- runtime: CUDA runtime + NCCL from the base, shared libraries only ------
FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_VERSION} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
# Runtime halves of the -dev packages the build links (Ubuntu 24.04 names,
# the 64-bit time_t "t64" rebuilds of the Debian 12 libraries).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates \
      libabsl20220623t64 \
      libcpp-httplib0.14t64 \
      libgloo0 \
      libgrpc++1.51t64 \
      libgrpc29t64 \
      libprotobuf32t64 \
      libsqlite3-0 \
      libssl3t64 \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 zshard \
 && useradd --system --uid 10001 --gid zshard --home-dir /var/lib/zshard \
      --shell /usr/sbin/nologin zshard \
 && install -d -o zshard -g zshard -m 0750 /var/lib/zshard
COPY --from=builder /src/build/bin/zshard-worker /usr/local/bin/zshard-worker
COPY --from=builder /src/build/bin/zshardctl /usr/local/bin/zshardctl
# NCCL must come from the base image; every other library from the list above.
# libcuda.so.1 is mounted by the NVIDIA container runtime at run time, so it
# is the one library allowed to be missing here.
RUN ldconfig -p | grep -qF 'libnccl.so.2' \
 && if ldd /usr/local/bin/zshard-worker /usr/local/bin/zshardctl \
        | grep -F 'not found' | grep -vF 'libcuda.so.1'; then \
      echo 'worker image: missing runtime libraries' >&2; exit 1; \
    fi
USER 10001:10001
WORKDIR /var/lib/zshard
# 9401: /healthz and Prometheus /metrics; 7701: peer traffic (Gloo pairs,
# state moves). NCCL opens further ports of its own between workers.
EXPOSE 7701 9401
ENTRYPOINT ["/usr/local/bin/zshard-worker"]
