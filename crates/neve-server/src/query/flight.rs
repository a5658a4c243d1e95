//! Arrow Flight SQL on `--flight-listen`: the same queries, tables, tokens and limits as
//! `POST /v1/sql`, for ADBC, JDBC and every Flight SQL client.
//!
//! - Auth: `authorization: Bearer <token>` on every call, or a handshake with HTTP basic auth
//!   whose password is the token (any user name), answered with that bearer token.
//! - A statement's FlightInfo is planned at the tables' latest versions; its ticket names them,
//!   so `DoGet` reads the versions the schema was planned at.
//! - Prepared statements are stateless: the handle carries the SQL and the bound parameters,
//!   so any instance of the server can run it and closing it frees nothing.
//! - Bulk ingest (`DoPut` of `CommandStatementIngest`) is an insert: `crate::ingest::flight`.

use std::pin::Pin;
use std::sync::{Arc, LazyLock};

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use arrow::ipc::writer::IpcWriteOptions;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::metadata::{
    SqlInfoData, SqlInfoDataBuilder, XdbcTypeInfo, XdbcTypeInfoData, XdbcTypeInfoDataBuilder,
};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandGetXdbcTypeInfo,
    CommandPreparedStatementQuery, CommandStatementIngest, CommandStatementQuery,
    DoPutPreparedStatementResult, Nullable, ProstMessageExt, Searchable, SqlInfo,
    TicketStatementQuery, XdbcDataType,
};
use arrow_flight::{
    FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, IpcMessage,
    SchemaAsIpc, Ticket,
};
use base64::Engine as _;
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message as _;
use serde::{Deserialize, Serialize};
use tonic::{Request, Response, Status, Streaming};

use crate::auth::{Caller, Role};
use crate::error::Error;
use crate::http::AppState;
use crate::query::{At, Pinned, Registered, Running};

/// The catalog every table is in (DataFusion's default).
pub(crate) const CATALOG: &str = "datafusion";

type DoGetStream = <FlightSqlServer as FlightService>::DoGetStream;

/// The Flight SQL service of one server.
pub struct FlightSqlServer {
    state: Arc<AppState>,
}

impl FlightSqlServer {
    pub fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }

    /// The caller a request's bearer token names, if it may read.
    fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        let headers = request.metadata().clone().into_headers();
        let caller = self.state.auth().caller(&headers, None)?;
        caller.require(Role::Read, "query tables")?;
        Ok(caller)
    }

    /// The FlightInfo of a metadata command, for a caller who may read.
    fn metadata_info(
        &self,
        schema: &Schema,
        ticket: Vec<u8>,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.caller(&request)?;
        info(schema, ticket, request.into_inner())
    }

    /// Plan `sql` at the latest versions: its result schema, parameter schema and the pins.
    async fn plan(
        &self,
        caller: &Caller,
        sql: &str,
    ) -> Result<(Arc<Schema>, Arc<Schema>, Vec<Pinned>), Status> {
        // Planning loads the tables' snapshots: it takes a query's slot and time limit.
        let _slot = self.state.queries.admit()?;
        let timeout = self.state.queries.config.timeout;
        let planned = tokio::time::timeout(timeout, async {
            let Registered {
                engine,
                versions: pins,
                ..
            } = self.state.query_engine(caller, sql, &At::Latest).await?;
            let (result, params) = engine.describe(sql).await?;
            Ok::<_, Error>((result, params, pins))
        })
        .await
        .map_err(|_| Error::QueryTimeout { after: timeout })?;
        planned.map_err(|e| {
            self.state.metrics.query_outcome(&e);
            e.into()
        })
    }

    /// Run `sql` and stream its batches as Flight data.
    async fn run(
        &self,
        caller: &Caller,
        sql: &str,
        at: At,
        params: Option<RecordBatch>,
    ) -> Result<Response<DoGetStream>, Status> {
        let started = self
            .state
            .start_query(caller, sql, at, params, None)
            .await?;
        let schema = started.running.schema();
        let batches = futures::stream::unfold(started.running, |mut r: Running| async move {
            r.next()
                .await
                .map(|b| (b.map_err(|e| FlightError::Tonic(Box::new(e.into()))), r))
        });
        let stream = FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(batches)
            .map_err(Status::from);
        Ok(Response::new(Box::pin(stream)))
    }
}

/// What a ticket of a statement carries: the SQL and the versions it was planned at.
#[derive(Serialize, Deserialize)]
struct StatementHandle {
    sql: String,
    pins: Vec<Pinned>,
}

/// A prepared statement: the SQL and, once bound, its parameters (one row, Arrow IPC).
#[derive(Serialize, Deserialize)]
struct PreparedHandle {
    sql: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    params: Option<String>,
}

fn decode_json<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> Result<T, Status> {
    serde_json::from_slice(bytes)
        .map_err(|e| Status::invalid_argument(format!("not a {what} of this server: {e}")))
}

fn ipc_schema(schema: &Schema) -> Result<bytes::Bytes, Status> {
    let IpcMessage(bytes) = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(|e: arrow::error::ArrowError| Status::internal(e.to_string()))?;
    Ok(bytes)
}

fn batch_to_ipc(batch: &RecordBatch) -> Result<String, Status> {
    let mut out = Vec::new();
    let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut out, &batch.schema())
        .map_err(|e| Status::internal(e.to_string()))?;
    w.write(batch)
        .and_then(|_| w.finish())
        .map_err(|e| Status::internal(e.to_string()))?;
    drop(w);
    Ok(base64::engine::general_purpose::STANDARD.encode(out))
}

fn ipc_to_batch(text: &str) -> Result<RecordBatch, Status> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| Status::invalid_argument(format!("prepared statement parameters: {e}")))?;
    let mut r = arrow::ipc::reader::StreamReader::try_new(&bytes[..], None)
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    r.next()
        .ok_or_else(|| Status::invalid_argument("prepared statement parameters: no batch"))?
        .map_err(|e| Status::invalid_argument(e.to_string()))
}

/// A FlightInfo whose one endpoint's ticket is `ticket` (an `Any`-wrapped command).
fn info(
    schema: &Schema,
    ticket: Vec<u8>,
    descriptor: FlightDescriptor,
) -> Result<Response<FlightInfo>, Status> {
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| Status::internal(e.to_string()))?
        .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(ticket)))
        .with_descriptor(descriptor);
    Ok(Response::new(info))
}

/// A metadata answer: one batch a builder made.
fn built(
    schema: arrow::datatypes::SchemaRef,
    batch: Result<RecordBatch, FlightError>,
) -> Result<Response<DoGetStream>, Status> {
    let batch = batch.map_err(Status::from)?;
    let stream = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(futures::stream::once(async move { Ok(batch) }))
        .map_err(Status::from);
    Ok(Response::new(Box::pin(stream)))
}

static SQL_INFO: LazyLock<SqlInfoData> = LazyLock::new(|| {
    let mut b = SqlInfoDataBuilder::new();
    b.append(SqlInfo::FlightSqlServerName, "neve");
    b.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    b.append(SqlInfo::FlightSqlServerArrowVersion, "1.3");
    b.append(SqlInfo::FlightSqlServerReadOnly, true);
    b.append(SqlInfo::FlightSqlServerSql, true);
    b.append(SqlInfo::FlightSqlServerSubstrait, false);
    b.append(SqlInfo::FlightSqlServerTransaction, 0i32);
    b.append(SqlInfo::FlightSqlServerCancel, false);
    b.append(SqlInfo::SqlDdlCatalog, false);
    b.append(SqlInfo::SqlDdlSchema, false);
    b.append(SqlInfo::SqlDdlTable, false);
    b.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
    b.build().expect("valid SqlInfo")
});

/// The SQL types neve's tables have, as ODBC/JDBC know them.
static XDBC_INFO: LazyLock<XdbcTypeInfoData> = LazyLock::new(|| {
    let mut b = XdbcTypeInfoDataBuilder::new();
    let types = [
        ("BOOLEAN", XdbcDataType::XdbcBit, None, None),
        ("SMALLINT", XdbcDataType::XdbcSmallint, Some(16), Some(2)),
        ("INTEGER", XdbcDataType::XdbcInteger, Some(32), Some(2)),
        ("BIGINT", XdbcDataType::XdbcBigint, Some(64), Some(2)),
        ("REAL", XdbcDataType::XdbcReal, Some(24), Some(2)),
        ("DOUBLE", XdbcDataType::XdbcDouble, Some(53), Some(2)),
        ("DECIMAL", XdbcDataType::XdbcDecimal, Some(38), Some(10)),
        ("VARCHAR", XdbcDataType::XdbcVarchar, None, None),
        ("VARBINARY", XdbcDataType::XdbcVarbinary, None, None),
        ("DATE", XdbcDataType::XdbcDate, None, None),
        ("TIMESTAMP", XdbcDataType::XdbcTimestamp, None, None),
    ];
    for (name, t, size, radix) in types {
        let quoted = matches!(
            t,
            XdbcDataType::XdbcVarchar | XdbcDataType::XdbcDate | XdbcDataType::XdbcTimestamp
        );
        b.append(XdbcTypeInfo {
            type_name: name.into(),
            data_type: t,
            column_size: size,
            literal_prefix: quoted.then(|| "'".into()),
            literal_suffix: quoted.then(|| "'".into()),
            create_params: None,
            nullable: Nullable::NullabilityNullable,
            case_sensitive: t == XdbcDataType::XdbcVarchar,
            searchable: Searchable::Full,
            unsigned_attribute: size.map(|_| false),
            fixed_prec_scale: false,
            auto_increment: size.map(|_| false),
            local_type_name: Some(name.into()),
            minimum_scale: None,
            maximum_scale: None,
            sql_data_type: t,
            datetime_subcode: None,
            num_prec_radix: radix,
            interval_precision: None,
        });
    }
    b.build().expect("valid XDBC type info")
});

/// The most bytes of parameters a prepared statement's DoPut may send.
const MAX_PARAMETER_BYTES: u64 = 16 << 20;

/// A parameter stream that failed: this server's refusal (too large, silent), the client's
/// own error, or messages that do not decode (the client's fault, never an internal error).
fn parameter_error(e: FlightError) -> Status {
    match e {
        FlightError::ExternalError(inner) => match inner.downcast::<Error>() {
            Ok(e) => Status::from(*e),
            Err(other) => Status::invalid_argument(format!("parameters: {other}")),
        },
        FlightError::Tonic(status) => *status,
        other => Status::invalid_argument(format!("parameters do not decode: {other}")),
    }
}

impl From<Error> for Status {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        if let Error::Table(neve_core::Error::TableExists { .. }) = &e {
            return Status::already_exists(message);
        }
        // Bulk ingest carries no request key, so sending the rows again may add them twice:
        // not UNAVAILABLE, which clients retry.
        if e.code() == crate::error::OUTCOME_UNKNOWN {
            return Status::unknown(format!(
                "{message}; read the table to learn whether the rows landed before sending them again"
            ));
        }
        match e.status().as_u16() {
            400 | 406 | 413 | 415 => Status::invalid_argument(message),
            401 => Status::unauthenticated(message),
            403 => Status::permission_denied(message),
            404 => Status::not_found(message),
            409 => Status::aborted(message),
            429 => Status::resource_exhausted(message),
            503 => Status::unavailable(message),
            504 => Status::deadline_exceeded(message),
            _ => Status::internal(message),
        }
    }
}

#[tonic::async_trait]
impl FlightSqlService for FlightSqlServer {
    type FlightService = FlightSqlServer;

    /// Basic auth whose password is a token: answered with the token as a bearer token.
    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        let header = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let token = if let Some(basic) = header.strip_prefix("Basic ") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(basic.trim())
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| Status::unauthenticated("malformed basic authorization"))?;
            decoded
                .split_once(':')
                .map(|(_, password)| password.to_string())
                .ok_or_else(|| Status::unauthenticated("malformed basic authorization"))?
        } else if let Some(bearer) = header.strip_prefix("Bearer ") {
            bearer.trim().to_string()
        } else {
            return Err(Status::unauthenticated(
                "authenticate with a bearer token, or basic auth whose password is the token",
            ));
        };
        let mut headers = axum::http::HeaderMap::new();
        let bearer = format!("Bearer {token}");
        let value = axum::http::HeaderValue::from_str(&bearer)
            .map_err(|_| Status::unauthenticated("malformed token"))?;
        headers.insert("authorization", value);
        self.state.auth().caller(&headers, None)?;
        let out = futures::stream::once(async move {
            Ok(HandshakeResponse {
                protocol_version: 0,
                payload: token.into_bytes().into(),
            })
        });
        let mut response: Response<Pin<Box<dyn Stream<Item = _> + Send>>> =
            Response::new(Box::pin(out));
        response.metadata_mut().insert(
            "authorization",
            bearer
                .parse()
                .map_err(|_| Status::unauthenticated("malformed token"))?,
        );
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let caller = self.caller(&request)?;
        let (schema, _, pins) = self.plan(&caller, &query.query).await?;
        let handle = serde_json::to_vec(&StatementHandle {
            sql: query.query,
            pins,
        })
        .expect("serializable");
        let ticket = TicketStatementQuery {
            statement_handle: handle.into(),
        };
        info(
            &schema,
            ticket.as_any().encode_to_vec(),
            request.into_inner(),
        )
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let caller = self.caller(&request)?;
        let h: StatementHandle = decode_json(&ticket.statement_handle, "statement ticket")?;
        self.run(&caller, &h.sql, At::Pinned(h.pins), None).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<arrow_flight::Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let caller = self.caller(&request)?;
        let (schema, params, _) = self.plan(&caller, &query.query).await?;
        let handle = serde_json::to_vec(&PreparedHandle {
            sql: query.query,
            params: None,
        })
        .expect("serializable");
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into(),
            dataset_schema: ipc_schema(&schema)?,
            parameter_schema: ipc_schema(&params)?,
        })
    }

    /// Bind parameters: one row, whose columns are `$1`, `$2`...
    /// Bulk ingest (ADBC's `adbc_ingest`): the rows committed, as `POST .../insert` commits
    /// them (`crate::ingest::flight`).
    async fn do_put_statement_ingest(
        &self,
        cmd: CommandStatementIngest,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let headers = request.metadata().clone().into_headers();
        let ack =
            crate::ingest::flight::ingest(&self.state, &headers, cmd, request.into_inner()).await?;
        Ok(ack.rows as i64)
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        self.caller(&request)?;
        let mut h: PreparedHandle =
            decode_json(&query.prepared_statement_handle, "prepared statement")?;
        // Bounded in bytes (empty batches and dictionaries are messages too) and in time, as
        // an ingest's stream is: parameters are one row.
        let mut received = 0u64;
        let data = crate::ingest::flight::silent_after(
            request.into_inner(),
            self.state.config.body_read_timeout,
        )
        .map(move |m| {
            let m = m?;
            received += (m.data_header.len() + m.data_body.len()) as u64;
            if received > MAX_PARAMETER_BYTES {
                return Err(FlightError::ExternalError(Box::new(Error::BodyTooLarge {
                    limit: MAX_PARAMETER_BYTES,
                })));
            }
            Ok(m)
        });
        let mut batches = FlightRecordBatchStream::new_from_flight_data(data);
        // One row is kept at most: refused at the second, not after the whole stream (a
        // client could otherwise make the server hold any amount of parameters).
        let mut rows: Vec<RecordBatch> = Vec::new();
        let mut n = 0usize;
        while let Some(b) = batches.next().await {
            let b = b.map_err(parameter_error)?;
            n += b.num_rows();
            if n > 1 {
                return Err(Status::invalid_argument(format!(
                    "{n} or more rows of parameters: bind one row at a time"
                )));
            }
            if b.num_rows() > 0 {
                rows.push(b);
            }
        }
        h.params = rows.first().map(batch_to_ipc).transpose()?;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(serde_json::to_vec(&h).expect("serializable").into()),
        })
    }

    async fn get_flight_info_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let caller = self.caller(&request)?;
        let h: PreparedHandle = decode_json(&cmd.prepared_statement_handle, "prepared statement")?;
        let (schema, _, _) = self.plan(&caller, &h.sql).await?;
        info(&schema, cmd.as_any().encode_to_vec(), request.into_inner())
    }

    async fn do_get_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let caller = self.caller(&request)?;
        let h: PreparedHandle = decode_json(&cmd.prepared_statement_handle, "prepared statement")?;
        let params = h.params.as_deref().map(ipc_to_batch).transpose()?;
        self.run(&caller, &h.sql, At::Latest, params).await
    }

    async fn do_action_close_prepared_statement(
        &self,
        _query: ActionClosePreparedStatementRequest,
        request: Request<arrow_flight::Action>,
    ) -> Result<(), Status> {
        self.caller(&request)?;
        Ok(())
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        self.metadata_info(&schema, query.as_any().encode_to_vec(), request)
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.caller(&request)?;
        let mut b = query.into_builder();
        b.append(CATALOG);
        built(b.schema(), b.build())
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        self.metadata_info(&schema, query.as_any().encode_to_vec(), request)
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let caller = self.caller(&request)?;
        let tables = self.tables(&caller).await?;
        let mut b = query.into_builder();
        let mut schemas: Vec<&str> = tables.iter().map(|(s, _, _)| s.as_str()).collect();
        schemas.push("public");
        schemas.sort();
        schemas.dedup();
        for s in schemas {
            b.append(CATALOG, s);
        }
        built(b.schema(), b.build())
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        self.metadata_info(&schema, query.as_any().encode_to_vec(), request)
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let caller = self.caller(&request)?;
        let tables = self.tables(&caller).await?;
        let mut b = query.into_builder();
        for (schema, table, arrow_schema) in &tables {
            b.append(CATALOG, schema, table, "TABLE", arrow_schema)
                .map_err(Status::from)?;
        }
        built(b.schema(), b.build())
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        self.metadata_info(&schema, query.as_any().encode_to_vec(), request)
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.caller(&request)?;
        let mut b = query.into_builder();
        b.append("TABLE");
        built(b.schema(), b.build())
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder(&SQL_INFO).schema();
        self.metadata_info(&schema, query.as_any().encode_to_vec(), request)
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.caller(&request)?;
        let b = query.into_builder(&SQL_INFO);
        built(b.schema(), b.build())
    }

    async fn get_flight_info_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder(&XDBC_INFO).schema();
        self.metadata_info(&schema, query.as_any().encode_to_vec(), request)
    }

    async fn do_get_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.caller(&request)?;
        let b = query.into_builder(&XDBC_INFO);
        built(b.schema(), b.build())
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

impl FlightSqlServer {
    /// The caller's tables: (schema, table, Arrow schema of the table's columns).
    async fn tables(&self, caller: &Caller) -> Result<Vec<(String, String, Schema)>, Status> {
        // Listing loads every table's snapshot: a query's slot and time limit, as for SQL.
        let _slot = self.state.queries.admit()?;
        let timeout = self.state.queries.config.timeout;
        let listed = tokio::time::timeout(timeout, async {
            let Registered {
                engine,
                versions: pins,
                ..
            } = self
                .state
                .query_engine(
                    caller,
                    "SELECT * FROM information_schema.tables",
                    &At::Latest,
                )
                .await?;
            let mut out = Vec::new();
            for p in pins {
                let schema = engine
                    .table_schema(p.schema.as_deref(), &p.table)
                    .await
                    .map_err(Error::from)?;
                out.push((
                    p.schema.unwrap_or_else(|| "public".into()),
                    p.table,
                    schema.as_ref().clone(),
                ));
            }
            Ok::<_, Error>(out)
        })
        .await
        .map_err(|_| Error::QueryTimeout { after: timeout })?;
        Ok(listed?)
    }
}

/// A Flight SQL connection as tonic serves it: accepted under the connection cap, past its
/// TLS handshake when there is one (tonic's own TLS would not read a renewed certificate;
/// `neve_proxy::tls` does).
pub(crate) struct FlightConn(pub(crate) neve_proxy::serve::Conn);

impl tonic::transport::server::Connected for FlightConn {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl tokio::io::AsyncRead for FlightConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for FlightConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[path = "flight_tests.rs"]
mod tests;
