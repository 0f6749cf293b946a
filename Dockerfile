# Volcanic: the Telegram bot (and A2A server) in a small Debian image.
# Build:  docker build -t volcanic .
# Run:    docker run -v volcanic-data:/data -p 8080:8080 --env-file .env volcanic

FROM rust:1.95-slim-bookworm AS build
# jemalloc (the global allocator) builds from C sources with make, which the slim image lacks.
RUN apt-get update \
    && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
# Every workspace member must be present for cargo to load the workspace.
COPY bench/loadgen ./bench/loadgen
RUN cargo build --release --locked -p volcanic \
    && cp target/release/volcanic /usr/local/bin/volcanic

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates bubblewrap \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin volcanic \
    && mkdir -p /data/chats /data/state \
    && chown -R volcanic /data
COPY --from=build /usr/local/bin/volcanic /usr/local/bin/volcanic
ENV Telegram__WorkspaceRoot=/data/chats \
    Agent__StateDir=/data/state \
    A2A__Listen=0.0.0.0:8080
USER volcanic
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
ENTRYPOINT ["volcanic"]
CMD ["telegram"]
