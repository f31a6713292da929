//! The server under load: admin setup calls and timed requests.

use std::time::{Duration, Instant};

use actix_web::http::Method;
use actix_web::web::Bytes;
use serde_json::{json, Value};

use crate::load::sink::SinkState;
use rolecall::secrets::Secret;

/// A rolecall server (or the nodes of a cluster) and a client for it.
pub struct Target {
    /// Base URLs, e.g. `http://127.0.0.1:8080`: one per node, taken in
    /// turn request by request.
    bases: Vec<String>,
    next: std::cell::Cell<usize>,
    /// With `--route organization`: the node each organization's requests go
    /// to (its index in `bases`), as a load balancer routing on the path would.
    routes: Routes,
    admin: String,
    client: awc::Client,
}

/// Organization id → node index. Requests of organizations not in it (and
/// those naming none) take the nodes in turn.
pub type Routes = std::collections::HashMap<String, usize>;

/// What setup created.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// The owner's token (owns every org).
    pub owner_token: String,
    /// A member holding the custom role, in the first org.
    pub reader_token: String,
    /// Orgs whose webhooks point at the healthy sink.
    pub orgs: Vec<String>,
    /// An org whose webhook times out on every attempt.
    pub hanging_org: String,
}

impl Target {
    /// A client for `base` with room for `concurrency` connections.
    pub fn new(base: String, admin: String, concurrency: usize) -> Self {
        Target::spread(vec![base], admin, Routes::new(), concurrency)
    }

    /// A client spreading its requests over `bases`: by `routes`, else in turn.
    pub fn spread(bases: Vec<String>, admin: String, routes: Routes, concurrency: usize) -> Self {
        // An idle connection is not reused after 2 s: a server closes its
        // own after 5 s (actix-web's default), and a request sent on one it
        // is closing fails as a disconnect the burst would count as an error.
        let connector = awc::Connector::new()
            .limit(concurrency + 16)
            .timeout(Duration::from_secs(10))
            .conn_keep_alive(Duration::from_secs(2));
        let client = awc::Client::builder()
            .connector(connector)
            .timeout(Duration::from_secs(30))
            .finish();
        Target {
            bases,
            next: std::cell::Cell::new(0),
            routes,
            admin,
            client,
        }
    }

    /// The base URLs, admin token and routes, to build a client on another thread.
    pub fn address(&self) -> (Vec<String>, String, Routes) {
        (self.bases.clone(), self.admin.clone(), self.routes.clone())
    }

    /// Sends each of `orgs`' requests to one node from now on, the
    /// organizations dealt to the nodes in turn.
    pub fn route_by_organization(&mut self, orgs: &[String]) {
        let nodes = self.bases.len().max(1);
        self.routes = orgs
            .iter()
            .enumerate()
            .map(|(i, org)| (org.clone(), i % nodes))
            .collect();
    }

    /// The base URL of a request to `path`.
    fn base(&self, path: &str) -> &str {
        let routed = path
            .strip_prefix("/organizations/")
            .and_then(|rest| rest.split('/').next())
            .and_then(|org| self.routes.get(org));
        let i = routed.copied().unwrap_or_else(|| {
            let i = self.next.get();
            self.next.set(i.wrapping_add(1));
            i
        });
        self.bases
            .get(i % self.bases.len().max(1))
            .map_or("", String::as_str)
    }

    /// Sends one request; answers the status, the JSON body and the latency.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value, Duration), String> {
        self.call_keyed(method, path, token, body, None).await
    }

    /// [`Self::call`], with an `Idempotency-Key` when `key` is given.
    pub async fn call_keyed(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<&Value>,
        key: Option<&str>,
    ) -> Result<(u16, Value, Duration), String> {
        let (status, bytes, latency) = self.sent(method, path, token, body, key).await?;
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok((status, value, latency))
    }

    /// Sends one request; answers the status, the raw body (read in full)
    /// and the latency. Reads do not parse what they do not look at: on 2
    /// cores the client's JSON parsing competed with the server measured.
    pub async fn timed(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Bytes, Duration), String> {
        self.sent(method, path, token, body, None).await
    }

    async fn sent(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<&Value>,
        key: Option<&str>,
    ) -> Result<(u16, Bytes, Duration), String> {
        let started = Instant::now();
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base(path)))
            .insert_header(("Authorization", format!("Bearer {token}")));
        if let Some(key) = key {
            request = request.insert_header(("Idempotency-Key", key));
        }
        let sent = match body {
            Some(body) => request.send_json(body).await,
            None => request.send().await,
        };
        let mut response = sent.map_err(|err| format!("{path}: {err}"))?;
        let bytes = response
            .body()
            .limit(4 * 1024 * 1024)
            .await
            .map_err(|err| format!("{path}: {err}"))?;
        Ok((response.status().as_u16(), bytes, started.elapsed()))
    }

    async fn call_expecting(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Value,
        status: u16,
    ) -> Result<Value, String> {
        let (got, value, _) = self.call(method, path, token, Some(&body)).await?;
        if got != status {
            return Err(format!("{path}: expected {status}, got {got}: {value}"));
        }
        Ok(value)
    }

    async fn user_with_token(&self, email: &str) -> Result<(String, String), String> {
        let user = self
            .call_expecting(
                Method::POST,
                "/admin/users",
                &self.admin.clone(),
                json!({"email": email}),
                201,
            )
            .await?;
        let id = user["id"].as_str().unwrap_or_default().to_owned();
        let token = self
            .call_expecting(
                Method::POST,
                &format!("/admin/users/{id}/tokens"),
                &self.admin.clone(),
                json!({"kind": "api"}),
                201,
            )
            .await?;
        Ok((id, token["token"].as_str().unwrap_or_default().to_owned()))
    }

    async fn org(&self, owner: &str, name: String) -> Result<String, String> {
        let org = self
            .call_expecting(
                Method::POST,
                "/admin/organizations",
                &self.admin.clone(),
                json!({"name": name, "plan": "enterprise", "owner_user_id": owner}),
                201,
            )
            .await?;
        Ok(org["id"].as_str().unwrap_or_default().to_owned())
    }

    async fn webhook(&self, org: &str, token: &str, url: String) -> Result<Secret, String> {
        let body = json!({"url": url, "events": ["task.created", "task.status_changed"]});
        let test = self
            .call_expecting(
                Method::POST,
                &format!("/organizations/{org}/webhook/test"),
                token,
                body,
                200,
            )
            .await?;
        if test["passed"] != json!(true) {
            return Err(format!("webhook test against the sink failed: {test}"));
        }
        self.call_expecting(
            Method::PUT,
            &format!("/organizations/{org}/webhook"),
            token,
            json!({"test_id": test["test_id"]}),
            200,
        )
        .await?;
        Ok(Secret::new(
            test["secret"].as_str().unwrap_or_default().to_owned(),
        ))
    }

    /// Creates an owner, `orgs` organizations with webhooks to the sink, a
    /// custom role and a member holding it, and an organization whose
    /// endpoint hangs.
    pub async fn setup(
        &self,
        orgs: usize,
        sink_url: &str,
        sink: &SinkState,
    ) -> Result<Fixture, String> {
        let tag = rolecall::ids::new_v7().simple().to_string();
        let (owner, owner_token) = self
            .user_with_token(&format!("load-owner-{tag}@example.test"))
            .await?;
        let mut ids = Vec::new();
        for i in 0..orgs.max(1) {
            let org = self.org(&owner, format!("Load {i} {tag}")).await?;
            sink.trust(
                &org,
                self.webhook(&org, &owner_token, format!("{sink_url}/hook"))
                    .await?,
            );
            ids.push(org);
        }
        let first = ids[0].clone();
        let role = self
            .call_expecting(
                Method::POST,
                &format!("/organizations/{first}/roles"),
                &owner_token,
                json!({"name": "Load reader", "permissions": ["org:team:read"]}),
                201,
            )
            .await?;
        let (reader, reader_token) = self
            .user_with_token(&format!("load-reader-{tag}@example.test"))
            .await?;
        self.call_expecting(
            Method::POST,
            &format!("/organizations/{first}/members"),
            &owner_token,
            json!({"user_id": reader, "role_id": role["id"]}),
            201,
        )
        .await?;
        let hanging_org = self.org(&owner, format!("Load hanging {tag}")).await?;
        sink.trust(
            &hanging_org,
            self.webhook(&hanging_org, &owner_token, format!("{sink_url}/hang"))
                .await?,
        );
        Ok(Fixture {
            owner_token,
            reader_token,
            orgs: ids,
            hanging_org,
        })
    }
}
