//! The HTTP API (docs/SERVER.md): tables, inserts, health and metrics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use neve_core::write::input::{open_bytes, ReadOptions};
use neve_core::CreateOptions;
use serde::Deserialize;
use tracing::Instrument;

use crate::auth::{Auth, Caller, Role};
use crate::config::ServerConfig;
use crate::error::{Error, Result};
use crate::ingest::{body, lineproto, Idempotency, Ingest};
use crate::metrics::{Metrics, RouteLabels};
use crate::redact::Redact;

/// What every handler shares.
pub struct AppState {
    pub config: ServerConfig,
    /// The tokens in force: replaced whole when the config file's tokens are read again.
    auth: std::sync::RwLock<Arc<Auth>>,
    pub ingest: Ingest,
    pub metrics: Arc<Metrics>,
    pub queries: crate::query::Queries,
    /// Takes the warehouse's paths out of what callers are answered.
    pub redact: Arc<Redact>,
    pub(crate) tables: tokio::sync::Mutex<crate::tables::OpenTables>,
    pub ready: AtomicBool,
}

impl AppState {
    pub fn new(config: ServerConfig, auth: Auth, metrics: Arc<Metrics>) -> Self {
        Self {
            ingest: Ingest::new(
                config.ingest.clone(),
                // With this server's maintenance off too: workers' gc uses the same grace.
                Some(config.maintenance.gc_grace),
                config.keep_idle_tables,
                metrics.clone(),
            ),
            queries: crate::query::Queries::new(config.query.clone()),
            redact: Arc::new(Redact::new(&config.table_roots())),
            config,
            auth: std::sync::RwLock::new(Arc::new(auth)),
            metrics,
            tables: Default::default(),
            ready: AtomicBool::new(false),
        }
    }

    /// The tokens in force.
    pub fn auth(&self) -> Arc<Auth> {
        self.auth.read().expect("tokens").clone()
    }

    /// Puts the tokens of `new` in force, for requests from now on. Only tokens change this
    /// way: tenants (their names and folders) are what the maintenance loop, the queues and
    /// the proxy were started with, so a file that changes them is refused, as is one with
    /// no tenants (the single admin token comes from `--token`).
    pub fn reload_tokens(&self, new: &ServerConfig) -> Result<usize> {
        let auth = Auth::reloaded(&self.config, new)?;
        let n = auth.len();
        *self.auth.write().expect("tokens") = Arc::new(auth);
        Ok(n)
    }

    /// Where table `name` lives for the request's caller, if the caller's role allows
    /// `action`.
    fn authorize(
        &self,
        headers: &HeaderMap,
        needed: Role,
        action: &str,
        name: &str,
    ) -> Result<String> {
        let caller = self.auth().caller(headers, None)?;
        caller.require(needed, action)?;
        self.address(&caller, name)
    }

    /// The folders at the top of the caller's part of the warehouse (tables, namespaces).
    async fn tenant_folders(
        &self,
        caller: &Caller,
    ) -> Result<(neve_core::TableLocation, Vec<object_store::path::Path>)> {
        let root = neve_core::TableLocation::parse(&self.tenant_root(caller))?;
        let listing = root
            .store
            .list_with_delimiter(Some(&root.child("")))
            .await
            .map_err(|e| Error::Table(e.into()))?;
        Ok((root, listing.common_prefixes))
    }

    /// Where the caller's table `name` lives: `warehouse/[tenant prefix/]name`.
    pub(crate) fn address(&self, caller: &Caller, name: &str) -> Result<String> {
        if !crate::valid_name(name) {
            return Err(Error::InvalidTableName {
                name: name.to_string(),
            });
        }
        Ok(format!("{}/{name}", self.tenant_root(caller)))
    }

    pub(crate) fn tenant_root(&self, caller: &Caller) -> String {
        let base = self.config.warehouse.trim_end_matches('/');
        match &caller.tenant.prefix {
            Some(p) => format!("{base}/{p}"),
            None => base.to_string(),
        }
    }

    /// `e`, which reading table `name` at `address` met, for the caller; a table that does not
    /// exist leaves the handle cache (a client naming random tables would fill it otherwise).
    pub(crate) async fn gone(&self, e: neve_core::Error, address: &str, name: &str) -> Error {
        if matches!(e, neve_core::Error::TableNotFound { .. }) {
            self.forget_table(address).await;
        }
        not_found(e, name)
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    let limit = state.config.ingest.max_body_bytes as usize;
    let redact = state.redact.clone();
    Router::new()
        .route("/v1/tables", get(list_tables))
        .route("/v1/tables/{name}", put(create_table).get(table_info))
        .route("/v1/tables/{name}/insert", post(insert))
        .route("/v1/sql", post(crate::query::http::sql))
        .route("/api/v2/write", post(write_v2))
        .route("/write", post(write_v1))
        .route("/query", get(influx_query).post(influx_query))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
        .fallback(|| async { Error::NoSuchRoute })
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::map_response(move |r: Response| {
            let redact = redact.clone();
            async move { json_errors(r, limit as u64, &redact).await }
        }))
        // Probes and metrics answer in text, as their callers expect.
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// The caller is known before the body is read: a request without a valid token is
/// answered 401 at once, never after the server has taken up to `max_body_bytes` of it.
/// The handlers still authorise what the request touches.
async fn authenticate(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Result<Response> {
    #[derive(Deserialize)]
    struct Token {
        p: Option<String>,
    }
    // InfluxDB 1 clients send the token as `p=`; a query string that does not parse is
    // the handler's to refuse.
    let p = Query::<Token>::try_from_uri(req.uri())
        .ok()
        .and_then(|q| q.0.p);
    state.auth().caller(req.headers(), p.as_deref())?;
    Ok(next.run(req).await)
}

/// Every error is answered in JSON, as the docs say, and names tables relative to the
/// caller's own folder: axum's own refusals (a query string that does not parse, a method a
/// route lacks, a body over the limit) are text, and messages from storage carry the server's
/// paths, which are no business of a client's.
async fn json_errors(r: Response, limit: u64, redact: &Redact) -> Response {
    let status = r.status();
    if !status.is_client_error() && !status.is_server_error() {
        return r;
    }
    let json = r
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let (mut parts, body) = r.into_parts();
    // Error bodies are small: whatever is larger is cut, not held.
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    if json {
        parts.headers.remove(axum::http::header::CONTENT_LENGTH);
        return Response::from_parts(parts, redact.apply(&text).into_owned().into());
    }
    let e = match status {
        StatusCode::PAYLOAD_TOO_LARGE => Error::BodyTooLarge { limit },
        _ => Error::Refused {
            status,
            reason: match text.trim() {
                "" => status.canonical_reason().unwrap_or("refused").to_string(),
                t => t.to_string(),
            },
        },
    };
    let mut out = e.into_response();
    for (k, v) in &parts.headers {
        // `Allow` (405) and the like stay; the body's own headers are the new body's.
        if k != axum::http::header::CONTENT_TYPE && k != axum::http::header::CONTENT_LENGTH {
            out.headers_mut().insert(k.clone(), v.clone());
        }
    }
    out
}

/// A request id and a span for every request; counted by route and status.
async fn observe(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %req.method(),
        route = %route,
        tenant = tracing::field::Empty,
    );
    let started = std::time::Instant::now();
    let mut res = next.run(req).instrument(span.clone()).await;
    let status = res.status().as_u16();
    // Until the head is sent: a streamed body (a query's result) goes on after this.
    let ms = started.elapsed().as_secs_f64() * 1e3;
    span.in_scope(|| tracing::debug!(status, ms, "answered"));
    state
        .metrics
        .requests
        .get_or_create(&RouteLabels { route, status })
        .inc();
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert("x-request-id", v);
    }
    res
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    state
        .metrics
        .query_read_bytes
        .inc_by(state.queries.read_bytes_since_last());
    state.metrics.response()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    #[serde(default)]
    partition_by: String,
    #[serde(default)]
    sort_by: Vec<String>,
    /// Declared columns, as `neve create --schema` takes them.
    #[serde(default)]
    schema: Option<String>,
    #[serde(default)]
    strict_schema: bool,
    /// Table settings by name, as `neve create --set` takes them (e.g. `merge_min_files`).
    #[serde(default)]
    settings: std::collections::BTreeMap<String, String>,
    /// Merge semantics, as `neve create --merge` takes them.
    #[serde(default)]
    merge: Option<String>,
}

async fn create_table(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response> {
    let caller = state.auth().caller(&headers, None)?;
    caller.require(Role::Admin, "create tables")?;
    let address = state.address(&caller, &name)?;
    let spec: CreateBody = if body.iter().all(u8::is_ascii_whitespace) {
        CreateBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| Error::BadRequest {
            reason: format!("table definition: {e}"),
        })?
    };
    let mut opts = CreateOptions {
        partition_by: neve_core::partition::parse_spec(&spec.partition_by)?,
        sort_by: spec.sort_by,
        merge: spec.merge.as_deref().map(str::parse).transpose()?,
        ..Default::default()
    };
    if let Some(s) = &spec.schema {
        opts.schema = neve_core::schema::parse_schema(s)?;
    }
    opts.settings.strict_schema = spec.strict_schema;
    for (k, v) in &spec.settings {
        opts.settings.set(k, v)?;
    }
    // SQL names ignore case: a second table equal to one but for case could not be told
    // apart by the caller's queries.
    let (_, folders) = state.tenant_folders(&caller).await?;
    if let Some(other) = folders
        .iter()
        .filter_map(|p| p.filename())
        .find(|n| *n != name && n.eq_ignore_ascii_case(&name))
    {
        return Err(Error::Table(neve_core::Error::TableExists {
            location: format!(
                "{other} (a table whose name differs from '{name}' only in case, which SQL would not tell apart)"
            ),
        }));
    }
    let table = state.table(&address).await?;
    let snapshot = table.create(opts).await?;
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({"table": name, "version": snapshot.version})),
    )
        .into_response())
}

async fn list_tables(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response> {
    let caller = state.auth().caller(&headers, None)?;
    caller.require(Role::Read, "list tables")?;
    let root = state.tenant_root(&caller);
    let mut engine = neve_core::QueryEngine::new();
    let names = engine.register_warehouse(&root, None).await?;
    Ok(Json(serde_json::json!({ "tables": names })).into_response())
}

async fn table_info(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response> {
    let address = state.authorize(&headers, Role::Read, "read tables", &name)?;
    let table = state.table(&address).await?;
    let snap = match table.snapshot().await {
        Ok(s) => s,
        Err(e) => return Err(state.gone(e, &address, &name).await),
    };
    Ok(Json(serde_json::json!({
        "table": name,
        "version": snap.version,
        "files": snap.files.len(),
        "rows": snap.rows(),
        "bytes": snap.bytes(),
        "schema": snap.metadata.schema.to_string(),
    }))
    .into_response())
}

fn not_found(e: neve_core::Error, name: &str) -> Error {
    match e {
        neve_core::Error::TableNotFound { .. } => Error::TableNotFound {
            table: name.to_string(),
        },
        e => Error::Table(e),
    }
}

async fn insert(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response> {
    let address = state.authorize(&headers, Role::Write, "insert", &name)?;
    let key = idempotency_key(&headers)?;
    let format = body::format(&headers)?;
    let table = state.table(&address).await?;
    let meta = match table.metadata().await {
        Ok(m) => m,
        Err(e) => return Err(state.gone(e, &address, &name).await),
    };
    let (decoded, mut permit) = read_body(&state, &headers, body)?;
    // The body as decoded: a retry may differ in how it was sent (compressed or not, a
    // Content-Type given or detected), never in its bytes.
    let key = key.map(|k| Idempotency::new(k, &[&decoded]));
    let t = table.clone();
    let input_name = format!("request body of table '{name}'");
    let prepared = tokio::task::spawn_blocking(move || {
        let opts = ReadOptions {
            format,
            ..Default::default()
        };
        let input = match open_bytes(&input_name, decoded, &opts, &meta.schema) {
            Ok(input) => input,
            // The CLI's advice (`--format`) is no use to an HTTP client.
            Err(neve_core::Error::UnknownFormat { reason, .. }) => {
                return Err(Error::BadRequest {
                    reason: format!("the body's format cannot be told from its content ({reason}): send a Content-Type (application/x-ndjson, application/json, text/csv, application/vnd.apache.arrow.stream, application/vnd.apache.parquet)"),
                })
            }
            Err(e) => return Err(e.into()),
        };
        t.prepare(&meta, input).map_err(Error::from)
    })
    .await
    .map_err(task_failed)??;
    if prepared.rows == 0 {
        return Ok(Json(serde_json::json!({"version": null, "rows": 0})).into_response());
    }
    state.ingest.top_up(&mut permit, prepared.bytes)?;
    state.metrics.rows_in.inc_by(prepared.rows);
    let ack = state
        .ingest
        .submit(&address, &table, prepared, key, permit)
        .await?;
    Ok(Json(ack).into_response())
}

/// The body decompressed, with memory reserved for it (before decompressing: its size as
/// sent; after: as decompressed).
fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<(Bytes, tokio::sync::OwnedSemaphorePermit)> {
    state.metrics.bytes_in.inc_by(body.len() as u64);
    let mut permit = state.ingest.reserve(body.len() as u64)?;
    let decoded = body::decode(headers, body, state.config.ingest.max_body_bytes)?;
    state.ingest.top_up(&mut permit, decoded.len() as u64)?;
    Ok((decoded, permit))
}

fn task_failed(e: tokio::task::JoinError) -> Error {
    Error::Table(neve_core::Error::TaskFailed(e.to_string()))
}

/// `Idempotency-Key`: printable ASCII, at most 256 characters, sent once (of two, which one
/// a proxy on the way keeps is anyone's guess, and the other request would be lost as a
/// retry of it).
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>> {
    let mut all = headers.get_all("idempotency-key").iter();
    let Some(v) = all.next() else {
        return Ok(None);
    };
    if all.next().is_some() {
        return Err(Error::BadRequest {
            reason: "Idempotency-Key is sent more than once: send one key per request".into(),
        });
    }
    let k = v.to_str().unwrap_or("");
    if k.is_empty() || k.len() > 256 || !k.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(Error::BadRequest {
            reason: "Idempotency-Key must be 1 to 256 printable ASCII characters".into(),
        });
    }
    Ok(Some(k.to_string()))
}

/// `/api/v2/write?bucket=NS&precision=ns|us|ms|s` (InfluxDB 2 clients, Telegraf, Vector).
#[derive(Debug, Deserialize)]
struct WriteV2 {
    bucket: String,
    #[serde(default)]
    precision: Option<String>,
}

/// `/write?db=NS&precision=n|u|ms|s|m|h&p=TOKEN` (InfluxDB 1 clients, tsbs_load_influx).
#[derive(Debug, Deserialize)]
struct WriteV1 {
    db: String,
    #[serde(default)]
    precision: Option<String>,
    #[serde(default)]
    p: Option<String>,
}

async fn write_v2(
    State(state): State<Arc<AppState>>,
    Query(q): Query<WriteV2>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response> {
    write_lines(state, headers, None, q.bucket, q.precision, body).await
}

async fn write_v1(
    State(state): State<Arc<AppState>>,
    Query(q): Query<WriteV1>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response> {
    write_lines(state, headers, q.p, q.db, q.precision, body).await
}

/// Line protocol: each measurement is a table of the namespace (a folder of the tenant's
/// tables), created on first write, partitioned by `day(time)` and sorted by its tags then
/// `time`. Answered 204 once every measurement's rows are committed.
async fn write_lines(
    state: Arc<AppState>,
    headers: HeaderMap,
    token: Option<String>,
    namespace: String,
    precision: Option<String>,
    body: Bytes,
) -> Result<Response> {
    let caller = state.auth().caller(&headers, token.as_deref())?;
    caller.require(Role::Write, "write")?;
    crate::check_namespace(&namespace)?;
    let p = precision.unwrap_or_else(|| "ns".into());
    let (precision, multiplier) =
        lineproto::Precision::parse(&p).ok_or_else(|| Error::BadRequest {
            reason: format!("precision '{p}': use ns, us, ms or s (or n, u, m, h)"),
        })?;
    let key = idempotency_key(&headers)?;
    let (decoded, mut permit) = read_body(&state, &headers, body)?;
    let key = key.map(|k| {
        let meaning = format!("line protocol {precision:?} {multiplier}");
        Idempotency::new(k, &[meaning.as_bytes(), &decoded])
    });
    // The receive time, in whole microseconds: neve keeps timestamps to the microsecond, and
    // a value the client sent with nanoseconds beyond that is refused, never rounded.
    let now_ns = chrono::Utc::now().timestamp_micros() * 1_000;
    let measurements = tokio::task::spawn_blocking(move || {
        let text = std::str::from_utf8(&decoded).map_err(|e| Error::BadRequest {
            reason: format!("line protocol must be UTF-8: {e}"),
        })?;
        lineproto::parse(text, precision, multiplier, now_ns).map_err(|e| {
            Error::Table(neve_core::Error::InvalidInput {
                input: "line protocol".into(),
                line: Some(e.line),
                column: None,
                message: e.message,
            })
        })
    })
    .await
    .map_err(task_failed)??;
    let root = format!("{}/{namespace}", state.tenant_root(&caller));
    // Every name checked before any table is made.
    if let Some(m) = measurements.iter().find(|m| !crate::valid_name(&m.name)) {
        return Err(Error::BadRequest {
            reason: format!(
                "measurement '{}' cannot name a table: use letters, digits, '_' and '-', not starting with '_', at most 128",
                m.name
            ),
        });
    }
    // Every measurement is checked against its table, or the table it would create, before
    // any table is made: a refused request leaves nothing behind.
    let mut prepared = Vec::with_capacity(measurements.len());
    for m in measurements {
        let address = format!("{root}/{}", m.name);
        let table = state.table(&address).await?;
        let (meta, create) = match table.metadata().await {
            Ok(meta) => (meta, None),
            Err(neve_core::Error::TableNotFound { .. }) => {
                let mut sort_by = m.tags.clone();
                sort_by.push("time".into());
                let opts = CreateOptions {
                    partition_by: neve_core::partition::parse_spec("day(time)")?,
                    sort_by,
                    ..Default::default()
                };
                (opts.clone().into_metadata(String::new(), 0), Some(opts))
            }
            Err(e) => return Err(e.into()),
        };
        let p = prepare_measurement(&table, meta.clone(), &m).await?;
        prepared.push((address, table, p, m, meta, create));
    }
    let mut ready = Vec::with_capacity(prepared.len());
    for (address, table, mut p, m, meta, create) in prepared {
        if let Some(opts) = create {
            match table.create(opts).await {
                Ok(_) | Err(neve_core::Error::TableExists { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            // Another request created it first, otherwise: check against what it made.
            let actual = table.metadata().await?;
            let same = neve_core::log::Metadata {
                table_id: actual.table_id.clone(),
                created_time: actual.created_time,
                ..meta
            } == actual;
            if !same {
                p = prepare_measurement(&table, actual, &m).await?;
            }
        }
        ready.push((address, table, p, m.name));
    }
    let prepared = ready;
    let total: u64 = prepared.iter().map(|(_, _, p, _)| p.bytes).sum();
    state.ingest.top_up(&mut permit, total)?;
    let mut permits = Vec::with_capacity(prepared.len());
    for _ in 1..prepared.len() {
        permits.push(permit.split(0).expect("a zero split"));
    }
    permits.push(permit);
    let submits = prepared
        .into_iter()
        .zip(permits)
        .map(|((address, table, p, name), permit)| {
            let state = state.clone();
            let key = key.as_ref().map(|k| Idempotency {
                key: format!("{}:{name}", k.key),
                digest: k.digest.clone(),
            });
            async move {
                state.metrics.rows_in.inc_by(p.rows);
                state
                    .ingest
                    .submit(&address, &table, p, key, permit)
                    .await
                    .map_err(|e| Error::InMeasurement {
                        measurement: name,
                        source: Box::new(e),
                    })
            }
        });
    for r in futures::future::join_all(submits).await {
        r?;
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A measurement's rows checked and conformed against `meta`; an error names the
/// measurement and the request's line.
async fn prepare_measurement(
    table: &Arc<neve_core::Table>,
    meta: neve_core::log::Metadata,
    m: &lineproto::Measurement,
) -> Result<neve_core::table::PreparedInput> {
    let t = table.clone();
    let input = neve_core::write::input::OpenedInput {
        name: "line protocol".into(),
        format: neve_core::write::input::InputFormat::Arrow,
        schema: m.batch.schema(),
        batches: Box::new(std::iter::once(Ok(m.batch.clone()))),
    };
    tokio::task::spawn_blocking(move || t.prepare(&meta, input))
        .await
        .map_err(task_failed)?
        .map_err(|e| Error::InMeasurement {
            measurement: m.name.clone(),
            source: Box::new(Error::Table(lineproto::at_line(e, &m.lines))),
        })
}

/// `/query?q=...`: the InfluxQL that write clients send before writing (TSBS's loader lists
/// databases, Telegraf creates its database). `SHOW DATABASES` lists the tenant's namespaces;
/// `CREATE DATABASE` succeeds without doing anything (a namespace appears with its first
/// write). Anything else is refused: neve answers queries in SQL.
#[derive(Debug, Deserialize)]
struct InfluxQuery {
    q: String,
    #[serde(default)]
    p: Option<String>,
}

async fn influx_query(
    State(state): State<Arc<AppState>>,
    Query(q): Query<InfluxQuery>,
    headers: HeaderMap,
) -> Result<Response> {
    let caller = state.auth().caller(&headers, q.p.as_deref())?;
    let words: Vec<String> =
        q.q.split_whitespace()
            .map(|w| w.to_ascii_uppercase())
            .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["SHOW", "DATABASES", ..] => {
            caller.require(Role::Read, "list databases")?;
            let (root, folders) = state.tenant_folders(&caller).await?;
            let mut names = Vec::new();
            for p in folders {
                let Some(name) = p.filename() else { continue };
                // A namespace is a folder of tables, not a table itself.
                let inner = root
                    .store
                    .list_with_delimiter(Some(&p))
                    .await
                    .map_err(|e| Error::Table(e.into()))?;
                let is_table = inner
                    .common_prefixes
                    .iter()
                    .any(|c| c.filename() == Some("_log"));
                if !is_table && crate::check_namespace(name).is_ok() {
                    names.push(vec![name.to_string()]);
                }
            }
            names.sort();
            Ok(Json(
                serde_json::json!({"results": [{"statement_id": 0, "series": [
                    {"name": "databases", "columns": ["name"], "values": names}
                ]}]}),
            )
            .into_response())
        }
        ["CREATE", "DATABASE", name, ..] => {
            caller.require(Role::Write, "create databases")?;
            let name =
                q.q.split_whitespace()
                    .nth(2)
                    .unwrap_or(name)
                    .trim_matches('"');
            crate::check_namespace(name)?;
            Ok(Json(serde_json::json!({"results": [{"statement_id": 0}]})).into_response())
        }
        _ => Err(Error::BadRequest {
            reason:
                "only SHOW DATABASES and CREATE DATABASE are understood here; query tables with SQL"
                    .into(),
        }),
    }
}
