# neve: two set-up commands on a fresh machine, `make run` and `make test`.
SHELL := /bin/bash
NEVE_CACHE ?= $(HOME)/.cache/neve
CARGO_TARGET_DIR ?= $(HOME)/.cache/neve-target
export CARGO_TARGET_DIR NEVE_CACHE

.PHONY: run build test lint unit bench-ingest bench-nested bench-serve bench-python bench-log bench-query bench-merge bench-merge-semantics bench-proxy bench-stream bench-iceberg

## Build (release) and run the quick start on ./neve-data: no services needed.
run:
	cargo build --release -p neve
	$(CARGO_TARGET_DIR)/release/neve quickstart ./neve-data

build:
	cargo build --release -p neve

## Install what tests need (MinIO, a Python venv), start MinIO, run every test, stop MinIO.
test:
	scripts/test.sh

## fmt and clippy, as CI runs them.
lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

## Unit tests only (no MinIO).
unit:
	cargo test -p neve-core

## Benchmarks (figures for BENCHMARKS.md); they start MinIO like `make test`.
bench-ingest:
	scripts/test.sh bench-ingest

bench-nested:
	scripts/test.sh bench-nested

bench-serve:
	scripts/test.sh bench-serve

## ICEDB_REPO=path/to/icedb adds IceDB as a peer (its repository, e.g. fetched by the search tool).
bench-python:
	scripts/test.sh bench-python

bench-log:
	scripts/test.sh bench-log

bench-query:
	scripts/test.sh bench-query

## chdb through `neve proxy` and direct over a Toxiproxy link to MinIO (ROWS, RUNS, THREADS).
bench-proxy:
	scripts/test.sh bench-proxy

bench-stream:
	scripts/test.sh bench-stream

bench-merge:
	scripts/test.sh bench-merge

## A replace table: exact reads vs raw, merge vs plain merge, chdb ReplacingMergeTree FINAL (ROWS, KEYS, RUNS).
bench-merge-semantics:
	scripts/test.sh bench-merge-semantics

## Iceberg metadata: commit cost (local, MinIO), sync after COMMITS commits, seed queries through
## Iceberg (Spark, DuckDB) against Parquet globs and `neve sql` (INSERTS, COMMITS, READ_ROWS, RUNS).
bench-iceberg:
	scripts/test.sh bench-iceberg
