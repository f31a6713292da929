//! Several nodes on one PostgreSQL database (CONTRACT §8): the promises
//! the cluster keeps, tested with real nodes (child processes) on one
//! database over real HTTP.

use std::path::Path;

use serde_json::json;

use crate::engines::{on_database, Engine};
use crate::helpers::{launch_binary, Running};

/// The settings that put a node on the database at `url`, with a
/// generated admin token.
fn node_env(url: &str) -> [(&str, &str); 3] {
    [
        ("ROLECALL_STORAGE__BACKEND", "postgres"),
        ("ROLECALL_STORAGE__POSTGRES_URL", url),
        ("ROLECALL_ADMIN__TOKEN", ""),
    ]
}

/// The advisory lock nodes take to migrate ("rolecall" in ASCII).
const MIGRATION_LOCK: i64 = 0x726f_6c65_6361_6c6c;

/// Holds the migration lock on `url` until dropped, so that nodes started
/// meanwhile wait at it and go on together.
struct HeldLock {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HeldLock {
    fn take(url: &str) -> HeldLock {
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let url = url.to_owned();
        let thread = std::thread::spawn(move || {
            on_database(&url, move |client| async move {
                client
                    .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
                    .await
                    .expect("lock");
                locked_tx.send(()).expect("locked");
                let _ = tokio::task::spawn_blocking(move || released.recv()).await;
                client
                    .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
                    .await
                    .expect("unlock");
            })
        });
        locked_rx.recv().expect("the lock is taken");
        HeldLock {
            release: Some(release),
            thread: Some(thread),
        }
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The admin token in `dir`'s admin-token file, if there is one.
fn admin_token_in(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("admin-token"))
        .ok()
        .map(|token| token.trim().to_owned())
}

/// How the three nodes of a round start.
#[derive(Clone, Copy, PartialEq)]
enum Start {
    /// On an empty database: they race to create the schema.
    Empty,
    /// On a migrated database, held at the migration lock and released
    /// together: they race for the admin token as they leave it.
    Released,
}

/// Starts three nodes at once on a new database, as `start` says; checks
/// that they share one schema and one admin token that works on each.
async fn three_nodes(databases: &crate::engines::Databases, start: Start) {
    let dirs: Vec<tempfile::TempDir> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let url = databases.url_for(dirs[0].path());
    let env = node_env(&url);
    let held = (start == Start::Released).then(|| {
        let migrated = std::process::Command::new(env!("CARGO_BIN_EXE_rolecall"))
            .arg("migrate")
            .env("ROLECALL_STORAGE__POSTGRES_URL", &url)
            .output()
            .expect("migrate runs");
        assert!(migrated.status.success(), "{migrated:?}");
        HeldLock::take(&url)
    });
    let launched: Vec<_> = dirs
        .iter()
        .map(|dir| launch_binary(dir.path(), &env))
        .collect();
    if let Some(held) = held {
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(held);
    }
    let nodes: Vec<Running> = launched
        .into_iter()
        .map(|node| Running {
            server: node.listening().0,
            client: crate::helpers::client(),
        })
        .collect();

    let tokens: Vec<String> = dirs
        .iter()
        .filter_map(|dir| admin_token_in(dir.path()))
        .collect();
    assert_eq!(tokens.len(), 1, "one node keeps the cluster's admin token");
    for (i, node) in nodes.iter().enumerate() {
        node.post(
            "/admin/users",
            &tokens[0],
            json!({"email": format!("node-{i}@cluster.test")}),
        )
        .await
        .expect(201);
    }
    let (versions, hashes) = on_database(&url, |client| async move {
        let count = async |sql: &str| {
            client
                .query_one(sql, &[])
                .await
                .expect("count")
                .get::<_, i64>(0)
        };
        (
            count("SELECT count(*) FROM rolecall_schema").await,
            count("SELECT count(*) FROM admin_token").await,
        )
    });
    assert_eq!(
        (versions, hashes),
        (1, 1),
        "one schema version row, one admin token"
    );
}

#[actix_web::test]
async fn three_nodes_starting_at_once_share_one_schema_and_one_admin_token() {
    let Some(Engine::Postgres(databases)) = Engine::postgres("cluster::three_nodes_start") else {
        return;
    };
    // The admin-token race is narrow: a few rounds make it happen.
    three_nodes(&databases, Start::Empty).await;
    for _ in 0..4 {
        three_nodes(&databases, Start::Released).await;
    }
}
