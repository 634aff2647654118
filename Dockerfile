# Builds the THROTTLE module and ships the official Redis image with it loaded:
#   docker build -t redis-throttle . && docker run --rm -p 6379:6379 redis-throttle
# The module is loaded by the image's config, docker/redis.conf (AOF on, fsync every second),
# not by CMD's arguments: a config of your own includes it, or has its loadmodule line
# (README, Docker).
#
# Not built in CI: no machine of this project can pull a base image. The module is the one CI
# builds (.ci/run: `cargo build --release --locked -p redis-throttle-module`, with the same
# Rust); the two base images are pinned by version and were written against, not pulled here.

# Both stages are Debian 12 (bookworm), so the module links against the glibc it runs with.
FROM rust:1.95.0-bookworm AS build
# redis-module runs bindgen at build time: it needs libclang.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libclang-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p redis-throttle-module \
 && cp target/release/libredis_throttle_module.so /libredis_throttle_module.so

FROM redis:7.4.2-bookworm
COPY --from=build /libredis_throttle_module.so /usr/local/lib/redis/modules/libredis_throttle_module.so
COPY docker/redis.conf /usr/local/etc/redis/redis.conf
EXPOSE 6379
CMD ["redis-server", "/usr/local/etc/redis/redis.conf"]
