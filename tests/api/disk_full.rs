//! A full disk (CONTRACT §9), on a small filesystem of the test's own (a
//! tmpfs; mounting needs root, so without it the tests are skipped with the
//! reason printed; CI runs as root): writes answer 503 STORAGE_UNAVAILABLE
//! with `Retry-After` and change nothing, `/readyz` answers 503, what is held
//! in memory is still served, the service recovers by itself once space is
//! freed (deliveries and their log carry on), and after a SIGKILL every
//! acknowledged write is there.
//!
//! Two paths lead there. The free-space guard (`storage.min_free_mb`)
//! refuses writes before the disk is full; with the guard off, sled meets
//! the full disk, fails, and is reopened once there is room.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{
    create_task_keyed, eventually, launch_binary, runs_once_back_then_replays, Reply, Running,
    ADMIN,
};
use crate::receiver::TestReceiver;

/// A tmpfs of `size_mb` MiB mounted on a temporary directory, unmounted
/// when dropped.
struct SmallFilesystem {
    dir: tempfile::TempDir,
}

impl SmallFilesystem {
    /// The mounted filesystem, or `None` (with the reason printed) where
    /// this process may not mount one.
    fn mount(size_mb: u32) -> Option<Self> {
        let dir = tempfile::tempdir().expect("tempdir");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(dir.path())
            .output();
        let why = match mounted {
            Ok(out) if out.status.success() => return Some(SmallFilesystem { dir }),
            Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            Err(err) => err.to_string(),
        };
        println!("skipping a full-disk test: cannot mount a small tmpfs ({why}); run as root to include it");
        None
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A file taking `mb` MiB of the filesystem until it is removed.
    fn ballast(&self, mb: usize) -> PathBuf {
        let file = self.path().join("ballast");
        std::fs::write(&file, vec![1u8; mb * 1024 * 1024]).expect("ballast written");
        file
    }

    /// A file taking whatever room is left, until it is removed.
    fn fill_up(&self) -> PathBuf {
        use std::io::Write;
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).expect("filler created");
        let chunk = vec![1u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.flush();
        path
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Asserts 503 STORAGE_UNAVAILABLE with `Retry-After` (the body is not
/// printed: it may be large).
#[track_caller]
fn assert_unavailable(reply: &Reply, what: &str) {
    let body = reply.json();
    assert_eq!(
        (reply.status, body["code"].as_str().unwrap_or("")),
        (503, "STORAGE_UNAVAILABLE"),
        "{what}: {}",
        body["detail"]
    );
    assert_eq!(
        reply.header("content-type"),
        "application/problem+json",
        "{what}"
    );
    assert_eq!(reply.header("retry-after"), "2", "{what}: Retry-After");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or("")
            .contains("nothing was changed"),
        "{what}: {}",
        body["detail"]
    );
}

/// One organization with a webhook to `receiver` (subscribed to
/// `task.created`), and its owner's token.
async fn organization(server: &Running, receiver: &TestReceiver) -> (String, String) {
    let (org, token) = server.org(ADMIN, "Full").await;
    let hook = format!("http://127.0.0.1:{}/hook", receiver.port);
    let test = server
        .post(
            &format!("/organizations/{org}/webhook/test"),
            &token,
            json!({"url": hook, "events": ["task.created"]}),
        )
        .await
        .expect(200)
        .json();
    server
        .call(
            actix_web::http::Method::PUT,
            &format!("/organizations/{org}/webhook"),
            Some(&token),
            Some(json!({"test_id": test["test_id"]})),
        )
        .await
        .expect(200);
    (org, token)
}

/// The title `fill` gives its `n`th task (from 0).
fn task_title(n: usize) -> String {
    format!("task {n}")
}

/// The length of the descriptions [`fill`] writes: small enough that no
/// page of sled's goes to a blob file (a leaf holds up to 16 entries, and a
/// page over 128 KiB is written as a blob). These tests take the disk's
/// last bytes while deliveries still write, and a blob write that fails
/// leaves sled waiting forever (README, "Why a guard"); with 60,000-byte
/// descriptions that stalled about 1 run in 80 on a loaded machine, the
/// request after the disk filled getting no answer at all.
const SMALL_VALUE: usize = 4_000;

/// Creates tasks with `description_len` characters each until one is
/// refused; returns the acknowledged ones (id, title) and the refusal.
async fn fill(
    server: &Running,
    org: &str,
    token: &str,
    description_len: usize,
) -> (Vec<(String, String)>, Reply) {
    let tasks = format!("/organizations/{org}/tasks");
    let mut acknowledged = Vec::new();
    loop {
        assert!(acknowledged.len() < 20_000, "the disk never filled");
        let title = task_title(acknowledged.len());
        let body = json!({"title": title, "description": "x".repeat(description_len)});
        let reply = server.post(&tasks, token, body).await;
        if reply.status != 201 {
            return (acknowledged, reply);
        }
        let id = reply.json()["id"].as_str().expect("task id").to_owned();
        acknowledged.push((id, title));
    }
}

/// While the store refuses writes: every write is 503 and changes nothing,
/// `/readyz` is 503, `/healthz` and what is held in memory still answer.
async fn assert_refusing(server: &Running, org: &str, token: &str) {
    let tasks = format!("/organizations/{org}/tasks");
    let small = server
        .post(&tasks, token, json!({"title": "refused"}))
        .await;
    assert_unavailable(&small, "a small task");
    let user = server
        .post("/admin/users", ADMIN, json!({"email": "late@full.test"}))
        .await;
    assert_unavailable(&user, "a user");
    let org_path = format!("/organizations/{org}");
    let rename = server
        .patch(&org_path, token, json!({"name": "Renamed"}))
        .await;
    assert_unavailable(&rename, "a rename");
    assert_unavailable(&server.get("/readyz", token).await, "/readyz");
    assert_eq!(
        server.get("/healthz", token).await.expect(200).json(),
        json!({"status": "ok"}),
        "liveness is not readiness"
    );
    let served = server.get(&org_path, token).await.expect(200).json();
    assert_eq!(
        served["name"],
        json!("Full"),
        "the refused rename changed nothing"
    );
    server.get("/me", token).await.expect(200);
}

/// Every item of a list, page by page.
async fn all_items(server: &Running, path: &str, token: &str) -> Option<Vec<Value>> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = match &cursor {
            Some(cursor) => format!("{path}&limit=200&cursor={cursor}"),
            None => format!("{path}&limit=200"),
        };
        let reply = server.get(&page, token).await;
        if reply.status != 200 {
            return None;
        }
        let body = reply.json();
        items.extend(body["items"].as_array().cloned().unwrap_or_default());
        match body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Some(items),
        }
    }
}

/// After space is freed: ready again without a restart, writes succeed,
/// and every acknowledged task was delivered and logged as succeeded.
async fn assert_recovered(
    server: &Running,
    org: &str,
    token: &str,
    receiver: &TestReceiver,
    acknowledged: &mut Vec<(String, String)>,
) {
    eventually(Duration::from_secs(30), "/readyz to answer 200", || async {
        (server.get("/readyz", token).await.status == 200).then_some(())
    })
    .await;
    let tasks = format!("/organizations/{org}/tasks");
    let after = server
        .post(&tasks, token, json!({"title": "after recovery"}))
        .await
        .expect(201)
        .json();
    let id = after["id"].as_str().expect("task id").to_owned();
    acknowledged.push((id, "after recovery".to_owned()));
    server
        .post("/admin/users", ADMIN, json!({"email": "late@full.test"}))
        .await
        .expect(201);
    let org_path = format!("/organizations/{org}");
    let renamed = server
        .patch(&org_path, token, json!({"name": "Renamed"}))
        .await
        .expect(200)
        .json();
    assert_eq!(renamed["name"], json!("Renamed"));

    // Deliveries went on, and their log records, held while the store
    // refused them, were written once it was back.
    let delivered = receiver
        .wait_for(acknowledged.len() + 1, Duration::from_secs(30))
        .await;
    for (id, _) in acknowledged.iter() {
        assert!(
            delivered
                .iter()
                .any(|d| d.json()["data"]["id"] == json!(id)),
            "task {id} was delivered"
        );
    }
    let log =
        format!("/organizations/{org}/webhook/deliveries?event=task.created&outcome=succeeded");
    eventually(
        Duration::from_secs(30),
        "a succeeded record per task",
        || async {
            let logged = all_items(server, &log, token).await?;
            (logged.len() >= acknowledged.len()).then_some(())
        },
    )
    .await;
}

/// The write that found the disk full: refused with 503, and told either
/// that nothing was changed (refused before it was applied) or that it may
/// have been made (its flush failed after it was applied: sled may have
/// written it first). Returns its title in the second case: the one task
/// that may be stored without having been acknowledged.
fn assert_refused_or_unconfirmed(
    refusal: &Reply,
    acknowledged: &[(String, String)],
) -> Option<String> {
    let body = refusal.json();
    let detail = body["detail"].as_str().unwrap_or("");
    if detail.contains("may have been made") {
        assert_eq!(
            (refusal.status, body["code"].as_str().unwrap_or("")),
            (503, "STORAGE_UNAVAILABLE"),
            "{detail}"
        );
        assert_eq!(refusal.header("content-type"), "application/problem+json");
        assert_eq!(refusal.header("retry-after"), "2");
        return Some(task_title(acknowledged.len()));
    }
    assert_unavailable(refusal, "the write that found the disk full");
    None
}

/// After a SIGKILL and a restart: every acknowledged task, nothing refused
/// (but `unconfirmed`, which may be there or not).
async fn assert_kept(
    data: &Path,
    env: &[(&str, &str)],
    org: &str,
    token: &str,
    acknowledged: &[(String, String)],
    unconfirmed: Option<&str>,
) {
    let server = Running::start(data, env);
    let tasks = format!("/organizations/{org}/tasks");
    for (id, title) in acknowledged {
        let task: Value = server.get(&format!("{tasks}/{id}"), token).await.json();
        assert_eq!(&task["title"], &json!(title), "task {id}");
    }
    let stored: Vec<String> = all_items(&server, &format!("{tasks}?"), token)
        .await
        .expect("the tasks are listed")
        .iter()
        .filter_map(|t| t["title"].as_str().map(str::to_owned))
        .filter(|title| Some(title.as_str()) != unconfirmed)
        .collect();
    let unacknowledged: Vec<&String> = stored
        .iter()
        .filter(|title| !acknowledged.iter().any(|(_, t)| t == *title))
        .collect();
    assert_eq!(
        stored.len(),
        acknowledged.len(),
        "only acknowledged tasks; stored but not acknowledged: {unacknowledged:?}"
    );
    assert!(!stored.iter().any(|t| t == "refused"));
    let org = server
        .get(&format!("/organizations/{org}"), token)
        .await
        .expect(200)
        .json();
    assert_eq!(org["name"], json!("Renamed"));
}

/// Webhooks to loopback allowed, and the free-space guard at `min_free_mb`.
fn settings(min_free_mb: &str) -> [(&str, &str); 3] {
    [
        ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
        ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
        ("ROLECALL_STORAGE__MIN_FREE_MB", min_free_mb),
    ]
}

/// The free-space guard refuses writes before the disk is full; reads of
/// the store go on; freeing space is enough.
#[actix_web::test]
async fn a_nearly_full_disk_refuses_writes_until_space_is_freed() {
    let Some(fs) = SmallFilesystem::mount(12) else {
        return;
    };
    let ballast = fs.ballast(3);
    let data = fs.path().join("data");
    let env = settings("2");
    let mut server = Running::start(&data, &env);
    let receiver = TestReceiver::start().await;
    let (org, token) = organization(&server, &receiver).await;
    assert_eq!(
        server.get("/readyz", &token).await.expect(200).json(),
        json!({"status": "ready"})
    );
    let (mut acknowledged, refusal) = fill(&server, &org, &token, SMALL_VALUE).await;
    let unconfirmed = assert_refused_or_unconfirmed(&refusal, &acknowledged);
    assert!(acknowledged.len() > 10, "some writes fit first");
    // The store itself is fine: what it holds is still read.
    let page = server
        .get(&format!("/organizations/{org}/tasks?limit=1"), &token)
        .await;
    assert_eq!(page.status, 200, "reads of the store go on");
    // Smaller writes may still fit the room the guard keeps for them; take
    // the rest of it, and every write is refused.
    let filler = fs.fill_up();
    assert_refusing(&server, &org, &token).await;

    std::fs::remove_file(&ballast).expect("ballast removed");
    std::fs::remove_file(&filler).expect("filler removed");
    assert_recovered(&server, &org, &token, &receiver, &mut acknowledged).await;
    server.kill_hard();
    assert_kept(
        &data,
        &env,
        &org,
        &token,
        &acknowledged,
        unconfirmed.as_deref(),
    )
    .await;
}

/// With the guard off, sled meets the full disk: the store goes out of
/// service (reads of it too) and is reopened once there is room.
#[actix_web::test]
async fn a_store_failed_by_a_full_disk_is_reopened_once_there_is_room() {
    let Some(fs) = SmallFilesystem::mount(12) else {
        return;
    };
    let ballast = fs.ballast(3);
    let data = fs.path().join("data");
    let env = settings("0");
    let mut server = Running::start(&data, &env);
    let receiver = TestReceiver::start().await;
    let (org, token) = organization(&server, &receiver).await;
    let (mut acknowledged, refusal) = fill(&server, &org, &token, SMALL_VALUE).await;
    let unconfirmed = assert_refused_or_unconfirmed(&refusal, &acknowledged);
    assert_refusing(&server, &org, &token).await;
    let page = server
        .get(&format!("/organizations/{org}/tasks?limit=1"), &token)
        .await;
    assert_unavailable(&page, "a read of the store while it is out of service");

    std::fs::remove_file(&ballast).expect("ballast removed");
    assert_recovered(&server, &org, &token, &receiver, &mut acknowledged).await;
    server.kill_hard();
    assert_kept(
        &data,
        &env,
        &org,
        &token,
        &acknowledged,
        unconfirmed.as_deref(),
    )
    .await;
}

/// Started on a disk too full even to open the database (sled writes as it
/// opens), the server waits and says why, then starts by itself once space
/// is freed, with everything it had acknowledged.
#[actix_web::test]
async fn a_server_started_on_a_full_disk_waits_for_room_then_starts_by_itself() {
    let Some(fs) = SmallFilesystem::mount(12) else {
        return;
    };
    let data = fs.path().join("data");
    let env = settings("0");
    let mut server = Running::start(&data, &env);
    let receiver = TestReceiver::start().await;
    let (org, token) = organization(&server, &receiver).await;
    let tasks = format!("/organizations/{org}/tasks");
    let mut acknowledged = Vec::new();
    for n in 0..5 {
        let title = format!("before the disk filled {n}");
        let task = server
            .post(&tasks, &token, json!({"title": title}))
            .await
            .expect(201)
            .json();
        acknowledged.push((task["id"].as_str().expect("id").to_owned(), title));
    }
    server.kill_hard();

    let filler = fs.fill_up();
    let launched = launch_binary(&data, &env);
    let waiting = eventually(Duration::from_secs(20), "the waiting message", || async {
        let lines = launched.output.stdout.lock().expect("lines");
        lines
            .iter()
            .find(|line| line.contains("waiting for free space to open the database"))
            .cloned()
    })
    .await;
    assert!(
        waiting.contains(&data.display().to_string()) && waiting.contains("No space left"),
        "{waiting}"
    );
    actix_web::rt::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !launched.has_bound(),
        "no port while the database is closed"
    );

    std::fs::remove_file(&filler).expect("filler removed");
    let (child, output) = launched.listening();
    let lines = output.stdout.lock().expect("lines").clone();
    assert!(
        lines.iter().any(|l| l.contains("the disk has room again")),
        "{lines:?}"
    );
    let server = Running {
        server: child,
        client: crate::helpers::client(),
    };
    assert_eq!(
        server.get("/readyz", &token).await.expect(200).json(),
        json!({"status": "ready"})
    );
    for (id, title) in &acknowledged {
        let task = server.get(&format!("{tasks}/{id}"), &token).await;
        assert_eq!(task.expect(200).json()["title"], json!(title), "task {id}");
    }
    server
        .post(&tasks, &token, json!({"title": "after"}))
        .await
        .expect(201);
}

/// A create refused with 503 under an `Idempotency-Key` is not kept: once
/// there is room, the same request runs (CONTRACT §10: 5xx answers are not
/// stored), and is replayed after that.
#[actix_web::test]
async fn a_503_under_an_idempotency_key_is_not_kept_on_sled() {
    let Some(fs) = SmallFilesystem::mount(12) else {
        return;
    };
    let ballast = fs.ballast(3);
    let data = fs.path().join("data");
    let env = settings("2");
    let server = Running::start(&data, &env);
    let receiver = TestReceiver::start().await;
    let (org, token) = organization(&server, &receiver).await;
    let (acknowledged, refusal) = fill(&server, &org, &token, SMALL_VALUE).await;
    assert_refused_or_unconfirmed(&refusal, &acknowledged);
    let filler = fs.fill_up();
    let tasks = format!("/organizations/{org}/tasks");
    let keyed = || {
        create_task_keyed(
            &server.client,
            &server.server.address,
            &tasks,
            &token,
            ("after the disk was full", "full-disk-1"),
        )
    };
    let refused = keyed().await;
    assert_unavailable(&refused, "the keyed create");
    assert_eq!(refused.header("idempotent-replayed"), "");

    std::fs::remove_file(&ballast).expect("ballast removed");
    std::fs::remove_file(&filler).expect("filler removed");
    runs_once_back_then_replays(Duration::from_secs(30), keyed).await;
}

/// Texts of 64 KiB each: a decision holding two is larger than sled's log
/// takes in one piece, so it goes to a blob file of its own.
fn blob_sized() -> String {
    "x".repeat(64 * 1024)
}

/// A server on a small filesystem with the guard off, an organization and
/// its owner's token; the filesystem is then filled to the last byte.
async fn on_a_full_disk_without_the_guard(
    more: &[(&str, &str)],
) -> Option<(SmallFilesystem, Running, String, String)> {
    let fs = SmallFilesystem::mount(12)?;
    let data = fs.path().join("data");
    let env: Vec<(&str, &str)> = settings("0")
        .into_iter()
        .chain(more.iter().copied())
        .collect();
    let server = Running::start(&data, &env);
    let (org, token) = server.org(ADMIN, "Blob").await;
    Some((fs, server, org, token))
}

/// After a write sled cannot finish: a small write and `/readyz` answer
/// 503 at once.
async fn assert_out_of_service(server: &Running, org: &str, token: &str) {
    let small = server
        .post(
            &format!("/organizations/{org}/tasks"),
            token,
            json!({"title": "small"}),
        )
        .await;
    assert_unavailable(&small, "a small write after it");
    let ready = server.get("/readyz", token).await;
    assert_eq!(ready.status, 503, "{}", ready.json());
}

/// A write larger than sled's log takes in one piece goes to a blob file.
/// When the disk is full (here with the guard off) that write fails in a
/// way sled cannot finish: its flushes wait forever (README, "Why a
/// guard"). The request, made on the commit thread, and those after it are
/// still answered 503, at once, and `/readyz` says the store takes no
/// writes.
#[actix_web::test]
async fn a_write_sled_cannot_finish_is_answered_503_and_so_are_those_after_it() {
    let Some((fs, server, org, token)) = on_a_full_disk_without_the_guard(&[]).await else {
        return;
    };
    let _filler = fs.fill_up();
    let text = blob_sized();
    let large = json!({"title": "large", "statement": text, "rationale": text});
    let refused = server
        .post(&format!("/organizations/{org}/decisions"), &token, large)
        .await;
    assert_unavailable(&refused, "the write sled cannot finish");
    assert_out_of_service(&server, &org, &token).await;
}

/// The same for an update, whose transaction runs on its request's thread.
#[actix_web::test]
async fn an_update_sled_cannot_finish_is_answered_503_and_so_are_those_after_it() {
    let Some((fs, server, org, token)) = on_a_full_disk_without_the_guard(&[]).await else {
        return;
    };
    let decisions = format!("/organizations/{org}/decisions");
    let created = server
        .post(
            &decisions,
            &token,
            json!({"title": "small", "statement": "s"}),
        )
        .await
        .expect(201)
        .json();
    let id = created["id"].as_str().expect("decision id").to_owned();
    let _filler = fs.fill_up();
    let text = blob_sized();
    let refused = server
        .patch(
            &format!("{decisions}/{id}"),
            &token,
            json!({"statement": text, "rationale": text}),
        )
        .await;
    assert_unavailable(&refused, "the update sled cannot finish");
    assert_out_of_service(&server, &org, &token).await;
}

/// The same when other writes share the failed write's commit round (a
/// long commit window gathers them): none of them is committed on its own
/// on the failed database, and each answers 503, nothing changed.
#[actix_web::test]
async fn writes_sharing_a_round_with_a_write_sled_cannot_finish_are_not_made() {
    let window = [("ROLECALL_STORAGE__GROUP_COMMIT_WINDOW_US", "500000")];
    let Some((fs, server, org, token)) = on_a_full_disk_without_the_guard(&window).await else {
        return;
    };
    // Another organization: each organization's writes go one at a time.
    let (other, other_token) = server.org(ADMIN, "Beside").await;
    let _filler = fs.fill_up();
    let text = blob_sized();
    let large = json!({"title": "large", "statement": text, "rationale": text});
    let decisions = format!("/organizations/{org}/decisions");
    let tasks = format!("/organizations/{other}/tasks");
    let (refused, beside) = futures_util::join!(
        server.post(&decisions, &token, large),
        server.post(&tasks, &other_token, json!({"title": "beside"})),
    );
    assert_unavailable(&refused, "the write sled cannot finish");
    assert_unavailable(&beside, "the write in its round");
    assert_out_of_service(&server, &org, &token).await;
}
