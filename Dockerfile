# syntax=docker/dockerfile:1
# Build the release binary.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# Embedded in the binary (migrations, and the shipped configuration and templates it falls back to).
COPY migrations ./migrations
COPY config ./config
COPY templates ./templates
# Declared targets must exist for cargo to read the manifest.
COPY examples ./examples
COPY tests ./tests
RUN cargo build --release --locked --bin chatgate

# Run it as a non-root user, with the SQLite data folder as a volume.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /app chatgate \
 && mkdir -p /app/data && chown chatgate /app/data
WORKDIR /app
COPY --from=build /src/target/release/chatgate /usr/local/bin/chatgate
COPY config ./config
COPY templates ./templates
USER chatgate
ENV CHATGATE_LISTEN=0.0.0.0:8080 \
    CHATGATE_DATABASE_URL=sqlite://data/chatgate.db
VOLUME ["/app/data"]
EXPOSE 8080
# On the port the gateway listens on, also when CHATGATE_LISTEN is set at `run`.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD port="${CHATGATE_LISTEN##*:}"; curl -fsS "http://127.0.0.1:${port:-8080}/healthz" || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["chatgate"]
CMD ["serve"]
