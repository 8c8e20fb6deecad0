//! The storage conformance suite on every adapter of the crate: memory,
//! redb (a temporary file per case) and PostgreSQL (a schema per case on
//! the server named by `JIDO_TEST_PG`, see `scripts/pg_server.sh`).
#![cfg(feature = "persist")]

mod common;

use jido::persist::{MemoryStorage, Storage, conformance};

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

/// An adapter that ignores the revision and the epoch of checkpoint writes:
/// the suite must name exactly the cases that catch it.
mod broken {
    use futures::future::{BoxFuture, FutureExt};
    use jido::persist::*;
    use jido::signal::Signal;
    use jido::{Error, Result};

    pub struct IgnoresConditions(pub MemoryStorage);

    impl Storage for IgnoresConditions {
        fn get_checkpoint<'a>(
            &'a self,
            key: &'a StorageKey,
        ) -> BoxFuture<'a, Result<Option<Stored<Checkpoint>>>> {
            self.0.get_checkpoint(key)
        }
        fn put_checkpoint<'a>(
            &'a self,
            key: &'a StorageKey,
            cp: &'a Checkpoint,
            _: Expect,
            _: u64,
        ) -> BoxFuture<'a, Result<u64>> {
            async move {
                let epoch = self.0.owner(key).await?.map_or(0, |o| o.epoch);
                self.0.put_checkpoint(key, cp, Expect::Any, epoch).await
            }
            .boxed()
        }
        fn delete<'a>(&'a self, key: &'a StorageKey, epoch: u64) -> BoxFuture<'a, Result<()>> {
            self.0.delete(key, epoch)
        }
        fn append_journal<'a>(
            &'a self,
            key: &'a StorageKey,
            epoch: u64,
            after: u64,
            signals: &'a [Signal],
        ) -> BoxFuture<'a, Result<u64>> {
            self.0.append_journal(key, epoch, after, signals)
        }
        fn load_journal<'a>(
            &'a self,
            key: &'a StorageKey,
            after: u64,
            limit: usize,
        ) -> BoxFuture<'a, Result<Vec<JournalEntry>>> {
            self.0.load_journal(key, after, limit)
        }
        fn journal_head<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<u64>> {
            self.0.journal_head(key)
        }
        fn truncate_journal<'a>(
            &'a self,
            key: &'a StorageKey,
            epoch: u64,
            up_to: u64,
        ) -> BoxFuture<'a, Result<()>> {
            self.0.truncate_journal(key, epoch, up_to)
        }
        fn bump_attempts<'a>(
            &'a self,
            key: &'a StorageKey,
            epoch: u64,
            seq: u64,
        ) -> BoxFuture<'a, Result<u32>> {
            self.0.bump_attempts(key, epoch, seq)
        }
        fn claim<'a>(&'a self, key: &'a StorageKey, node: &'a str) -> BoxFuture<'a, Result<u64>> {
            self.0.claim(key, node)
        }
        fn owner<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<Option<Owner>>> {
            self.0.owner(key)
        }
        fn dead_letter<'a>(
            &'a self,
            key: &'a StorageKey,
            epoch: u64,
            seq: u64,
            error: &'a Error,
        ) -> BoxFuture<'a, Result<()>> {
            self.0.dead_letter(key, epoch, seq, error)
        }
        fn load_dead_letters<'a>(
            &'a self,
            key: &'a StorageKey,
            limit: usize,
        ) -> BoxFuture<'a, Result<Vec<DeadLetter>>> {
            self.0.load_dead_letters(key, limit)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_suite_names_the_cases_a_broken_adapter_fails() {
    let err = conformance::run(|| async { Ok(broken::IgnoresConditions(MemoryStorage::new())) })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), jido::ErrorKind::Storage);
    assert_eq!(err.message(), "storage conformance failed");
    assert!(!err.retryable());
    let failed: Vec<&str> = err
        .detail("failed")
        .and_then(|f| f.as_array())
        .expect("failed list")
        .iter()
        .map(|f| f["case"].as_str().expect("case name"))
        .collect();
    assert_eq!(
        failed,
        [
            "stale_revision_conflicts",
            "delete_keeps_revisions_unique",
            "stale_epoch_is_fenced",
            "checkpoint_truncates_journal",
            "concurrent_checkpoint_writers_one_wins",
            // The default `put_checkpoint_delta` writes through the
            // adapter's `put_checkpoint`, so it inherits the missing checks.
            "delta_conditions_hold",
            // It keeps the default `list_timers`, which fails.
            "timers_are_listed_by_kind",
        ]
    );
    let first = &err.detail("failed").expect("failed")[0];
    assert_eq!(
        first["message"],
        "conformance: Rev(1) on no checkpoint: expected a conflict error"
    );
    let passed = err
        .detail("passed")
        .and_then(|p| p.as_array())
        .expect("passed list");
    assert_eq!(passed.len() + failed.len(), conformance::cases().len());
    // The trait's default `list_timers` fails rather than listing nothing.
    let err = broken::IgnoresConditions(MemoryStorage::new())
        .list_timers("ns", "kind", None, 10)
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.message(), err.retryable()),
        (
            jido::ErrorKind::Storage,
            "storage cannot list timers",
            false
        )
    );
}
