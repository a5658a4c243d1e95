#!/usr/bin/env bash
# Installs what the tests need (pinned), starts MinIO on 127.0.0.1 with a temporary folder,
# runs every test (`scripts/test.sh python|interop` for a part; or a benchmark: `scripts/test.sh bench-ingest|bench-nested|bench-serve|bench-python|bench-log|bench-query|bench-merge|bench-merge-semantics|bench-proxy|bench-stream|bench-iceberg`), stops MinIO.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
NEVE_CACHE=${NEVE_CACHE:-$HOME/.cache/neve}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/neve-target}
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
MINIO_BIN=$NEVE_CACHE/minio-$MINIO_VERSION/minio
mkdir -p "$NEVE_CACHE"

log() { printf '[test.sh] %s\n' "$*" >&2; }

# --- MinIO, from the Go module proxy -------------------------------------------------------
if [ ! -x "$MINIO_BIN" ]; then
  log "installing MinIO $MINIO_VERSION (a few minutes, once)"
  GOBIN=$(dirname "$MINIO_BIN") go install "github.com/minio/minio@$MINIO_VERSION"
fi

# --- Python venv for interop tests ----------------------------------------------------------
REQ=tests/interop/requirements.txt
VENV=$NEVE_CACHE/venv-$(sha256sum "$REQ" | cut -c1-12)
if [ ! -x "$VENV/bin/python" ] || [ ! -f "$VENV/.complete" ]; then
  log "creating Python venv $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ"
  touch "$VENV/.complete"
fi
PY=$VENV/bin/python

# --- Iceberg's Spark runtime, from Maven Central (Spark reads neve's Iceberg metadata) --------
ICEBERG_SPARK=iceberg-spark-runtime-4.1_2.13-1.12.0.jar
ICEBERG_SPARK_SHA1=9e395e373a9a99643bf413ca1f74fa0c034887b4
export NEVE_ICEBERG_SPARK_JAR=$NEVE_CACHE/jars/$ICEBERG_SPARK
if [ ! -f "$NEVE_ICEBERG_SPARK_JAR" ]; then
  log "downloading $ICEBERG_SPARK"
  mkdir -p "$NEVE_CACHE/jars"
  curl -sSfL -o "$NEVE_ICEBERG_SPARK_JAR.part" \
    "https://repo1.maven.org/maven2/org/apache/iceberg/iceberg-spark-runtime-4.1_2.13/1.12.0/$ICEBERG_SPARK"
  echo "$ICEBERG_SPARK_SHA1  $NEVE_ICEBERG_SPARK_JAR.part" | sha1sum -c --quiet
  mv "$NEVE_ICEBERG_SPARK_JAR.part" "$NEVE_ICEBERG_SPARK_JAR"
fi

# --- Start MinIO ------------------------------------------------------------------------------
DATA=$(mktemp -d -t neve-minio-XXXXXX)
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export MINIO_ROOT_USER=neveadmin MINIO_ROOT_PASSWORD=nevesecret123
"$MINIO_BIN" server --quiet --address "127.0.0.1:$PORT" --console-address "127.0.0.1:0" "$DATA" > "$DATA.log" 2>&1 &
MINIO_PID=$!
export NEVE_MINIO_PID=$MINIO_PID
cleanup() {
  kill "$MINIO_PID" 2>/dev/null || true
  wait "$MINIO_PID" 2>/dev/null || true
  rm -rf "$DATA" "$DATA.log"
}
trap cleanup EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$PORT/minio/health/live" >/dev/null && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$PORT/minio/health/live" >/dev/null || { cat "$DATA.log"; log "MinIO did not start"; exit 1; }

export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_REGION=us-east-1
export NEVE_TEST_BUCKET=neve-test NEVE_TEST_PYTHON=$PY
# For tests that start a MinIO of their own (over TLS: tests/it/https_store.rs).
export NEVE_MINIO_BIN=$MINIO_BIN
"$PY" -c "import boto3; boto3.client('s3', endpoint_url='$AWS_ENDPOINT_URL').create_bucket(Bucket='$NEVE_TEST_BUCKET')"
log "MinIO on $AWS_ENDPOINT_URL, bucket $NEVE_TEST_BUCKET"

# The Python package's wheel, packed from the library `cargo build --workspace` made (not a
# second, release build of DataFusion through maturin), installed into the test venv.
install_wheel() {
  WHEELS=$(mktemp -d -t neve-wheel-XXXXXX)
  "$PY" python/scripts/pack_wheel.py "$CARGO_TARGET_DIR/debug/lib_neve.so" "$WHEELS"
  NEVE_WHEEL=$(ls "$WHEELS"/neve-*.whl)
  export NEVE_WHEEL
  "$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$NEVE_WHEEL"
}

case "${1:-test}" in
  test)
    # The CLI and the Python extension in one build: one set of features for the whole tree.
    cargo build --workspace
    # Built first, so that the limit below counts only running them: a test that hangs fails
    # the run here (the harness names it: "has been running for over 60 seconds"), not at
    # CI's own limit with nothing after it run.
    cargo test --workspace --no-run
    LIMIT=${NEVE_TEST_TIMEOUT:-30m}
    timeout --kill-after=30s "$LIMIT" cargo test --workspace -- --test-threads=2 || {
      rc=$?
      [ "$rc" = 124 ] && log "the Rust tests ran past $LIMIT (NEVE_TEST_TIMEOUT): stopped"
      exit "$rc"
    }
    # The patched zstd crate (vendor/README.md): its own tests, the patch's included.
    cargo test --locked --manifest-path vendor/zstd/Cargo.toml --lib
    export NEVE_BIN=$CARGO_TARGET_DIR/debug/neve
    install_wheel
    "$PY" -m pytest -q tests/interop python/tests
    ;;
  rust)
    # Some Rust tests against this MinIO: `scripts/test.sh rust --test it -- serve::stop`.
    cargo build --workspace
    cargo test --workspace "${@:2}"
    ;;
  python)
    cargo build --workspace
    export NEVE_BIN=$CARGO_TARGET_DIR/debug/neve
    install_wheel
    "$PY" -m pytest -q python/tests "${@:2}"
    ;;
  interop)
    cargo build --workspace
    export NEVE_BIN=$CARGO_TARGET_DIR/debug/neve
    install_wheel  # Spark's neve source runs the package on the workers
    "$PY" -m pytest -q tests/interop "${@:2}"
    ;;
  bench-ingest)
    cargo build --release -p neve
    N=$CARGO_TARGET_DIR/release/neve
    ROWS=${ROWS:-1000000,10000000}
    RUNS=${RUNS:-3}
    LOCAL=$(mktemp -d -t neve-bench-XXXXXX)
    "$N" bench ingest --target "$LOCAL" --rows "$ROWS" --runs "$RUNS" --python "$PY"
    "$N" bench ingest --target "s3://$NEVE_TEST_BUCKET/bench" --rows "$ROWS" --runs "$RUNS" --python "$PY"
    rm -rf "$LOCAL"
    ;;
  bench-nested)
    cargo build --release -p neve
    N=$CARGO_TARGET_DIR/release/neve
    ROWS=${ROWS:-1000000}
    RUNS=${RUNS:-3}
    LOCAL=$(mktemp -d -t neve-bench-XXXXXX)
    "$N" bench nested --target "$LOCAL" --rows "$ROWS" --runs "$RUNS" --python "$PY"
    "$N" bench nested --target "s3://$NEVE_TEST_BUCKET/bench" --rows "$ROWS" --runs "$RUNS" --python "$PY"
    rm -rf "$LOCAL"
    ;;
  bench-serve)
    cargo build --release -p neve
    N=$CARGO_TARGET_DIR/release/neve
    TSBS=$NEVE_CACHE/tsbs-v0.0.0-20230921131859-37fced794d56
    if [ ! -x "$TSBS/tsbs_load_influx" ]; then
      log "building TSBS (tsbs_generate_data, tsbs_load_influx)"
      T=$(mktemp -d)
      (cd "$T" && go mod init tsbsbuild >/dev/null 2>&1 \
        && go get github.com/timescale/tsbs/cmd/tsbs_generate_data@v0.0.0-20230921131859-37fced794d56 \
        && go get github.com/timescale/tsbs/cmd/tsbs_load_influx@v0.0.0-20230921131859-37fced794d56 \
        && go build -o "$TSBS/tsbs_generate_data" github.com/timescale/tsbs/cmd/tsbs_generate_data \
        && go build -o "$TSBS/tsbs_load_influx" github.com/timescale/tsbs/cmd/tsbs_load_influx)
      rm -rf "$T"
    fi
    VM=$NEVE_CACHE/victoria-metrics-v1.130.0
    if [ ! -x "$VM/victoria-metrics" ]; then
      log "building VictoriaMetrics v1.130.0 (the peer)"
      GOBIN=$VM go install github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@v1.130.0
    fi
    "$N" bench serve --target "s3://$NEVE_TEST_BUCKET/bench" --tsbs-dir "$TSBS" \
      --victoria-metrics "$VM/victoria-metrics" --hours "${HOURS:-24}" --workers "${WORKERS:-2,8}"
    ;;
  bench-python)
    # The package as users install it (`pip install ./python`: maturin, release) in a venv of
    # its own with the peers; IceDB from its repository with its own pinned dependencies.
    cargo build --release -p neve
    BV=$NEVE_CACHE/bench-python-$(sha256sum bench/requirements-python.txt | cut -c1-12)
    if [ ! -f "$BV/.complete" ]; then
      rm -rf "$BV"; python3 -m venv "$BV"
      "$BV/bin/pip" install --quiet --disable-pip-version-check -r bench/requirements-python.txt
      touch "$BV/.complete"
    fi
    "$BV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps ./python
    ICEDB_REPO=${ICEDB_REPO:-}
    ICEDB_ARGS=()
    if [ -n "$ICEDB_REPO" ]; then
      IV=$NEVE_CACHE/icedb-$(sha256sum bench/requirements-icedb.txt | cut -c1-12)
      if [ ! -f "$IV/.complete" ]; then
        rm -rf "$IV"; python3 -m venv "$IV"
        "$IV/bin/pip" install --quiet --disable-pip-version-check -r bench/requirements-icedb.txt
        touch "$IV/.complete"
      fi
      ICEDB_ARGS=(--icedb-python "$IV/bin/python" --icedb-repo "$ICEDB_REPO")
    fi
    LOCAL=$(mktemp -d -t neve-bench-XXXXXX)
    "$BV/bin/python" bench/python_ingest.py --neve-bin "$CARGO_TARGET_DIR/release/neve" --target "$LOCAL" \
      --rows "${ROWS:-1000000,10000000}" --runs "${RUNS:-3}"
    "$BV/bin/python" bench/python_ingest.py --neve-bin "$CARGO_TARGET_DIR/release/neve" \
      --target "s3://$NEVE_TEST_BUCKET/bench-python" --rows "${ROWS:-1000000,10000000}" --runs "${RUNS:-3}" "${ICEDB_ARGS[@]}"
    rm -rf "$LOCAL"
    ;;
  bench-log)
    cargo build --release -p neve
    N=$CARGO_TARGET_DIR/release/neve
    "$N" bench log --table "s3://$NEVE_TEST_BUCKET/bench/log10k" --commits "${COMMITS:-10000}"
    ;;
  bench-query)
    cargo build --release -p neve
    N=$CARGO_TARGET_DIR/release/neve
    ROWS=${ROWS:-10000000}
    RUNS=${RUNS:-5}
    LOCAL=$(mktemp -d -t neve-bench-XXXXXX)
    "$N" bench query --table "$LOCAL/taxi" --rows "$ROWS" --runs "$RUNS" --python "$PY"
    "$N" bench query --table "s3://$NEVE_TEST_BUCKET/bench/query-$(date +%s)/taxi" --rows "$ROWS" --runs "$RUNS" --python "$PY"
    rm -rf "$LOCAL"
    ;;
  bench-merge)
    cargo build --release -p neve
    N=$CARGO_TARGET_DIR/release/neve
    ROWS=${ROWS:-10000000}
    RUNS=${RUNS:-3}
    LOCAL=$(mktemp -d -t neve-bench-XXXXXX)
    "$N" bench merge --target "$LOCAL" --rows "$ROWS" --runs "$RUNS" --python "$PY"
    "$N" bench merge --target "s3://$NEVE_TEST_BUCKET/bench/merge-$(date +%s)" --rows "$ROWS" --runs "$RUNS" --python "$PY"
    rm -rf "$LOCAL"
    ;;
  bench-merge-semantics)
    cargo build --release -p neve
    N=$CARGO_TARGET_DIR/release/neve
    LOCAL=$(mktemp -d -t neve-bench-XXXXXX)
    "$N" bench merge-semantics --target "$LOCAL" --rows "${ROWS:-10000000}" --keys "${KEYS:-1000000}" --runs "${RUNS:-3}" --python "$PY"
    rm -rf "$LOCAL"
    ;;
  bench-proxy)
    cargo build --release -p neve
    TOXI=$NEVE_CACHE/toxiproxy-v2.12.0
    if [ ! -x "$TOXI/server" ]; then
      log "building Toxiproxy v2.12.0 (the S3-like link)"
      GOBIN=$TOXI go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0
    fi
    "$CARGO_TARGET_DIR/release/neve" bench proxy --python "$PY" --toxiproxy "$TOXI/server" \
      --table "s3://$NEVE_TEST_BUCKET/bench/proxy-$(date +%s)/taxi" --rows "${ROWS:-10000000}" \
      --runs "${RUNS:-3}" --threads "${THREADS:-2,8,32}"
    ;;
  bench-stream)
    cargo build --release -p neve
    "$CARGO_TARGET_DIR/release/neve" bench stream --python "$PY" --dir "$NEVE_CACHE/bench-stream" \
      --rows "${ROWS:-500000000}" --taxi-rows "${TAXI_ROWS:-10000000}" --runs "${RUNS:-3}"
    ;;
  bench-iceberg)
    cargo build --release -p neve
    N=$CARGO_TARGET_DIR/release/neve
    LOCAL=$(mktemp -d -t neve-bench-XXXXXX)
    # Commit cost on a local folder and on MinIO; the sync after many commits and the reads
    # (Spark reads the table from a local folder) once.
    "$N" bench iceberg --target "$LOCAL" --inserts "${INSERTS:-30}" --commits "${COMMITS:-10000}" \
      --python "$PY" --jar "$NEVE_ICEBERG_SPARK_JAR" --read-table "$NEVE_CACHE/bench-iceberg/taxi" \
      --read-rows "${READ_ROWS:-10000000}" --read-runs "${RUNS:-3}"
    "$N" bench iceberg --target "s3://$NEVE_TEST_BUCKET/bench" --inserts "${INSERTS:-30}" --commits 0
    rm -rf "$LOCAL"
    ;;
  *) log "unknown mode $1"; exit 2 ;;
esac
