# gshare serve in a container: a Debian 12 build stage and a slim runtime stage that holds only the
# three programs (gshare, gshare-function and gshare-init, side by side) and the shared libraries
# they load.
#
#   docker build -t gshare .
#   docker run -d --name gshare --init -p 8080:8080 -p 8081:8081 -v gshare-data:/var/lib/gshare gshare
#
# Build arguments:
#   GSHARE_CUDA=OFF|ON    ON builds the CUDA device backend against Debian's CUDA toolkit
#                         (non-free); the image then uses NVIDIA GPUs when run with --gpus all on a
#                         host with the NVIDIA container toolkit. OFF (the default): emulated GPUs.
#   GSHARE_CMAKE_ARGS     more CMake flags, e.g. "-DGSHARE_BUILD_EXACT=OFF" (no CBC, no optgap).
#   GSHARE_BUILD_JOBS     parallel build jobs (default: all CPUs).
#
# docs/deploy.md describes running it. This file is not exercised by the project's CI.

############################################################################## build
FROM debian:bookworm AS build

ARG GSHARE_CUDA=OFF

# The build dependencies are scripts/setup.sh's list (the same packages a developer installs); it
# runs apt-get non-interactively and, as root here, needs no sudo. Copied alone first so that this
# layer is rebuilt only when the list changes.
COPY scripts/setup.sh /src/scripts/setup.sh
RUN bash /src/scripts/setup.sh && rm -rf /var/lib/apt/lists/*

# The CUDA backend needs the CUDA toolkit at build time only: it links the static CUDA runtime,
# which loads the driver's libcuda.so.1 at run time (mounted by the NVIDIA container toolkit).
RUN if [ "${GSHARE_CUDA}" = "ON" ]; then \
      sed -i 's/^Components: main$/Components: main contrib non-free/' \
        /etc/apt/sources.list.d/debian.sources && \
      apt-get update -qq && \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        nvidia-cuda-toolkit && \
      rm -rf /var/lib/apt/lists/*; \
    elif [ "${GSHARE_CUDA}" != "OFF" ]; then \
      echo "GSHARE_CUDA must be ON or OFF, not ${GSHARE_CUDA}" >&2; exit 1; \
    fi

COPY . /src
WORKDIR /src

ARG GSHARE_CMAKE_ARGS=""
ARG GSHARE_BUILD_JOBS=""
# The `default` preset (Ninja, build/) as a Release build, without the tests and benchmarks, and
# only the three programs the image ships (scripts/build.sh would build every test as well).
# scripts/runtime-packages.sh then names the Debian packages whose libraries they load: the
# runtime stage installs exactly those.
RUN cmake --preset default -DCMAKE_BUILD_TYPE=Release -DGSHARE_BUILD_TESTS=OFF \
      -DGSHARE_BUILD_BENCH=OFF -DGSHARE_ENABLE_CUDA="${GSHARE_CUDA}" ${GSHARE_CMAKE_ARGS} && \
    cmake --build --preset default --target gshare gshare-function gshare-init \
      -j "${GSHARE_BUILD_JOBS:-$(nproc)}" && \
    mkdir -p /out && \
    install -m 0755 build/gshare build/gshare-function build/gshare-init /out/ && \
    strip /out/gshare /out/gshare-function /out/gshare-init && \
    bash scripts/runtime-packages.sh /out/gshare /out/gshare-function /out/gshare-init \
      > /out/runtime-packages.txt && \
    cat /out/runtime-packages.txt && \
    /out/gshare --help >/dev/null

############################################################################## runtime
FROM debian:bookworm-slim AS runtime

COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update -qq && \
    xargs -a /tmp/runtime-packages.txt \
      env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends && \
    rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt

# The server starts the example functions' program, and every instance's first process
# (gshare-init), from the folder of its own binary.
COPY --from=build /out/gshare /out/gshare-function /out/gshare-init /usr/local/bin/

# A fixed uid, so that a bind-mounted data directory can be given to it (chown 10001:10001). The
# data directory must belong to the server's uid and be writable by no one else (mode 0700). As a
# non-root user the server runs every function process under its own uid.
RUN groupadd --system --gid 10001 gshare && \
    useradd --system --uid 10001 --gid gshare --home-dir /var/lib/gshare --no-create-home \
      --shell /usr/sbin/nologin gshare && \
    install -d -m 0700 -o gshare -g gshare /var/lib/gshare

# Only read where the image was built with GSHARE_CUDA=ON and run with --gpus: the container
# toolkit then mounts the driver's CUDA libraries (compute), not only nvidia-smi (utility).
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility

LABEL org.opencontainers.image.title="gshare" \
      org.opencontainers.image.description="Multi-tenant serverless ML inference on shared GPUs" \
      org.opencontainers.image.licenses="Apache-2.0"

USER 10001:10001
WORKDIR /var/lib/gshare
VOLUME /var/lib/gshare
EXPOSE 8080 8081
# SIGTERM (docker stop) makes the server drain in-flight requests and stop its function processes;
# give it time with `docker run --stop-timeout 60`. Arguments after the image name are appended
# (e.g. --device emulated --gpus 4 --gpu-memory 16Gi).
STOPSIGNAL SIGTERM
ENTRYPOINT ["gshare", "serve", "--listen", "0.0.0.0:8080", "--grpc-listen", "0.0.0.0:8081", "--data-dir", "/var/lib/gshare"]
