//! Command-line arguments.

use clap::{Args, Parser, Subcommand, ValueEnum};

mod bench;

pub use bench::*;

/// neve: a serverless data lake on object storage.
///
/// Tables are addressed by a path or URL: ./dir, file:///abs/dir, s3://bucket/prefix/table.
/// S3 settings come from AWS_* variables (AWS_ENDPOINT_URL for MinIO).
#[derive(Debug, Parser)]
#[command(name = "neve", version, about, long_about = None)]
pub struct Cli {
    /// More logging (-v, -vv); NEVE_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// How log lines are written to stderr: `text` for people, `json` (one object a line,
    /// with the request's span fields) for a log pipeline (Loki, Elasticsearch, Datadog).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "NEVE_LOG_FORMAT", global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a table, optionally with its columns declared (--schema).
    Create(CreateArgs),
    /// Change a table's schema in one commit: add column "C TYPE", rename column A to B,
    /// drop column C, widen C TYPE, set not null C, drop not null C.
    Alter(AlterArgs),
    /// Insert Parquet, CSV, NDJSON/JSON or Arrow files (or `-` for stdin) in one commit.
    Insert(InsertArgs),
    /// Show a table's version, files, rows, bytes, partitions, schema and settings.
    Info(InfoArgs),
    /// List the alive files of a snapshot, as paths or ready for DuckDB / ClickHouse.
    Files(FilesArgs),
    /// One line per commit.
    History(HistoryArgs),
    /// Run SQL over tables (DataFusion): --table NAME=URL (repeatable) or --warehouse URL.
    Sql(SqlArgs),
    /// Merge small files of each partition into files of about a target size, in sort order.
    Merge(MergeArgs),
    /// Delete tombstoned and orphaned data files and old log entries.
    Gc(GcArgs),
    /// Remove every file of the given partitions in one commit (metadata only).
    DropPartition(DropPartitionArgs),
    /// Delete the rows matching a SQL predicate in one commit, rewriting only affected files.
    Delete(DeleteArgs),
    /// Create a demo table under DIR, load generated taxi rows and show it.
    Quickstart(QuickstartArgs),
    /// Benchmarks and data generators.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Run the ingest server: HTTP inserts with group commit, idempotent retries, tenants,
    /// Prometheus metrics (docs/SERVER.md).
    Serve(ServeArgs),
    /// Serve each tenant's tables as read-only S3 buckets of their alive files, for DuckDB,
    /// ClickHouse, Spark and any S3 client (docs/PROXY.md).
    Proxy(ProxyArgs),
    /// Print the SHA-256 of a token, as the server's config stores it.
    HashToken(HashTokenArgs),
    /// Run only the maintenance loop (merge and gc of every table), for dedicated workers.
    Maintain(MaintainArgs),
    /// Iceberg metadata beside the log, so Spark, Trino, DuckDB, ClickHouse and pyiceberg
    /// read the table (docs/ENGINES.md).
    #[command(subcommand)]
    Iceberg(IcebergCommand),
}

#[derive(Debug, clap::Subcommand)]
pub enum IcebergCommand {
    /// Write Iceberg metadata after every commit from now on (the table setting
    /// iceberg=true), and for the versions the log keeps.
    Enable(IcebergArgs),
    /// Stop writing it; metadata/ is left as it is, describing the version it last did.
    Disable(IcebergArgs),
    /// Bring metadata/ up to the latest version (after a sync failed or was killed).
    Sync(IcebergSyncArgs),
}

#[derive(Debug, Args)]
pub struct IcebergArgs {
    pub table: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct IcebergSyncArgs {
    pub table: String,
    /// Rebuild every retained snapshot from the log, whatever metadata/ holds.
    #[arg(long)]
    pub full: bool,
    #[arg(long)]
    pub json: bool,
}

/// Maintenance policy flags (override `[maintenance]` of the config).
#[derive(Debug, Args, Clone)]
pub struct MaintenanceArgs {
    /// Time between maintenance rounds (e.g. 60s).
    #[arg(long)]
    pub maintenance_interval: Option<humantime::Duration>,
    /// Merge a partition once it has this many small files.
    #[arg(long, value_parser = at_least(2))]
    pub merge_min_files: Option<usize>,
    /// Merged files' target size (e.g. 128MiB).
    #[arg(long)]
    pub merge_target_file_size: Option<bytesize::ByteSize>,
    /// gc keeps unreferenced files younger than this (e.g. 1h).
    #[arg(long)]
    pub gc_grace: Option<humantime::Duration>,
}

#[derive(Debug, Args)]
pub struct MaintainArgs {
    /// The warehouse: a local folder or s3://bucket/prefix.
    #[arg(long)]
    pub warehouse: Option<String>,
    /// The server's TOML config (its tenants and `[maintenance]` policy).
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// One round, then exit.
    #[arg(long)]
    pub once: bool,
    /// Serve Prometheus metrics (`GET /metrics`) on this address (port 0: any free port).
    #[arg(long, conflicts_with = "once")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub policy: MaintenanceArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where tables live: a local folder or s3://bucket/prefix (overrides the config file).
    #[arg(long)]
    pub warehouse: Option<String>,
    /// Address to listen on, e.g. 127.0.0.1:8080 (port 0: any free port).
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    /// A TOML config file (tenants, tokens, ingest settings).
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// The admin token when the config lists no tenants.
    #[arg(long, env = "NEVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Flush a table's queue when its oldest request has waited this long (e.g. 200ms).
    #[arg(long)]
    pub flush_interval: Option<humantime::Duration>,
    /// Memory queued requests may hold before requests get 429 (e.g. 1GiB).
    #[arg(long)]
    pub max_pending_bytes: Option<bytesize::ByteSize>,
    /// Largest request body (e.g. 256MiB).
    #[arg(long)]
    pub max_body_bytes: Option<bytesize::ByteSize>,
    /// Leave merging and gc to dedicated workers (`neve maintain`).
    #[arg(long)]
    pub no_maintenance: bool,
    /// Also answer Arrow Flight SQL (ADBC, JDBC) on this address, e.g. 127.0.0.1:8815.
    #[arg(long)]
    pub flight_listen: Option<std::net::SocketAddr>,
    /// SQL queries running at once; more get 429 (default 16).
    #[arg(long)]
    pub max_concurrent_queries: Option<usize>,
    /// Memory each SQL query's sorts, joins and aggregates may hold (e.g. 1GiB).
    #[arg(long)]
    pub query_memory: Option<bytesize::ByteSize>,
    /// The longest a SQL query may run (e.g. 5m).
    #[arg(long)]
    pub query_timeout: Option<humantime::Duration>,
    /// After SIGTERM, how long requests in flight may take before their connections are
    /// closed (default 30s); queued inserts are flushed and answered within it.
    #[arg(long)]
    pub shutdown_grace: Option<humantime::Duration>,
    /// Also serve the tables as S3 buckets on this address (`neve proxy` in the same process,
    /// with the keys of the config's tenants or of --access-key-id).
    #[arg(long)]
    pub s3_listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub s3_key: ProxyKeyArgs,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub policy: MaintenanceArgs,
}

/// HTTPS (and Flight SQL over TLS) instead of plain HTTP.
#[derive(Debug, Args, Clone)]
pub struct TlsArgs {
    /// The certificate (then any intermediates) in PEM: every port of the process speaks TLS.
    /// Read again when it changes: a renewed certificate needs no restart.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// Its private key in PEM.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Mutual TLS: clients must present a certificate signed by a CA in this PEM file (tokens
    /// and keys are still asked for). Read again when it changes.
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<std::path::PathBuf>,
}

impl TlsArgs {
    /// The files the flags name, if they do.
    pub fn files(&self) -> Option<neve_proxy::tls::TlsFiles> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(neve_proxy::tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
            }),
            _ => None,
        }
    }
}

/// The single S3 key pair of a proxy without tenants.
#[derive(Debug, Args, Clone)]
pub struct ProxyKeyArgs {
    /// The access key id that reads every table of the warehouse (without tenants in the
    /// config).
    #[arg(long, env = "NEVE_PROXY_ACCESS_KEY_ID")]
    pub access_key_id: Option<String>,
    /// Its secret.
    #[arg(long, env = "NEVE_PROXY_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub secret_access_key: Option<String>,
}

#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Where tables live: a local folder or s3://bucket/prefix (overrides the config file).
    #[arg(long)]
    pub warehouse: Option<String>,
    /// Address to listen on (default 127.0.0.1:9300; port 0: any free port).
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    /// The TOML config shared with `neve serve` (tenants with `access_keys`, `[proxy]`).
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub key: ProxyKeyArgs,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// A listing re-reads its table's log tail when the snapshot in memory is older than
    /// this (default 0s: always).
    #[arg(long)]
    pub refresh_interval: Option<humantime::Duration>,
    /// Memory for cached blocks of data files (default 256MiB; 0: no cache).
    #[arg(long)]
    pub cache_memory: Option<bytesize::ByteSize>,
    /// Local disk for cached blocks (default 0: memory only); needs --cache-dir.
    #[arg(long)]
    pub cache_disk: Option<bytesize::ByteSize>,
    /// Folder of the disk cache.
    #[arg(long)]
    pub cache_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct HashTokenArgs {
    /// The token (or `-` to read it from stdin).
    pub token: String,
}

#[derive(Debug, Args, Clone)]
pub struct LayoutArgs {
    /// Partition transforms, e.g. "month(trip_start_timestamp) as d, bucket(16, user_id)".
    #[arg(long, default_value = "")]
    pub partition_by: String,
    /// Sort keys inside each file, comma-separated.
    #[arg(long, default_value = "", value_delimiter = ',')]
    pub sort_by: Vec<String>,
    /// Merge semantics: what several rows of one key mean, e.g. "replace(key = [user_id],
    /// version = updated_at, deleted = is_deleted)", "aggregate(key = [site, day], sum =
    /// [views], count = rows)" or "dedupe(key = [event_id])". The key must lead --sort-by.
    #[arg(long)]
    pub merge: Option<String>,
    /// Table settings as key=value (checkpoint_interval, strict_schema, compression, row_group_rows, log_retention_hours, iceberg, ...).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    pub table: String,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// The columns, e.g. "id string not null, ts timestamp(UTC), user struct<id int64, plan
    /// string>, tags list<string>, attrs map<string, string>, amount decimal(18,2)".
    #[arg(long)]
    pub schema: Option<String>,
    /// Reject inserts that bring columns (or nested fields) the schema does not declare.
    #[arg(long)]
    pub strict_schema: bool,
    /// Write Iceberg metadata after every commit (the setting iceberg=true), so engines that
    /// read Iceberg read the table (a replace or dedupe --merge through position deletes;
    /// not an aggregate one).
    #[arg(long)]
    pub iceberg: bool,
}

#[derive(Debug, Args)]
pub struct AlterArgs {
    pub table: String,
    /// The change: add column "country string" | rename column tags to labels | drop column
    /// attrs | widen amount decimal(28,2) | set not null id | drop not null id.
    #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
    pub change: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Parquet,
    Csv,
    Ndjson,
    Json,
    Arrow,
}

#[derive(Debug, Args)]
pub struct InsertArgs {
    pub table: String,
    /// Input files; `-` reads stdin.
    #[arg(required = true)]
    pub inputs: Vec<String>,
    /// Force the input format instead of detecting it from the extension or content.
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Create the table if it does not exist, with --partition-by/--sort-by.
    #[arg(long)]
    pub create: bool,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Rows of a CSV/JSON input used to infer the types of new columns.
    #[arg(long, default_value_t = 100_000, value_parser = at_least(1))]
    pub infer_rows: usize,
    /// CSV field delimiter (one character; `\t` for tab).
    #[arg(long, default_value = ",")]
    pub delimiter: String,
    /// CSV files have no header row (columns become column_1, column_2, ...).
    #[arg(long)]
    pub no_header: bool,
    /// Read numbers given for timestamp columns as seconds, milliseconds, microseconds or
    /// nanoseconds since the epoch (without it they are an error).
    #[arg(long, value_name = "s|ms|us|ns")]
    pub epoch_unit: Option<String>,
    /// Rows buffered before a chunk is partitioned, sorted and written (bounds memory).
    #[arg(long, default_value_t = 2 << 20, value_parser = at_least(1))]
    pub chunk_rows: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    pub table: String,
    /// A version number or a timestamp (RFC 3339 or YYYY-MM-DD[ HH:MM:SS], UTC).
    #[arg(long)]
    pub as_of: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum FilesFormat {
    Plain,
    Json,
    Duckdb,
    Clickhouse,
}

#[derive(Debug, Args)]
pub struct FilesArgs {
    pub table: String,
    #[arg(long)]
    pub as_of: Option<String>,
    #[arg(long, value_enum, default_value_t = FilesFormat::Plain)]
    pub format: FilesFormat,
    /// duckdb and clickhouse formats of a table with merge semantics: the stored rows, not the
    /// query that merges them by key.
    #[arg(long)]
    pub raw: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum SqlFormat {
    /// A readable table (the whole result is buffered).
    Table,
    Csv,
    /// One JSON array of objects.
    Json,
    /// One JSON object per line.
    Ndjson,
    Parquet,
    /// Arrow IPC stream.
    Arrow,
}

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// The query; `-` reads it from stdin.
    pub query: String,
    /// A table to query, as NAME=URL, or just URL (named after its last path segment).
    #[arg(long = "table", value_name = "NAME=URL")]
    pub tables: Vec<String>,
    /// Register every table under this folder or prefix, each by its folder name.
    #[arg(long)]
    pub warehouse: Option<String>,
    #[arg(long, value_enum, default_value_t = SqlFormat::Table)]
    pub format: SqlFormat,
    /// Write the result to this file instead of stdout.
    #[arg(long, short)]
    pub output: Option<String>,
    /// Query every table as of a version or a timestamp.
    #[arg(long)]
    pub as_of: Option<String>,
    /// Print rows, time, and bytes read from storage to stderr.
    #[arg(long)]
    pub stats: bool,
    /// Read the stored rows of tables with merge semantics, unmerged (several per key).
    #[arg(long)]
    pub raw: bool,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    pub table: String,
    /// Files are merged up to this size; larger files are left alone (512MB, 1GiB, ...).
    #[arg(long, default_value = "512MiB", value_parser = parse_size)]
    pub target_file_size: u64,
    /// Merge a partition only when it has at least this many files below the target.
    #[arg(long, default_value_t = 4, value_parser = at_least(2))]
    pub min_files: usize,
    /// Which partitions go first when the run is capped.
    #[arg(long, value_enum, default_value_t = OrderArg::Newest)]
    pub order: OrderArg,
    /// Only this partition folder, e.g. d=2021-08 (repeatable).
    #[arg(long = "partition", value_name = "P")]
    pub partitions: Vec<String>,
    /// Cap on input bytes per run; the remaining partitions wait for the next run.
    #[arg(long, default_value = "64GiB", value_parser = parse_size)]
    pub max_input_bytes: u64,
    /// Groups merged at once (default: the number of cores).
    #[arg(long, value_parser = at_least(1))]
    pub parallelism: Option<usize>,
    /// Show the plan without writing anything.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OrderArg {
    Newest,
    Oldest,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    pub table: String,
    /// Minimum age of an unreferenced or removed file before it is deleted; must exceed the
    /// longest insert or merge (30s, 15m, 1h, 2d).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub grace: u64,
    /// Time-travel window: removed files and log entries are kept this long (default: the
    /// table's log_retention_hours).
    #[arg(long, value_parser = parse_duration)]
    pub retention: Option<u64>,
    /// Report what would be deleted without deleting.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DropPartitionArgs {
    pub table: String,
    /// Partition folders, e.g. d=2021-08 (or 2021-08 when the table has one partition level).
    #[arg(required = true)]
    pub partitions: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    pub table: String,
    /// SQL predicate over the table's columns; rows where it is true are deleted.
    #[arg(long = "where", value_name = "PREDICATE")]
    pub predicate: String,
    /// Files rewritten at once (default: the number of cores).
    #[arg(long, value_parser = at_least(1))]
    pub parallelism: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

/// Milliseconds from `30s`, `15m`, `1h`, `2d`, `1h 30m`.
fn parse_duration(s: &str) -> Result<u64, String> {
    humantime::parse_duration(s.trim())
        .map(|d| d.as_millis() as u64)
        .map_err(|e| format!("'{s}': {e} (e.g. 30s, 15m, 1h, 7d)"))
}

/// Bytes from `512MB` (decimal), `512MiB` (binary), `1GB`, `1048576`.
fn parse_size(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| format!("'{s}': {e} (e.g. 512MB, 1GiB)"))
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    pub table: String,
    /// Only the last N commits.
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct QuickstartArgs {
    /// Where to put the demo table.
    #[arg(default_value = "./neve-data")]
    pub dir: String,
    /// Rows to generate.
    #[arg(long, default_value_t = 200_000)]
    pub rows: usize,
}

/// A count flag's parser: whole numbers from `min` (`--min-files 0` is refused, not run).
fn at_least(min: usize) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s: &str| match s.parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(format!("expected a whole number of at least {min}")),
    }
}
