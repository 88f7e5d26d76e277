# syntax=docker/dockerfile:1
# Multi-stage build: the release binary in a small non-root image that holds
# only the binary, glibc/libgcc and CA certificates (distroless "cc").
# No database and no configuration are included: mount the config file
# (e.g. a ConfigMap at /etc/myquic/myquic.toml) and pass secrets as files or
# environment variables. deploy/image/build-outside-docker runs the build
# stage's steps and checks the final stage on machines without Docker (CI).
#
# Keep every RUN free of absolute paths other than WORKDIR's: the script
# runs them in a scratch copy of the source.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin myquic \
    && mkdir -p out && cp target/release/myquic out/myquic \
    && strip --strip-debug out/myquic

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/out/myquic /usr/local/bin/myquic
USER 65532:65532
# HTTP/3 (UDP) and HTTP/2 (TCP) share the gateway's port; the sidecar's
# MySQL port; the admin endpoints (probes, /metrics): sidecar 9901, gateway 9902.
EXPOSE 8443/udp 8443/tcp 3306/tcp 9901/tcp 9902/tcp
ENTRYPOINT ["/usr/local/bin/myquic"]
CMD ["--config", "/etc/myquic/myquic.toml", "gateway"]
