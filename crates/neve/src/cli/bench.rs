//! Arguments of `neve bench`: the benchmarks that print figures for BENCHMARKS.md.

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// TSBS cpu-only through `tsbs_load_influx` into `neve serve` (and a peer), plus many
    /// small NDJSON clients: rates, acknowledgement latency, commits, files, peak memory.
    Serve(BenchServeArgs),
    /// Ingest generated taxi rows (month-partitioned, sorted) and compare with delta-rs.
    Ingest(BenchIngestArgs),
    /// Ingest nested events (struct, list, map) from Arrow and NDJSON; compare with delta-rs.
    Nested(BenchNestedArgs),
    /// Time opening a table with many commits (`neve info`).
    Log(BenchLogArgs),
    /// Write generated taxi rows to a file (parquet, csv, ndjson or arrow by extension).
    Gen(BenchGenArgs),
    /// The six seed queries over a taxi table, against DuckDB and chdb on the same files.
    Query(BenchQueryArgs),
    /// Load the taxi table in small inserts, merge and GC it; seed queries before and after.
    Merge(BenchMergeArgs),
    /// A `replace` table of many updates and deletes: exact reads against raw reads before
    /// and after merges, merge throughput against a plain merge, chdb's ReplacingMergeTree FINAL.
    MergeSemantics(BenchSemanticsArgs),
    /// chdb through `neve proxy` (cold, hot) and direct, over an S3-like Toxiproxy link to
    /// the store; and listing the table through the proxy against listing `_data/`.
    Proxy(BenchProxyArgs),
    /// What Iceberg metadata costs a commit (time, PUTs, bytes) and a sync after many
    /// commits; the seed queries through Iceberg (Spark, DuckDB) against Parquet globs and
    /// `neve sql`.
    Iceberg(BenchIcebergArgs),
    /// Results of `neve serve` streamed as Arrow over HTTP, over Flight SQL (ADBC) and as
    /// NDJSON, against one loopback TCP connection; latency of small queries against `neve sql`.
    Stream(BenchStreamArgs),
    /// One side of `neve bench stream` (used by its driver).
    #[command(hide = true)]
    StreamClient(BenchStreamClientArgs),
    /// Forward every TCP connection from `--listen` to `--to`, each byte read into memory and
    /// written out, nothing else: the least any proxy in a read's path costs (used by
    /// `bench/proxy_ab.py --relay`).
    #[command(hide = true)]
    Relay(BenchRelayArgs),
}

#[derive(Debug, Args)]
pub struct BenchRelayArgs {
    /// Listen here (port 0 for any); the address is printed.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// host:port every connection is forwarded to.
    #[arg(long)]
    pub to: String,
    /// Also keep every byte that comes back from upstream in memory, until the process ends,
    /// as a cache that fills does: the floor of a caching proxy.
    #[arg(long)]
    pub keep: bool,
}

#[derive(Debug, Args)]
pub struct BenchStreamArgs {
    /// Rows of one 64-bit integer streamed (Arrow over HTTP and Flight).
    #[arg(long, default_value_t = 500_000_000)]
    pub rows: u64,
    /// Rows streamed as NDJSON (slower per row: fewer).
    #[arg(long, default_value_t = 50_000_000)]
    pub ndjson_rows: u64,
    /// Rows of the taxi table streamed with `SELECT *` and queried for latency.
    #[arg(long, default_value_t = 10_000_000)]
    pub taxi_rows: u64,
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Where the taxi table is kept between runs (a local folder).
    #[arg(long, default_value = "./neve-bench/stream")]
    pub dir: String,
    /// Python with pyarrow and adbc-driver-flightsql.
    #[arg(long, default_value = "python3")]
    pub python: String,
}

#[derive(Debug, Args)]
pub struct BenchStreamClientArgs {
    /// `neve serve`'s URL: POST `--sql` and read the result.
    #[arg(long)]
    pub url: Option<String>,
    #[arg(long, default_value = "")]
    pub token: String,
    #[arg(long, default_value = "")]
    pub sql: String,
    /// arrow or ndjson.
    #[arg(long, default_value = "arrow")]
    pub format: String,
    /// For an `https://` URL: the PEM file of the CA to trust (only it).
    #[arg(long)]
    pub ca_cert: Option<std::path::PathBuf>,
    /// A Flight SQL endpoint (`grpc://host:port`): run `--sql` there with arrow-flight's
    /// client and read every endpoint's stream.
    #[arg(long)]
    pub flight: Option<String>,
    /// Listen here, print the address, read one connection to its end.
    #[arg(long)]
    pub sink: Option<String>,
    /// Connect here and write `--bytes`.
    #[arg(long)]
    pub source: Option<String>,
    #[arg(long, default_value_t = 0)]
    pub bytes: u64,
}

#[derive(Debug, Args)]
pub struct BenchSemanticsArgs {
    /// A local directory (chdb reads the files from it); the tables `users-replace` and
    /// `users-plain` are (re)created under it.
    #[arg(long, default_value = "./neve-bench")]
    pub target: String,
    #[arg(long, default_value_t = 10_000_000)]
    pub rows: usize,
    /// Keys the rows are drawn from (uniformly: most rows update an earlier key).
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    #[arg(long, default_value_t = 100)]
    pub inserts: usize,
    /// Share of rows that delete their key.
    #[arg(long, default_value_t = 0.01)]
    pub deletes: f64,
    /// Files per group of the partial merge.
    #[arg(long, default_value_t = 10)]
    pub partial_group: usize,
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Python with chdb; empty to skip the peer.
    #[arg(long, default_value = "")]
    pub python: String,
    #[arg(long)]
    pub keep: bool,
    /// Load the tables, time nothing and keep them (to profile a query on unmerged data).
    #[arg(long)]
    pub load_only: bool,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct BenchMergeArgs {
    /// A local directory or s3://bucket/prefix; the table `taxi-merge` is (re)created under it.
    #[arg(long, default_value = "./neve-bench")]
    pub target: String,
    #[arg(long, default_value_t = 10_000_000)]
    pub rows: usize,
    /// Rows per insert (each insert writes one small file per month it touches).
    #[arg(long, default_value_t = 100_000)]
    pub insert_rows: usize,
    /// Runs per seed query (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Keep the table afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Python with the `deltalake` package, to compact the same inserts with delta-rs; empty
    /// to skip.
    #[arg(long, default_value = "")]
    pub python: String,
    #[arg(long)]
    pub json: bool,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct BenchIngestArgs {
    /// Where to write: a local directory or s3://bucket/prefix (tables are created under it).
    #[arg(long, default_value = "./neve-bench")]
    pub target: String,
    /// Row counts to load, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000000")]
    pub rows: Vec<usize>,
    /// Runs per measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Python with the `deltalake` package, to measure delta-rs on the same data; empty to skip.
    #[arg(long, default_value = "")]
    pub python: String,
    /// Print results as JSON lines.
    #[arg(long)]
    pub json: bool,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct BenchNestedArgs {
    /// Where to write: a local directory or s3://bucket/prefix (tables are created under it).
    #[arg(long, default_value = "./neve-bench")]
    pub target: String,
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: usize,
    /// Runs per measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Python with the `deltalake` package, to measure delta-rs on the same data; empty to skip.
    #[arg(long, default_value = "")]
    pub python: String,
    /// Print results as JSON.
    #[arg(long)]
    pub json: bool,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct BenchServeArgs {
    /// The server's warehouse: a local folder or s3://bucket/prefix (a fresh folder per run).
    #[arg(long, default_value = "./neve-bench")]
    pub target: String,
    /// Folder holding TSBS's `tsbs_generate_data` and `tsbs_load_influx`.
    #[arg(long, env = "NEVE_TSBS_DIR")]
    pub tsbs_dir: std::path::PathBuf,
    /// TSBS hosts.
    #[arg(long, default_value_t = 500)]
    pub scale: u32,
    /// Hours of data from 2016-01-01 (24: TSBS's day, 4.32M rows at scale 500).
    #[arg(long, default_value_t = 24)]
    pub hours: u32,
    /// Loader workers, one run each.
    #[arg(long, default_value = "2,8", value_delimiter = ',')]
    pub workers: Vec<u32>,
    #[arg(long, default_value_t = 10_000)]
    pub batch_size: u32,
    /// The server's flush interval.
    #[arg(long, default_value = "200ms")]
    pub flush_interval: String,
    /// A VictoriaMetrics single-node binary: the peer, loaded with the same loader and data
    /// into a local folder.
    #[arg(long, env = "NEVE_PEER_VICTORIA_METRICS")]
    pub victoria_metrics: Option<std::path::PathBuf>,
    /// Clients of the small-request figure (10-row NDJSON requests); 0 skips it.
    #[arg(long, default_value_t = 1000)]
    pub clients: u32,
    /// Requests per client in the small-request figure.
    #[arg(long, default_value_t = 10)]
    pub requests: u32,
}

#[derive(Debug, Args)]
pub struct BenchLogArgs {
    /// Table to build (must not exist) or reuse with --reuse.
    #[arg(long)]
    pub table: String,
    /// Commits to make.
    #[arg(long, default_value_t = 10_000)]
    pub commits: u64,
    /// Reuse an existing table instead of building one.
    #[arg(long)]
    pub reuse: bool,
    /// Timed opens (the median is reported).
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Concurrent committers while building.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
}

#[derive(Debug, Args)]
pub struct BenchQueryArgs {
    /// The taxi table; created with --rows generated rows if it does not exist.
    #[arg(long)]
    pub table: String,
    #[arg(long, default_value_t = 10_000_000)]
    pub rows: usize,
    /// Runs per query (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Python with duckdb, duckdb-ext-httpfs and chdb, to run the peers; empty to skip.
    #[arg(long, default_value = "")]
    pub python: String,
    /// Print results as JSON lines.
    #[arg(long)]
    pub json: bool,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct BenchGenArgs {
    /// Output file; the extension picks the format.
    pub output: String,
    #[arg(long, default_value_t = 100_000)]
    pub rows: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct BenchIcebergArgs {
    /// Folder or s3:// prefix the commit-cost tables are made under.
    #[arg(long)]
    pub target: String,
    /// Rows per insert of the commit-cost runs (each size is one run).
    #[arg(long, default_value = "1000,100000")]
    pub rows: String,
    /// Inserts per table of a commit-cost run.
    #[arg(long, default_value_t = 30)]
    pub inserts: usize,
    /// Commits before the sync that is timed (0: skip).
    #[arg(long, default_value_t = 10_000)]
    pub commits: u64,
    /// The commit-cost runs' `iceberg_metrics` setting (e.g. "none, payment_type=full");
    /// unset, full bounds of every column.
    #[arg(long)]
    pub iceberg_metrics: Option<String>,
    /// The commit-cost tables' merge semantics (e.g. "replace(key = [taxi_id], version =
    /// trip_start_timestamp)"), sorted by the key, then the version: what the position
    /// deletes cost.
    #[arg(long)]
    pub merge: Option<String>,
    /// Write the Iceberg table's metadata after each insert returns (the server's `[iceberg]
    /// sync = "after_answer"`): each insert's answer, then how long until the metadata caught
    /// up (waited for before the next turn), and a stream of back-to-back inserts of each table.
    #[arg(long)]
    pub background: bool,
    /// Timed inserts and syncs at that many commits (the median is reported).
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// Python with pyspark, duckdb and neve: runs the read half (bench/iceberg.py).
    #[arg(long)]
    pub python: Option<String>,
    /// Iceberg's Spark runtime jar (the read half).
    #[arg(long)]
    pub jar: Option<String>,
    /// A local folder for the read half's taxi table (created and loaded if absent).
    #[arg(long)]
    pub read_table: Option<String>,
    #[arg(long, default_value_t = 10_000_000)]
    pub read_rows: usize,
    /// Runs per query of the read half.
    #[arg(long, default_value_t = 3)]
    pub read_runs: usize,
}

#[derive(Debug, Args)]
pub struct BenchProxyArgs {
    /// The taxi table on S3 (s3://bucket/prefix/taxi); created and loaded if absent. The
    /// store's endpoint and keys come from AWS_ENDPOINT_URL and AWS_ACCESS_KEY_ID/SECRET.
    #[arg(long)]
    pub table: String,
    #[arg(long, default_value_t = 10_000_000)]
    pub rows: u64,
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// chdb max_threads values.
    #[arg(long, default_value = "2,8,32")]
    pub threads: String,
    /// Python with chdb and boto3.
    #[arg(long)]
    pub python: String,
    /// Toxiproxy's server binary (github.com/Shopify/toxiproxy/v2/cmd/server).
    #[arg(long)]
    pub toxiproxy: String,
    /// Delay before each response on the link (ms).
    #[arg(long, default_value_t = 30)]
    pub latency_ms: u64,
    /// Bandwidth per connection on the link (KB/s).
    #[arg(long, default_value_t = 51_200)]
    pub rate_kbs: u64,
}
