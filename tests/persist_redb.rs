//! What the redb adapter promises beyond the conformance suite: data
//! survives closing and reopening the file, one storage per file, group
//! commit, corrupt bytes are refused.
#![cfg(feature = "persist-redb")]

use jido::ErrorKind;
use jido::persist::redb::RedbStorage;
use jido::persist::{Checkpoint, Expect, Storage, StorageKey};
use jido::signal::Signal;
use serde_json::json;

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_survives_reopening_the_file() -> jido::Result<()> {
    let dir = temp();
    let path = dir.path().join("agents.redb");
    let key = StorageKey::new("app", "counter", "c-1")?;
    let mut cp = Checkpoint::new("counter", "1.0.0", "c-1");
    cp.state.insert("n".into(), json!(41));
    cp.applied_seq = 1;
    {
        let storage = RedbStorage::open(&path)?;
        assert_eq!(storage.claim(&key, "node-a").await?, 1);
        storage
            .append_journal(
                &key,
                1,
                0,
                &[Signal::new("tick", json!(1)), Signal::new("tick", json!(2))],
            )
            .await?;
        assert_eq!(
            storage.put_checkpoint(&key, &cp, Expect::Absent, 1).await?,
            1
        );
        storage
            .dead_letter(&key, 1, 2, &jido::Error::execution("poison"))
            .await?;
    }
    let storage = RedbStorage::open(&path)?;
    let stored = storage
        .get_checkpoint(&key)
        .await?
        .expect("checkpoint after reopen");
    assert_eq!((stored.rev, stored.epoch, stored.value), (1, 1, cp));
    assert_eq!(storage.journal_head(&key).await?, 2);
    assert!(storage.load_journal(&key, 0, 10).await?.is_empty());
    let dead = storage.load_dead_letters(&key, 10).await?;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].error["message"], "poison");
    assert_eq!(
        storage.owner(&key).await?.map(|o| (o.node, o.epoch)),
        Some(("node-a".to_owned(), 1))
    );
    // Writes carry on from the stored revision and epoch.
    assert_eq!(storage.claim(&key, "node-b").await?, 2);
    let err = storage
        .put_checkpoint(
            &key,
            &Checkpoint::new("counter", "1.0.0", "c-1"),
            Expect::Rev(1),
            1,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced);
    assert_eq!(err.message(), "fenced: the key has a newer owner");
    Ok(())
}

#[test]
fn a_second_open_of_the_same_file_fails_until_the_first_is_dropped() -> jido::Result<()> {
    let dir = temp();
    let path = dir.path().join("agents.redb");
    let first = RedbStorage::open(&path)?;
    let clone = first.clone();
    let err = RedbStorage::open(&path).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Storage);
    assert_eq!(err.message(), "redb storage failed");
    drop(first);
    assert!(
        RedbStorage::open(&path).is_err(),
        "a clone still holds the file"
    );
    drop(clone);
    RedbStorage::open(&path)?;
    Ok(())
}

#[test]
fn a_file_that_is_not_redb_is_refused() {
    let dir = temp();
    let path = dir.path().join("junk.redb");
    std::fs::write(
        &path,
        b"not a database at all, just some bytes that are long enough".repeat(100),
    )
    .expect("write");
    let err = RedbStorage::open(&path).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Storage);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_share_commits() -> jido::Result<()> {
    let dir = temp();
    let storage = RedbStorage::open(dir.path().join("agents.redb"))?;
    let mut tasks = Vec::new();
    for i in 0..200 {
        let storage = storage.clone();
        tasks.push(tokio::spawn(async move {
            let key = StorageKey::new("app", "agent", format!("a-{i}"))?;
            storage
                .put_checkpoint(
                    &key,
                    &Checkpoint::new("agent", "1", key.id()),
                    Expect::Absent,
                    0,
                )
                .await
        }));
    }
    for task in tasks {
        assert_eq!(task.await.expect("task")?, 1);
    }
    let stats = storage.stats();
    assert_eq!(stats.writes, 200);
    assert!(stats.commits >= 1 && stats.commits <= 200, "{stats:?}");
    Ok(())
}

#[test]
fn works_without_a_tokio_runtime() -> jido::Result<()> {
    let dir = temp();
    let storage = RedbStorage::open(dir.path().join("agents.redb"))?;
    let key = StorageKey::new("app", "agent", "x")?;
    futures::executor::block_on(async {
        storage
            .put_checkpoint(&key, &Checkpoint::new("agent", "1", "x"), Expect::Absent, 0)
            .await?;
        assert_eq!(storage.get_checkpoint(&key).await?.map(|s| s.rev), Some(1));
        Ok(())
    })
}

#[tokio::test]
async fn a_format_2_file_gets_its_timer_listing_on_open() -> jido::Result<()> {
    use jido::persist::{CheckpointDelta, TimerDue};
    use redb::{ReadableTable, TableDefinition};
    let dir = temp();
    let path = dir.path().join("agents.redb");
    let schedule = |due: i64| json!({"kind": "schedule", "due_ms": due, "signal": {}});
    {
        let storage = RedbStorage::open(&path)?;
        let mut cp = Checkpoint::new("pinger", "1", "p-1");
        cp.timers.push(schedule(8_000));
        let p1 = StorageKey::new("app", "pinger", "p-1")?;
        storage.put_checkpoint(&p1, &cp, Expect::Absent, 0).await?;
        // A delta moved p-1's timer: its timers are the ones kept.
        let mut next = cp.clone();
        next.timers = vec![schedule(6_000)];
        storage
            .put_checkpoint_delta(
                &p1,
                &CheckpointDelta::new(next, Vec::<String>::new()),
                Expect::Rev(1),
                0,
            )
            .await?;
        let mut cp = Checkpoint::new("pinger", "1", "p-2");
        cp.timers.push(json!({"kind": "cron", "next_ms": 7_000}));
        let p2 = StorageKey::new("app", "pinger", "p-2")?;
        storage.put_checkpoint(&p2, &cp, Expect::Absent, 0).await?;
        let p3 = StorageKey::new("app", "pinger", "p-3")?;
        storage
            .put_checkpoint(
                &p3,
                &Checkpoint::new("pinger", "1", "p-3"),
                Expect::Absent,
                0,
            )
            .await?;
    }
    // Back to format 2: no timer listing.
    {
        let db = redb::Database::create(&path).expect("open");
        let txn = db.begin_write().expect("txn");
        let timers: TableDefinition<(&str, &str, &str), i64> = TableDefinition::new("jido_timers");
        assert!(txn.delete_table(timers).expect("delete"));
        {
            let meta: TableDefinition<&str, u64> = TableDefinition::new("jido_meta");
            let mut meta = txn.open_table(meta).expect("meta");
            assert_eq!(meta.get("format").expect("get").map(|g| g.value()), Some(3));
            meta.insert("format", 2).expect("insert");
        }
        txn.commit().expect("commit");
    }
    let storage = RedbStorage::open(&path)?;
    assert_eq!(
        storage.list_timers("app", "pinger", None, 10).await?,
        vec![TimerDue::new("p-1", 6_000), TimerDue::new("p-2", 7_000)]
    );
    Ok(())
}
