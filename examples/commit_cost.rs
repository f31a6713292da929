//! Measures the cost of a durable commit through the commit path, alone and
//! with concurrent writers sharing flushes (group commit). Run: `cargo run --release --example commit_cost`.

use std::time::Instant;

use futures_util::future::join_all;
use rolecall::commit::{Commit, CommitPath};
use rolecall::domain::change::Write;
use rolecall::domain::user::User;
use rolecall::ids::UserId;
use rolecall::storage::{Store, StoreError, Tuning};
use rolecall::time::Timestamp;

fn user_write() -> Write {
    let id = UserId::generate();
    let user = User {
        id,
        email: format!("{id}@example.test"),
        name: None,
        created_at: Timestamp::now(),
    };
    Write::PutUser(user)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let storage = std::sync::Arc::new(CommitPath::offline(Store::open_sled(
        dir.path(),
        Tuning::default(),
        None,
    )?));
    actix_web::rt::System::new().block_on(async move {
        let sequential = 500;
        let start = Instant::now();
        for _ in 0..sequential {
            storage.commit(Commit::writes(vec![user_write()])).await?;
        }
        let elapsed = start.elapsed();
        println!(
            "1 writer:   {sequential} durable commits in {elapsed:?}: {:.0}/s, {:.2} ms each",
            sequential as f64 / elapsed.as_secs_f64(),
            elapsed.as_secs_f64() * 1000.0 / sequential as f64
        );
        for writers in [16usize, 64, 256] {
            let per_writer = 20;
            let start = Instant::now();
            let tasks = (0..writers).map(|_| {
                let storage = storage.clone();
                async move {
                    for _ in 0..per_writer {
                        storage.commit(Commit::writes(vec![user_write()])).await?;
                    }
                    Ok::<_, StoreError>(())
                }
            });
            for outcome in join_all(tasks).await {
                outcome?;
            }
            let elapsed = start.elapsed();
            let total = writers * per_writer;
            println!(
                "{writers:>3} writers: {total} durable commits in {elapsed:?}: {:.0}/s",
                total as f64 / elapsed.as_secs_f64()
            );
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
