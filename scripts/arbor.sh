#!/usr/bin/env bash
# One entry point for the README's quick start and for CI.
#   bash scripts/arbor.sh demo   # set up, build and run `arbor demo`
#   bash scripts/arbor.sh test   # set up and run the whole test suite (Rust, then Go)
#   bash scripts/arbor.sh lint   # set up, then `cargo fmt --check`, the code's shape
#                                # (scripts/code_shape.py) and clippy (CI)
#   bash scripts/arbor.sh go-test [ARGS]  # only the Go package: go vet, go test -race
#   bash scripts/arbor.sh go-bench [ARGS] # the Go package's benchmarks (release library)
#   bash scripts/arbor.sh setup  # only the setup
# Setup installs what a fresh machine lacks (Rust via rustup is assumed present; clang and
# libclang-dev from Debian for RocksDB's bindings), keeps each clone's cargo target
# directory outside it, under ~/.cache/arbor/target-<clone> (`env` prints it), and builds
# RocksDB's C++ library once per machine into ~/.cache/arbor/rocksdb-<version>: every
# cargo profile (dev for the tests and the demo, release for benchmarks, nightly for
# fuzzing) of every clone then links that one static library (ROCKSDB_LIB_DIR +
# ROCKSDB_STATIC) instead of compiling 10-30 minutes of C++ each.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

install_packages() {
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
}

# The version of librocksdb-sys in Cargo.lock, e.g. `0.19.0+11.8.1`.
rocksdb_version() {
    awk '/^name = "librocksdb-sys"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock
}

# Build RocksDB's static library once (release settings, no debug info) and keep it.
rocksdb_library() {
    local version dir build lib
    version="$(rocksdb_version)"
    [ -n "$version" ] || { echo "cannot find librocksdb-sys in Cargo.lock" >&2; exit 1; }
    dir="$HOME/.cache/arbor/rocksdb-$version"
    if [ ! -f "$dir/librocksdb.a" ]; then
        build="$HOME/.cache/arbor/rocksdb-build"
        echo "building RocksDB $version once into $dir (15-30 minutes on 2 cores)" >&2
        # The store's own dependency graph fixes librocksdb-sys's features (lz4, zstd). Only
        # the library matters here: a failure to compile Arbor's crates is reported by the
        # build that follows, so it does not stop this one.
        env -u ROCKSDB_LIB_DIR -u ROCKSDB_STATIC CARGO_TARGET_DIR="$build" \
            cargo build --release --locked -p store >&2 || true
        lib="$(find "$build/release/build" -path '*librocksdb-sys-*/out/librocksdb.a' \
            -printf '%T@ %p\n' | sort -rn | head -n1 | cut -d' ' -f2-)"
        [ -n "$lib" ] || { echo "RocksDB build produced no librocksdb.a" >&2; exit 1; }
        mkdir -p "$dir.tmp"
        cp "$lib" "$dir.tmp/librocksdb.a"
        rm -rf "$dir"
        mv "$dir.tmp" "$dir"
    fi
    export ROCKSDB_LIB_DIR="$dir"
    export ROCKSDB_STATIC=1
}

# This clone's own cargo target directory: ~/.cache/arbor/target-<name>-<hash of the clone's
# resolved path>. Two clones sharing one target directory ran each other's binaries (cargo
# keeps one fresh unit per package and does not copy it back into the older clone's
# target/debug), so each clone builds into its own; the RocksDB library stays one per machine.
clone_target_dir() {
    local resolved hash
    resolved="$(cd "$here" && pwd -P)"
    hash="$(printf '%s' "$resolved" | sha256sum | cut -c1-12)"
    printf '%s/.cache/arbor/target-%s-%s' "$HOME" "$(basename "$resolved")" "$hash"
}

# Remove the target directories (and S3 server state) of clones that no longer exist, as
# each records its clone's path in .arbor-clone: every clone gets its own, and a machine
# that sees many clones (CI, one per run) would otherwise fill its disk with them.
prune_clone_dirs() {
    local dir clone
    for dir in "$HOME"/.cache/arbor/target-*; do
        [ -f "$dir/.arbor-clone" ] || continue
        clone="$(cat "$dir/.arbor-clone")"
        if [ -n "$clone" ] && [ ! -d "$clone" ]; then
            echo "removing $dir (its clone $clone is gone)" >&2
            rm -rf "$dir" "${dir/\/target-//s3-server-}"
        fi
    done
}

setup() {
    install_packages
    if ! command -v cargo >/dev/null 2>&1; then
        # shellcheck disable=SC1091
        [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
    fi
    if [ -z "${CARGO_TARGET_DIR:-}" ]; then
        export CARGO_TARGET_DIR
        CARGO_TARGET_DIR="$(clone_target_dir)"
        prune_clone_dirs
        mkdir -p "$CARGO_TARGET_DIR"
        (cd "$here" && pwd -P) >"$CARGO_TARGET_DIR/.arbor-clone"
    fi
    export ARBOR_TESTDATA="${ARBOR_TESTDATA:-$here/testdata/ethereum}"
    rocksdb_library
}

# The S3-compatible server the object-storage tests use (scripts/s3-server.sh), one per
# clone (its state under ~/.cache/arbor/s3-server-<clone>): its
# AWS_* and ARBOR_S3_BUCKET variables go into the test environment. Under CI=true a
# server that does not start fails the run; elsewhere those tests are skipped.
s3_start() {
    local s3_env
    # One server per clone: a second clone's tests would otherwise share the first's
    # server and lose it when the first run's EXIT trap stops it.
    export ARBOR_S3_STATE="${ARBOR_S3_STATE:-$(clone_target_dir | sed 's|/target-|/s3-server-|')}"
    if s3_env="$(bash "$here/scripts/s3-server.sh" start)"; then
        eval "$s3_env"
        trap 'bash "$here/scripts/s3-server.sh" stop >/dev/null 2>&1 || true' EXIT
    elif [ "${CI:-}" = true ]; then
        echo "error: the S3 test server did not start (scripts/s3-server.sh)" >&2
        exit 1
    else
        echo "warning: no S3 test server; the object-storage tests are skipped" >&2
    fi
}

# The Go package (bindings/go) over the C ABI: build the static library and the CLI (dev
# profile, like the tests), point cgo at the library, then `go vet` and `go test -race`
# (extra arguments go to `go test`, e.g. `-run TestRestoreCancel -v`).
go_test() {
    # go.dev's tarball installs into /usr/local/go, which a non-login shell may lack on PATH.
    if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
        export PATH="/usr/local/go/bin:$PATH"
    fi
    command -v go >/dev/null 2>&1 || { echo "go-test needs Go (1.26 or newer) on PATH" >&2; exit 1; }
    cargo build -p ffi -p cli
    export CGO_ENABLED=1
    export CGO_LDFLAGS="-L$CARGO_TARGET_DIR/debug"
    export ARBOR_BIN="$CARGO_TARGET_DIR/debug/arbor"
    (cd "$here/bindings/go" && go vet ./... && go test -race -count=1 "$@" ./...)
    go_valgrind
}

# The Go test binary (without -race, which valgrind cannot run) under valgrind's leak
# checker, on the tests that cross the C ABI most: no block may be definitely lost. (The Go
# runtime's own stack and GC tricks show up as invalid reads; they are not Arbor's.)
go_valgrind() {
    command -v valgrind >/dev/null 2>&1 || { echo "go-valgrind needs valgrind" >&2; exit 1; }
    local bin log
    bin="$(mktemp -d)/arbor.test"
    log="$(dirname "$bin")/valgrind.log"
    (cd "$here/bindings/go" && go test -c -o "$bin" ./arbor)
    (cd "$(dirname "$bin")" && valgrind --leak-check=full --show-leak-kinds=definite \
        --num-callers=30 --log-file="$log" "$bin" -test.count=1 \
        -test.run 'TestCommitGetRoot|TestProveAndVerify|TestBadInput|TestDebugPanic|TestUseAfterCloseAndDoubleClose|TestCheckpointRestoresThroughGo|TestAccountReadsRefuse|TestRustRejectsBadAccountChanges' \
        >/dev/null)
    if ! grep -q "definitely lost: 0 bytes in 0 blocks" "$log"; then
        grep -A12 "definitely lost" "$log" >&2 || true
        echo "error: valgrind found definitely lost blocks (log: $log)" >&2
        exit 1
    fi
    echo "valgrind: no block definitely lost ($(grep -o 'total heap usage: .*' "$log"))"
    rm -rf "$(dirname "$bin")"
}

# The Go package's benchmarks on the release library: its size, the Go link time of the
# test binary, then `go test -bench` (Get and a 10,000-change Commit beside the native
# Rust figures; extra arguments go to `go test`).
go_bench() {
    if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
        export PATH="/usr/local/go/bin:$PATH"
    fi
    cargo build --release -p ffi
    local lib="$CARGO_TARGET_DIR/release/libarbor_ffi.a" bin start end
    echo "static library: $lib, $(stat -c %s "$lib") bytes"
    export CGO_ENABLED=1
    export CGO_LDFLAGS="-L$CARGO_TARGET_DIR/release"
    cd "$here/bindings/go"
    bin="$(mktemp -d)/arbor.test"
    go test -c -o "$bin" ./arbor >/dev/null
    # Other linker flags make the go command link again, and only link (packages stay cached).
    start=$(date +%s.%N)
    go test -c -o "$bin" -ldflags="-X main.linkStamp=$start" ./arbor >/dev/null
    end=$(date +%s.%N)
    echo "go link of the test binary: $(echo "$end - $start" | bc) s, $(stat -c %s "$bin") bytes"
    rm -rf "$(dirname "$bin")"
    go test -run '^$' -bench . -count=1 "$@" ./arbor
}

# The workspace's declared rust-version must cover every dependency's own (on this
# platform). 1.94.1 is alloy-consensus 2.5's own (crates/evm's block formats); revm 43.0.3 needs 1.91.
# Only packages cargo builds count: `cargo metadata`'s resolve also lists optional
# dependencies named only in another's `dep?/feature`, and those are never compiled.
msrv_check() {
    local declared needed built
    declared="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)"
    built="$(cargo tree --workspace -e normal,build,dev --prefix none --format '{p}' | sed 's/ (.*//' | sort -u)"
    needed="$(cargo metadata --format-version 1 --filter-platform "$(rustc -vV | sed -n 's/^host: //p')" |
        BUILT="$built" python3 -c '
import json, os, sys
m = json.load(sys.stdin)
built = set(os.environ["BUILT"].splitlines())
versions = [p["rust_version"] for p in m["packages"]
            if p.get("rust_version") and p["name"] + " v" + p["version"] in built]
key = lambda v: tuple((list(map(int, v.split(".")[:3])) + [0, 0])[:3])
print(max(versions, key=key))')"
    # Versions compare padded to three parts: 1.91 covers 1.91.0.
    if python3 -c "import sys; k=lambda v: tuple((list(map(int, v.split('.')[:3])) + [0, 0])[:3]); sys.exit(k('$declared') < k('$needed'))"; then
        echo "rust-version $declared covers the dependencies (they need $needed)"
    else
        echo "error: rust-version $declared in Cargo.toml is below what the dependencies need ($needed)" >&2
        exit 1
    fi
}

# The vectors in testdata/ are byte-exact copies of others' files: check them first.
testdata_check() {
    (cd "$here/testdata" && sha256sum --quiet --strict -c SHA256SUMS) ||
        { echo "error: testdata/ differs from testdata/SHA256SUMS" >&2; exit 1; }
}

case "${1:-}" in
    demo)
        shift
        setup
        cargo run -p cli --bin arbor -- demo "$@"
        ;;
    test)
        shift
        testdata_check
        setup
        s3_start
        # `--profile dev`: the tests share clippy's and the demo's build of every crate.
        cargo test --workspace --profile dev "$@"
        # The Go package is part of the suite (go vet, go test -race).
        go_test
        ;;
    lint)
        shift
        testdata_check
        setup
        cargo fmt --all -- --check
        # No import cycle between a crate's modules, no function over 80 lines (the
        # checker's own tests first, on scripts/fixtures/).
        python3 scripts/test_code_shape.py
        python3 scripts/code_shape.py
        cargo clippy --workspace --all-targets "$@" -- -D warnings
        msrv_check
        if command -v gofmt >/dev/null 2>&1 || [ -x /usr/local/go/bin/gofmt ]; then
            unformatted="$(PATH="/usr/local/go/bin:$PATH" gofmt -l bindings/go)"
            if [ -n "$unformatted" ]; then
                echo "gofmt: not formatted: $unformatted" >&2
                exit 1
            fi
        fi
        ;;
    go-test)
        shift
        setup
        go_test "$@"
        ;;
    go-bench)
        shift
        setup
        go_bench "$@"
        ;;
    setup)
        setup
        ;;
    env)
        # For a shell: eval "$(bash scripts/arbor.sh env)"
        setup >&2
        printf 'export CARGO_TARGET_DIR=%q ARBOR_TESTDATA=%q ROCKSDB_LIB_DIR=%q ROCKSDB_STATIC=1\n' \
            "$CARGO_TARGET_DIR" "$ARBOR_TESTDATA" "$ROCKSDB_LIB_DIR"
        ;;
    *)
        echo "usage: bash scripts/arbor.sh demo|test|lint|go-test|go-bench|setup|env" >&2
        exit 2
        ;;
esac
