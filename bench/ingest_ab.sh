#!/usr/bin/env bash
# Two builds' inserts of the same generated taxi rows, in turns:
#   bench/ingest_ab.sh BASE_NEVE NEW_NEVE [ROUNDS] [ROWS] [RUNS]
# Each round runs `neve bench ingest --rows ROWS --runs RUNS --json` of each build, on a fresh
# folder under a tmpfs (BENCH_TMPFS, /dev/shm by default), so the disk's speed is not measured.
# Prints each round's medians, then the medians over the rounds of: the insert's wall time,
# its CPU, the Parquet encoder's CPU and the parts' sort's CPU (each summed over the threads),
# and the encoder's CPU over the sort's: on this shared machine a run's speed moves by a
# quarter from one minute to the next, and the sort, which a change to the encoder leaves
# alone, moves with it.
set -euo pipefail
BASE=$1 NEW=$2 ROUNDS=${3:-5} ROWS=${4:-1000000} RUNS=${5:-3}
PARENT=${BENCH_TMPFS:-/dev/shm}
[ -d "$PARENT" ] || PARENT=${TMPDIR:-/tmp}
DIR=$(mktemp -d -p "$PARENT" neve-ingest-ab-XXXXXX)
OUT=$(mktemp -d -t neve-ingest-ab-out-XXXXXX)
trap 'rm -rf "$DIR" "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for b in base new; do
    bin=$BASE; [ "$b" = new ] && bin=$NEW
    rm -rf "${DIR:?}"/*
    "$bin" bench ingest --target "$DIR" --rows "$ROWS" --runs "$RUNS" --json \
      > "$OUT/$b-$r.json" 2> "$OUT/$b-$r.err"
    python3 - "$OUT/$b-$r.json" "$b" "$r" <<'PY'
import json, statistics as st, sys
path, b, r = sys.argv[1:]
d = json.loads(open(path).read().strip().splitlines()[-1])
print(f"round {r} {b}: wall {st.median(d['neve_runs_s']):.3f} s, "
      f"CPU {st.median(d['neve_cpu_runs_s']):.3f} s, encoder CPU {st.median(d['neve_encode_runs_s']):.3f} s, "
      f"sort CPU {st.median(d['neve_sort_runs_s']):.3f} s, "
      f"encoder/sort {st.median(e / s for e, s in zip(d['neve_encode_runs_s'], d['neve_sort_runs_s'])):.2f}, "
      f"runs {' '.join(f'{x:.3f}' for x in d['neve_runs_s'])}")
PY
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics as st, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for b in ("base", "new"):
    ds = [json.loads(open(f"{out}/{b}-{r}.json").read().strip().splitlines()[-1])
          for r in range(1, rounds + 1)]
    med = lambda k: st.median(st.median(d[k]) for d in ds)
    print(f"{b}: medians over {rounds} rounds: wall {med('neve_runs_s'):.3f} s, "
          f"CPU {med('neve_cpu_runs_s'):.3f} s, encoder CPU {med('neve_encode_runs_s'):.3f} s, "
          f"sort CPU {med('neve_sort_runs_s'):.3f} s, encoder/sort "
          f"{st.median(st.median(e / s for e, s in zip(d['neve_encode_runs_s'], d['neve_sort_runs_s'])) for d in ds):.2f}")
PY
