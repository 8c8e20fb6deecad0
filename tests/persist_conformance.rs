//! The storage conformance suite on every adapter of the crate: memory,
//! redb (a temporary file per case) and PostgreSQL (a schema per case on
//! the server named by `JIDO_TEST_PG`, see `scripts/pg_server.sh`).
#![cfg(feature = "persist")]

mod common;

use jido::persist::{MemoryStorage, conformance};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_storage_conforms() -> jido::Result<()> {
    conformance::run(|| async { Ok(MemoryStorage::new()) }).await
}

#[cfg(feature = "persist-redb")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redb_storage_conforms() -> jido::Result<()> {
    use jido::persist::redb::RedbStorage;
    let dir =
        tempfile::tempdir().map_err(|e| jido::Error::storage("no temp dir").with_source(e))?;
    let mut n = 0;
    conformance::run(|| {
        n += 1;
        let path = dir.path().join(format!("case-{n}.redb"));
        async move { RedbStorage::open(path) }
    })
    .await
}

/// The connection string of the test server (`scripts/pg_server.sh start`),
/// or `None` (with a note) to skip. Under `CI=true` a missing server fails.
#[cfg(feature = "persist-postgres")]
fn test_pg() -> Option<String> {
    match std::env::var("JIDO_TEST_PG") {
        Ok(conn) if !conn.is_empty() => Some(conn),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "JIDO_TEST_PG is not set under CI=true: the PostgreSQL adapter would be skipped \
                 (start a server with `JIDO_TEST_PG=$(scripts/pg_server.sh start)`)"
            );
            eprintln!(
                "skipped: JIDO_TEST_PG is not set (JIDO_TEST_PG=$(scripts/pg_server.sh start))"
            );
            None
        }
    }
}

#[cfg(feature = "persist-postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_storage_conforms() -> jido::Result<()> {
    use jido::persist::postgres::{PostgresOptions, PostgresStorage};
    let Some(conn) = test_pg() else { return Ok(()) };
    conformance::run(|| {
        let conn = conn.clone();
        async move {
            // A schema per case: cases (and test binaries) run side by side.
            let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
            let storage =
                PostgresStorage::connect(&conn, PostgresOptions::new().schema(schema).pool_size(8))
                    .await?;
            storage.migrate().await?;
            Ok(storage)
        }
    })
    .await
}
