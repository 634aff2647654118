#!/usr/bin/env bash
# What a user's project with the README's HTTP stack (redis-throttle with `reqwest`, tokio,
# reqwest, reqwest-middleware) costs to build, clean, in debug, per choice of reqwest's TLS:
# its default (rustls with aws-lc-rs, whose aws-lc-sys is most of the time), native-tls (the
# system's OpenSSL: Debian's libssl-dev and pkg-config), rustls with ring, and no TLS at all
# (plain HTTP to a supplier on a private network). Prints the crates and the seconds of each,
# built one after the other on the same machine, so compare them as ratios.
#
#   benches/user-build.sh [JOBS]     # JOBS: cargo's -j (default: every core)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
client="$(pwd)/client"
jobs="${1:-$(nproc)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

project() { # NAME REQWEST_LINE [EXTRA_DEPENDENCY] [PROVIDER_LINE]
    local dir="$work/$1"
    mkdir -p "$dir/src"
    cat >"$dir/Cargo.toml" <<EOF
[package]
name = "user-$1"
version = "0.1.0"
edition = "2021"

[dependencies]
redis-throttle = { path = "$client", features = ["reqwest"] }
tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
$2
reqwest-middleware = "0.5"
${3:-}
EOF
    cat >"$dir/src/main.rs" <<EOF
use redis_throttle::http::ThrottleMiddleware;
use redis_throttle::{Limiter, Quota};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ${4:-}
    let conn = redis_throttle::connect("redis://127.0.0.1:6379").await?;
    let limiter = Limiter::new(conn, "pix:integrator-42", Quota::new(8, 9)?);
    let http = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(ThrottleMiddleware::new(limiter))
        .build();
    let status = http.get("http://127.0.0.1:8080/pix/status").send().await?.status();
    println!("{status}");
    Ok(())
}
EOF
}

features='"charset", "http2", "system-proxy"'
project default 'reqwest = "0.13"'
project native-tls "reqwest = { version = \"0.13\", default-features = false, features = [\"native-tls\", $features] }"
project ring "reqwest = { version = \"0.13\", default-features = false, features = [\"rustls-no-provider\", $features] }" \
    'rustls = { version = "0.23", default-features = false, features = ["ring", "std", "tls12"] }' \
    'let _ = rustls::crypto::ring::default_provider().install_default();'
project no-tls "reqwest = { version = \"0.13\", default-features = false, features = [$features] }"

for name in default native-tls ring no-tls; do
    dir="$work/$name"
    (cd "$dir" && cargo fetch -q)
    crates=$(cd "$dir" && cargo tree --prefix none -e normal,build | sed 's/ (\*)//' | sort -u | wc -l)
    start=$(date +%s.%N)
    (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo build -q -j "$jobs")
    end=$(date +%s.%N)
    printf '%-10s %4d crates  %6.1f s\n' "$name" "$crates" "$(echo "$end - $start" | bc)"
done
