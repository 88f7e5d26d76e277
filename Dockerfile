# syntax=docker/dockerfile:1
# Multi-stage build: a static-enough Rust binary in a small non-root image.
# No database is included; point the gateway at one through its config.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked && cp target/release/myquic /myquic

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /myquic /usr/local/bin/myquic
# Config is mounted read-only; secrets come from files or the environment.
USER 65532:65532
EXPOSE 8443/udp 8443/tcp
ENTRYPOINT ["/usr/local/bin/myquic"]
CMD ["--config", "/etc/myquic/myquic.toml", "gateway"]
