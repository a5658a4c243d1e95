#!/bin/bash
# What Iceberg metadata adds to a CLI insert (a fresh process) into a `replace` table:
# a month-partitioned table of 10 inserts of 100,000 taxi rows (132 months each), then
# small inserts of one month, each a new `neve insert`, into the table with --iceberg and
# into the same table without, in turns. Prints "iceberg <ms>" and "plain <ms>" per insert.
# Usage: bench/iceberg_fresh_inserts.sh <neve binary> <scratch dir> [inserts]
set -euo pipefail
BIN=$1
D=$2
N=${3:-7}
rm -rf "$D"
mkdir -p "$D/in"
for i in $(seq 1 10); do
  "$BIN" bench gen --rows 100000 --seed "$i" "$D/in/load-$i.parquet" >/dev/null 2>&1
done
# Small inserts of one month: rows of 2021-08 from other generated rows.
"$BIN" create "$D/gen" >/dev/null
for i in $(seq 1 "$N"); do
  "$BIN" bench gen --rows 200000 --seed $((100 + i)) "$D/in/gen-$i.parquet" >/dev/null 2>&1
  "$BIN" insert "$D/gen" "$D/in/gen-$i.parquet" >/dev/null
done
for i in $(seq 1 "$N"); do
  "$BIN" sql --table "g=$D/gen" --format parquet -o "$D/in/one-$i.parquet" \
    "SELECT * FROM g WHERE trip_start_timestamp >= TIMESTAMP '2021-08-01' AND trip_start_timestamp < TIMESTAMP '2021-09-01' ORDER BY trip_id LIMIT 320 OFFSET $((320 * (i - 1)))"
done
MERGE="replace(key = [taxi_id], version = trip_start_timestamp)"
for t in iceberg plain; do
  extra=()
  if [ "$t" = iceberg ]; then extra=(--iceberg); fi
  "$BIN" create "$D/$t" --partition-by "month(trip_start_timestamp) as d" \
    --sort-by "taxi_id,trip_start_timestamp" --merge "$MERGE" "${extra[@]}" >/dev/null
  for i in $(seq 1 10); do "$BIN" insert "$D/$t" "$D/in/load-$i.parquet" >/dev/null; done
done
for i in $(seq 1 "$N"); do
  for t in iceberg plain; do
    s=$(date +%s%N)
    "$BIN" insert "$D/$t" "$D/in/one-$i.parquet" >/dev/null
    e=$(date +%s%N)
    echo "$t $(((e - s) / 1000000))"
  done
done
