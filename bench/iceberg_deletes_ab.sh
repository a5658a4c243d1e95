#!/usr/bin/env bash
# What position deletes cost a commit of a `replace` table, for two builds in turns:
#   bench/iceberg_deletes_ab.sh BASE_NEVE NEW_NEVE [ROUNDS] [INSERTS]
# Each run: `neve bench iceberg --merge …` (INSERTS inserts of 100,000 taxi rows into a table
# with and one without Iceberg metadata), on a tmpfs folder: on a disk's file system the
# PUTs slow run after run as the runs before delete their files (BENCHMARKS.md, issue 19).
# Prints, per run, the medians of the added time and of the sync's debug timings (since the
# forty-fourth session `decide_ms` is the wall of deciding and encoding together, `encode_ms`
# encoding summed over the threads; `deletes_ms` compares across builds; `sync_ms` is the
# wall from each commit to its sync's end, steadier than the added time).
set -euo pipefail
BASE=$1 NEW=$2 ROUNDS=${3:-3} INSERTS=${4:-8}
# A fresh folder of its own under the tmpfs (BENCH_TMPFS), removed at the end: nothing of the
# caller's is deleted.
PARENT=${BENCH_TMPFS:-/dev/shm}
[ -d "$PARENT" ] || PARENT=${TMPDIR:-/tmp}
DIR=$(mktemp -d -p "$PARENT" neve-deletes-ab-XXXXXX)
OUT=$(mktemp -d -t neve-deletes-ab-out-XXXXXX)
trap 'rm -rf "$DIR" "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for b in base new; do
    bin=$BASE; [ "$b" = new ] && bin=$NEW
    rm -rf "${DIR:?}"/*
    NEVE_LOG=neve_core::iceberg=debug,neve_core::log=debug "$bin" bench iceberg --target "$DIR" --rows 100000 \
      --inserts "$INSERTS" --commits 0 \
      --merge "replace(key = [taxi_id], version = trip_start_timestamp)" \
      > "$OUT/$b-$r.json" 2> "$OUT/$b-$r.err"
    python3 - "$OUT/$b-$r" "$b" "$r" <<'PY'
import json, re, statistics as st, sys
path, b, r = sys.argv[1:]
d = json.loads(open(path + ".json").read().strip().splitlines()[-1])
err = re.sub(r"\x1b\[[0-9;]*m", "", open(path + ".err").read())
med = lambda k: st.median(float(x) for x in re.findall(k + r"=([0-9.]+)", err))
# The sync after each commit of the Iceberg table, wall: from its "committed" line to its
# report (the plain table's commits are followed by no report).
from datetime import datetime
at = lambda line: datetime.fromisoformat(line[:26]).timestamp() * 1e3
syncs, committed = [], None
for line in err.splitlines():
    if "committed version" in line:
        committed = line
    elif "iceberg sync report" in line and committed is not None:
        syncs.append(at(line) - at(committed))
        committed = None
sync_ms = st.median(syncs) if syncs else float("nan")
print(f"{b} run {r}: plain {d['plain_insert_median_ms']:.1f} ms, with Iceberg "
      f"{d['iceberg_insert_median_ms']:.1f} ms, added {d['added_ms_per_commit']:.1f} ms "
      f"({d['added_fraction'] * 100:.1f}%), added CPU "
      f"{d['iceberg_insert_cpu_median_ms'] - d['plain_insert_cpu_median_ms']:.1f} ms; medians: decide_ms {med('decide_ms'):.1f}, "
      f"encode_ms {med('encode_ms'):.1f}, deletes_ms {med('deletes_ms'):.1f}, puts_ms {med('puts_ms'):.1f}, "
      f"sync_ms {sync_ms:.1f}")
PY
  done
done
