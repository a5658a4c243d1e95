//! Flight SQL bulk ingest (`CommandStatementIngest`, ADBC's `adbc_ingest`): a stream of Arrow
//! batches into a table, through the same checks, memory budget and group commit as
//! `POST /v1/tables/NAME/insert`.

use std::sync::Arc;

use arrow_flight::error::FlightError;
use arrow_flight::sql::{CommandStatementIngest, TableExistsOption, TableNotExistOption};
use arrow_flight::FlightData;
use axum::http::HeaderMap;
use futures::{Stream, StreamExt};
use neve_core::write::input::{InputFormat, OpenedInput};
use neve_core::CreateOptions;

use crate::auth::Role;
use crate::error::{Error, Result};
use crate::http::AppState;
use crate::ingest::Ack;

/// What the command asks when the table is missing and when it exists (an unspecified answer
/// fails when missing and appends when it exists: a data lake's tables take inserts).
fn choices(cmd: &CommandStatementIngest) -> (TableNotExistOption, TableExistsOption) {
    let o = cmd.table_definition_options.unwrap_or_default();
    let missing = TableNotExistOption::try_from(o.if_not_exist).unwrap_or_default();
    let exists = TableExistsOption::try_from(o.if_exists).unwrap_or_default();
    (missing, exists)
}

/// The namespace (the schemas `GetDbSchemas` lists beside `public`, e.g. a line-protocol
/// database) and the table the command names.
fn table_name(cmd: &CommandStatementIngest) -> Result<(Option<&str>, &str)> {
    let unsupported = |what: &str| Error::BadRequest {
        reason: format!("bulk ingest: {what} is not supported"),
    };
    if cmd.temporary {
        return Err(unsupported("a temporary table"));
    }
    if cmd.transaction_id.is_some() {
        return Err(unsupported("a transaction (each ingest is its own commit)"));
    }
    let catalog = crate::query::flight::CATALOG;
    if let Some(c) = cmd
        .catalog
        .as_deref()
        .filter(|c| !c.is_empty() && *c != catalog)
    {
        return Err(Error::BadRequest {
            reason: format!("bulk ingest: no catalog '{c}' (the one catalog is '{catalog}')"),
        });
    }
    let ns = cmd
        .schema
        .as_deref()
        .filter(|s| !s.is_empty() && *s != "public");
    if let Some(ns) = ns {
        crate::check_namespace(ns)?;
    }
    if !crate::valid_name(&cmd.table) {
        return Err(Error::InvalidTableName {
            name: cmd.table.clone(),
        });
    }
    Ok((ns, &cmd.table))
}

/// Ingest `data` into the table `cmd` names for the caller of `headers`: the rows committed.
pub(crate) async fn ingest(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    cmd: CommandStatementIngest,
    data: impl Stream<Item = Result<FlightData, tonic::Status>> + Send + Unpin + 'static,
) -> Result<Ack> {
    let caller = state.auth().caller(headers, None)?;
    caller.require(Role::Write, "insert")?;
    let (ns, table) = table_name(&cmd)?;
    let (name, address) = match ns {
        Some(ns) => (
            format!("{ns}/{table}"),
            format!("{}/{ns}/{table}", state.tenant_root(&caller)),
        ),
        None => (table.to_string(), state.address(&caller, table)?),
    };
    let (missing, exists) = choices(&cmd);
    if exists == TableExistsOption::Replace {
        return Err(Error::BadRequest {
            reason: "bulk ingest: replacing a table is not supported (neve keeps its history); append, or create a new table".into(),
        });
    }
    let table = state.table(&address).await?;
    // A missing table is created once the stream has been read whole: a refused stream
    // (too large, too slow, undecodable, cancelled) leaves no empty table behind.
    let meta = match table.metadata().await {
        Ok(_) if exists == TableExistsOption::Fail => {
            return Err(Error::Table(neve_core::Error::TableExists {
                location: format!("{name} (the ingest asked to fail when it exists: mode 'create'; use 'append' or 'create_append')"),
            }));
        }
        Ok(m) => Some(m),
        Err(neve_core::Error::TableNotFound { .. }) if missing == TableNotExistOption::Create => {
            caller.require(Role::Admin, "create tables")?;
            None
        }
        Err(e) => return Err(state.gone(e, &address, &name).await),
    };

    // Memory is reserved as the messages arrive, and the stream is refused past the body
    // limit, as an HTTP body is.
    let limit = state.config.ingest.max_body_bytes;
    let held = Arc::new(std::sync::Mutex::new((0u64, state.ingest.reserve(0)?)));
    let counting = (held.clone(), state.clone());
    let counted = silent_after(data, state.config.body_read_timeout).map(move |m| {
        let m = m?;
        let (held, state) = &counting;
        let mut held = held.lock().expect("not poisoned");
        held.0 += (m.data_header.len() + m.data_body.len()) as u64;
        if held.0 > limit {
            return Err(FlightError::ExternalError(Box::new(Error::BodyTooLarge {
                limit,
            })));
        }
        let (received, permit) = &mut *held;
        state
            .ingest
            .top_up(permit, *received)
            .map_err(|e| FlightError::ExternalError(Box::new(e)))?;
        Ok(m)
    });
    let mut stream = arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(counted);
    let mut batches = Vec::new();
    while let Some(b) = stream.next().await {
        batches.push(b.map_err(|e| flight_error(e, &name))?);
    }
    let Some(schema) = stream.schema().cloned() else {
        return Err(Error::BadRequest {
            reason: "bulk ingest: the stream holds no schema".into(),
        });
    };
    drop(stream);
    let (received, mut permit) = Arc::try_unwrap(held)
        .expect("the stream that counted is dropped")
        .into_inner()
        .expect("not poisoned");
    state.metrics.bytes_in.inc_by(received);
    let meta = match meta {
        Some(m) => m,
        None => {
            match table.create(CreateOptions::default()).await {
                // Another ingest created it meanwhile: append to it, if asked to.
                Ok(_) => {}
                Err(neve_core::Error::TableExists { .. }) if exists != TableExistsOption::Fail => {}
                Err(e) => return Err(e.into()),
            }
            table.metadata().await?
        }
    };
    let t = table.clone();
    let input = OpenedInput {
        name: format!("Flight SQL ingest into table '{name}'"),
        format: InputFormat::Arrow,
        schema,
        batches: Box::new(batches.into_iter().map(Ok)),
    };
    let prepared = tokio::task::spawn_blocking(move || t.prepare(&meta, input))
        .await
        .map_err(|e| Error::Table(neve_core::Error::TaskFailed(e.to_string())))??;
    if prepared.rows == 0 {
        return Ok(Ack {
            version: 0,
            rows: 0,
            commit_id: String::new(),
            duplicate: false,
        });
    }
    state.ingest.top_up(&mut permit, prepared.bytes)?;
    state.metrics.rows_in.inc_by(prepared.rows);
    state
        .ingest
        .submit(&address, &table, prepared, None, permit)
        .await
}

/// `data`, ended with an error once no message came for `idle` (`body_read_timeout`, as an
/// HTTP body has): a client that stops sending holds neither its memory nor the table's queue.
pub(crate) fn silent_after<S>(
    data: S,
    idle: std::time::Duration,
) -> impl Stream<Item = Result<FlightData, FlightError>> + Send + 'static
where
    S: Stream<Item = Result<FlightData, tonic::Status>> + Send + Unpin + 'static,
{
    futures::stream::unfold(Some(data), move |data| async move {
        let mut data = data?;
        match tokio::time::timeout(idle, data.next()).await {
            Ok(Some(m)) => Some((m.map_err(FlightError::from), Some(data))),
            Ok(None) => None,
            Err(_) => {
                let e = Error::BadRequest {
                    reason: format!(
                        "the ingest's stream stopped arriving: nothing for {}",
                        humantime::format_duration(idle)
                    ),
                };
                Some((Err(FlightError::ExternalError(Box::new(e))), None))
            }
        }
    })
}

/// A failed stream: this server's own refusal (too large, no memory), or rows that do not
/// decode.
fn flight_error(e: FlightError, name: &str) -> Error {
    match e {
        FlightError::ExternalError(inner) => match inner.downcast::<Error>() {
            Ok(e) => *e,
            Err(other) => Error::BadRequest {
                reason: format!("bulk ingest into '{name}': {other}"),
            },
        },
        other => Error::BadRequest {
            reason: format!("bulk ingest into '{name}': the Arrow stream does not decode: {other}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A stream that sends one message and then nothing ends with an error after `idle`,
    /// naming the wait; one that keeps sending is passed through whole.
    #[tokio::test]
    async fn a_silent_stream_ends_after_the_idle_time() {
        let one =
            futures::stream::iter([Ok(FlightData::default())]).chain(futures::stream::pending());
        let mut s = Box::pin(silent_after(Box::pin(one), Duration::from_millis(300)));
        assert!(s.next().await.unwrap().is_ok());
        let started = tokio::time::Instant::now();
        let e = s.next().await.unwrap().unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(e.to_string().contains("nothing for 300ms"), "{e}");
        assert!(s.next().await.is_none());

        let many = futures::stream::iter((0..5).map(|_| Ok(FlightData::default())));
        let s = silent_after(many, Duration::from_millis(300));
        assert_eq!(s.collect::<Vec<_>>().await.len(), 5);
    }
}
