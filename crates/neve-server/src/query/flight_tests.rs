//! Flight SQL's calls that load tables without running a query.

use super::*;
use crate::auth::Auth;
use crate::config::ServerConfig;
use crate::metrics::Metrics;

/// Planning (GetFlightInfo, CreatePreparedStatement) and listing tables (GetTables,
/// GetDbSchemas) load every table's snapshot: each takes a query's slot, and is refused with
/// RESOURCE_EXHAUSTED when all are taken, as a query is.
#[tokio::test]
async fn planning_and_listing_take_a_query_slot() {
    let dir = std::env::temp_dir().join(format!("neve-flight-slots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut config = ServerConfig {
        warehouse: dir.display().to_string(),
        ..Default::default()
    };
    config.query.max_concurrent = 1;
    let auth = Auth::new(&config).unwrap();
    let state = Arc::new(AppState::new(config, auth, Arc::new(Metrics::default())));
    let server = FlightSqlServer::new(state.clone());
    let caller = state
        .auth()
        .caller(&axum::http::HeaderMap::new(), None)
        .unwrap();
    let held = state.queries.admit().unwrap();
    let e = server.plan(&caller, "SELECT 1").await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
    let e = server.tables(&caller).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
    drop(held);
    server.plan(&caller, "SELECT 1").await.unwrap();
    assert!(server.tables(&caller).await.unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
