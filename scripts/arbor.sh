#!/usr/bin/env bash
# One entry point for the README's quick start and for CI.
#   bash scripts/arbor.sh demo   # set up, build and run `arbor demo`
#   bash scripts/arbor.sh test   # set up and run the whole test suite
# Setup installs what a fresh machine lacks (Rust via rustup is assumed present; clang and
# libclang-dev from Debian for RocksDB's build) and keeps the cargo target directory
# outside the clone, under ~/.cache/arbor, so that repeated runs reuse the build.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

setup() {
    local need=()
    command -v clang >/dev/null 2>&1 || need+=(clang)
    dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
    if [ "${#need[@]}" -gt 0 ]; then
        echo "installing: ${need[*]}" >&2
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        # shellcheck disable=SC1091
        [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
    fi
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/arbor/target}"
    export ARBOR_TESTDATA="${ARBOR_TESTDATA:-$here/../shared/testdata/ethereum}"
}

case "${1:-}" in
    demo)
        shift
        setup
        cargo run -p cli --bin arbor -- demo "$@"
        ;;
    test)
        shift
        setup
        # `--profile dev`: `cargo test` would otherwise use the `test` profile, whose different
        # name makes cargo compile RocksDB a second time (15-30 minutes) next to clippy's build.
        cargo test --workspace --profile dev "$@"
        ;;
    setup)
        setup
        ;;
    *)
        echo "usage: bash scripts/arbor.sh demo|test|setup" >&2
        exit 2
        ;;
esac
