//! Integration tests: one binary. Stores: in-memory, local folder and a real MinIO started by
//! `make test` (AWS_ENDPOINT_URL, NEVE_TEST_BUCKET). MinIO tests fail, never skip, without it.

mod cli;
mod common;
mod concurrency;
mod conformance;
mod https_store;
mod maintenance;
mod semantics;
mod serve;
mod sql;
mod types;
