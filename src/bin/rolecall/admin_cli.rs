//! `rolecall admin`: the admin API from the command line, for operators,
//! and `rekey`, which works on a stopped server's data directory.
//!
//! It talks to a running server over HTTP. The admin token is never taken
//! from the command line (where `ps` and shell history would show it): it
//! comes from `ROLECALL_ADMIN__TOKEN`, else from the file the server wrote
//! on first start, `<data dir>/admin-token`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::Method;
use clap::{Args, Subcommand, ValueEnum};
use rolecall::config::{Backend, Config};
use rolecall::secrets::SealingKey;
use rolecall::storage::{PgStore, SledStore};
use rolecall::webhooks::client::tls_config;
use rolecall::webhooks::signing::new_secret;
use serde_json::{json, Value};

/// Options of `rolecall admin`.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// Base URL of the running server.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,
    /// Data directory of the server, to read `<DIR>/admin-token` from when
    /// ROLECALL_ADMIN__TOKEN is not set [default: $ROLECALL_STORAGE__DATA_DIR, else ./data].
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print the server's JSON answer instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// A PEM CA certificate to trust for an https URL, beside the system's roots
    /// (a server whose certificate comes from an on-prem CA).
    #[arg(long, global = true, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// Admin subcommands.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Users.
    #[command(subcommand)]
    User(UserCommand),
    /// Bearer tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Organizations.
    #[command(subcommand)]
    Org(OrgCommand),
    /// Re-encrypt the stored webhook secrets with another key (storage.secret_key), on the
    /// data directory of a stopped server (--data-dir), or with storage.backend = "postgres"
    /// on its database (storage.postgres_url). Without a from-key they are read in clear;
    /// without a to-key they are stored in clear. Key files keep keys out of `ps`.
    Rekey(RekeyArgs),
}

/// Options of `rolecall admin rekey`.
#[derive(Debug, Args)]
pub struct RekeyArgs {
    /// The key the secrets are encrypted with now (base64).
    #[arg(long, value_name = "KEY", conflicts_with = "from_key_file")]
    pub from_key: Option<String>,
    /// A file holding that key.
    #[arg(long, value_name = "PATH")]
    pub from_key_file: Option<PathBuf>,
    /// The key to encrypt them with (base64).
    #[arg(long, value_name = "KEY", conflicts_with = "to_key_file")]
    pub to_key: Option<String>,
    /// A file holding that key.
    #[arg(long, value_name = "PATH")]
    pub to_key_file: Option<PathBuf>,
    /// The key is lost: give every secret that the from-key does not open a new random secret
    /// (the organizations listed must rotate theirs and hand it to their subscribers).
    #[arg(long)]
    pub replace_unreadable: bool,
    /// A TOML file overlaid on the built-in defaults, for storage.backend and
    /// storage.postgres_url; ROLECALL_STORAGE__* environment variables override both.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

/// A key given inline or in a file; `None` when neither.
fn key_from(
    inline: &Option<String>,
    file: &Option<PathBuf>,
    what: &str,
) -> Result<Option<SealingKey>, String> {
    let text = match (inline, file) {
        (Some(key), _) => key.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|err| format!("{what} file {}: {err}", path.display()))?,
        (None, None) => return Ok(None),
    };
    SealingKey::parse(&text)
        .map(Some)
        .map_err(|err| format!("{what}: {err}"))
}

/// `rolecall admin rekey`: the whole change, or none of it, on the
/// configured engine.
fn rekey(args: &RekeyArgs, data_dir: Option<&Path>) -> Result<String, String> {
    let from = key_from(&args.from_key, &args.from_key_file, "--from-key")?;
    let to = key_from(&args.to_key, &args.to_key_file, "--to-key")?;
    let replace = args.replace_unreadable.then_some(new_secret as fn() -> _);
    let config =
        Config::load(args.config.as_deref(), std::env::vars()).map_err(|e| e.to_string())?;
    let (rekeyed, place) = match config.storage.backend {
        Backend::Postgres => {
            let settings = rolecall::storage::postgres::Settings::of(&config.storage)?;
            let rekeyed = actix_web::rt::System::new().block_on(PgStore::rekey(
                &settings,
                from.as_ref(),
                to.as_ref(),
                replace,
            ));
            (rekeyed, PgStore::describe(&settings))
        }
        Backend::Sled => {
            let dir = data_dir.map_or(config.storage.data_dir, Path::to_path_buf);
            let rekeyed = SledStore::rekey(&dir, from.as_ref(), to.as_ref(), replace);
            (rekeyed, dir.display().to_string())
        }
    };
    let rekeyed = rekeyed.map_err(|err| rolecall::telemetry::cause_chain(&err))?;
    let now = if to.is_some() {
        "encrypted with the new key"
    } else {
        "stored in clear"
    };
    let mut report = format!(
        "{} webhook secret(s) in {place} are now {now}",
        rekeyed.changed
    );
    if !rekeyed.replaced.is_empty() {
        report.push_str(&format!(
            "\n{} of them did not open and were replaced by new secrets that nobody knows; \
             their deliveries fail verification until an owner rotates the webhook secret \
             (POST /organizations/{{id}}/webhook/rotate) and gives it to the subscriber:",
            rekeyed.replaced.len()
        ));
        for org in &rekeyed.replaced {
            report.push_str(&format!("\n  {org}"));
        }
    }
    Ok(report)
}

/// `rolecall admin user ...`.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user (emails are unique, compared case-insensitively).
    Create {
        /// The user's email address.
        #[arg(long)]
        email: String,
        /// Display name.
        #[arg(long)]
        name: Option<String>,
    },
}

/// `rolecall admin token ...`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issue a bearer token for a user. Its plaintext is printed once; the
    /// server keeps only its SHA-256.
    Create {
        /// The user the token authenticates as.
        #[arg(long, value_name = "ID")]
        user_id: String,
        /// `api` for programs, `session` for people.
        #[arg(long, value_enum, default_value = "api")]
        kind: TokenKind,
        /// A label to recognise the token by.
        #[arg(long)]
        name: Option<String>,
    },
    /// Revoke a token: it fails with 401 from the next request on.
    Revoke {
        /// The token's id (not its plaintext).
        #[arg(long, value_name = "ID")]
        token_id: String,
    },
}

/// `rolecall admin org ...`.
#[derive(Debug, Subcommand)]
pub enum OrgCommand {
    /// Create an organization with its first Owner.
    Create {
        /// Display name.
        #[arg(long)]
        name: String,
        /// Billing plan (custom roles need enterprise).
        #[arg(long, value_enum)]
        plan: Plan,
        /// The user who becomes its first Owner.
        #[arg(long, value_name = "ID")]
        owner_user_id: String,
    },
    /// Change an organization's plan.
    SetPlan {
        /// The organization.
        #[arg(long, value_name = "ID")]
        org_id: String,
        /// The new plan.
        #[arg(long, value_enum)]
        plan: Plan,
    },
}

/// Token kinds.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TokenKind {
    /// For programs.
    Api,
    /// For people.
    Session,
}

/// Billing plans.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Plan {
    /// Free.
    Free,
    /// Pro.
    Pro,
    /// Enterprise (custom roles).
    Enterprise,
}

impl Plan {
    fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Pro => "pro",
            Plan::Enterprise => "enterprise",
        }
    }
}

impl TokenKind {
    fn as_str(self) -> &'static str {
        match self {
            TokenKind::Api => "api",
            TokenKind::Session => "session",
        }
    }
}

/// One admin API call.
struct Call {
    method: Method,
    path: String,
    body: Option<Value>,
}

impl AdminCommand {
    /// The admin API call this command makes; `None` for `rekey`, which
    /// calls no server.
    fn call(&self) -> Option<Call> {
        let (method, path, body) = match self {
            AdminCommand::User(UserCommand::Create { email, name }) => (
                Method::POST,
                "/admin/users".to_owned(),
                Some(with_optional(json!({"email": email}), "name", name)),
            ),
            AdminCommand::Token(TokenCommand::Create {
                user_id,
                kind,
                name,
            }) => (
                Method::POST,
                format!("/admin/users/{}/tokens", segment(user_id)),
                Some(with_optional(json!({"kind": kind.as_str()}), "name", name)),
            ),
            AdminCommand::Token(TokenCommand::Revoke { token_id }) => (
                Method::DELETE,
                format!("/admin/tokens/{}", segment(token_id)),
                None,
            ),
            AdminCommand::Org(OrgCommand::Create {
                name,
                plan,
                owner_user_id,
            }) => (
                Method::POST,
                "/admin/organizations".to_owned(),
                Some(json!({"name": name, "plan": plan.as_str(), "owner_user_id": owner_user_id})),
            ),
            AdminCommand::Org(OrgCommand::SetPlan { org_id, plan }) => (
                Method::PATCH,
                format!("/admin/organizations/{}", segment(org_id)),
                Some(json!({"plan": plan.as_str()})),
            ),
            AdminCommand::Rekey(_) => return None,
        };
        Some(Call { method, path, body })
    }
}

fn with_optional(mut body: Value, key: &str, value: &Option<String>) -> Value {
    if let (Some(value), Some(object)) = (value, body.as_object_mut()) {
        object.insert(key.to_owned(), Value::String(value.clone()));
    }
    body
}

/// An id as one path segment: anything but letters, digits, `-`, `_` and
/// `~` is percent-encoded (dots too), so an id can never change the path.
fn segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Runs the command; answers what to print on stdout, or an error message.
pub fn run(args: AdminArgs) -> Result<String, String> {
    let Some(call) = args.command.call() else {
        let AdminCommand::Rekey(rekey_args) = &args.command else {
            return Err("this command calls no server".into());
        };
        return rekey(rekey_args, args.data_dir.as_deref());
    };
    let token = admin_token(args.data_dir.as_deref())?;
    let url = format!("{}{}", args.url.trim_end_matches('/'), call.path);
    let ca_file = args.ca_file.as_deref().map(Path::to_string_lossy);
    let tls = tls_config(ca_file.as_deref().unwrap_or_default(), "--ca-file")?;
    let (status, body) = actix_web::rt::System::new().block_on(send(call, url, token, tls))?;
    if !(200..300).contains(&status) {
        return Err(describe_error(status, &body));
    }
    Ok(match (&body, args.json) {
        (Value::Null, _) => String::new(),
        (body, true) => serde_json::to_string_pretty(body).unwrap_or_default(),
        (body, false) => table(body),
    })
}

/// `--data-dir`, else `ROLECALL_STORAGE__DATA_DIR`, else `./data`.
fn data_dir(given: Option<&Path>) -> PathBuf {
    given.map(Path::to_path_buf).unwrap_or_else(|| {
        std::env::var_os("ROLECALL_STORAGE__DATA_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("./data"))
    })
}

/// `ROLECALL_ADMIN__TOKEN`, else the token file in the data directory.
fn admin_token(data_dir: Option<&Path>) -> Result<String, String> {
    if let Some(token) = std::env::var("ROLECALL_ADMIN__TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        return Ok(token.trim().to_owned());
    }
    let path = self::data_dir(data_dir).join("admin-token");
    let token = std::fs::read_to_string(&path).map_err(|err| {
        format!(
            "no admin token: ROLECALL_ADMIN__TOKEN is not set and {} cannot be read ({err})",
            path.display()
        )
    })?;
    let token = token.trim();
    if token.is_empty() {
        return Err(format!("no admin token: {} is empty", path.display()));
    }
    Ok(token.to_owned())
}

async fn send(
    call: Call,
    url: String,
    token: String,
    tls: Arc<rustls::ClientConfig>,
) -> Result<(u16, Value), String> {
    let client = awc::Client::builder()
        .connector(awc::Connector::new().rustls_0_23(tls))
        .timeout(Duration::from_secs(30))
        .finish();
    let request = client
        .request(call.method, &url)
        .insert_header(("Authorization", format!("Bearer {token}")));
    let sent = match call.body {
        Some(body) => request.send_json(&body).await,
        None => request.send().await,
    };
    let mut response = sent.map_err(|err| format!("cannot reach {url}: {err}"))?;
    let bytes = response
        .body()
        .limit(1024 * 1024)
        .await
        .map_err(|err| format!("reading the answer from {url}: {err}"))?;
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    Ok((response.status().as_u16(), body))
}

/// A problem+json answer as one line: status, code, detail.
fn describe_error(status: u16, body: &Value) -> String {
    let code = body["code"].as_str().unwrap_or("");
    let detail = body["detail"]
        .as_str()
        .or_else(|| body.as_str())
        .unwrap_or("");
    let field = body["field"]
        .as_str()
        .map(|f| format!(" (field: {f})"))
        .unwrap_or_default();
    format!("the server answered {status} {code}: {detail}{field}")
}

/// An object as a two-column table, keys sorted.
fn table(body: &Value) -> String {
    let Some(object) = body.as_object() else {
        return body.to_string();
    };
    let width = object.keys().map(|k| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (key, value) in object {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Null => "-".to_owned(),
            other => other.to_string(),
        };
        out.push_str(&format!("{key:<width$}  {text}\n"));
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_cannot_escape_their_path_segment() {
        assert_eq!(segment("01ab-CD_9~"), "01ab-CD_9~");
        assert_eq!(segment("../x?y=1#z"), "%2E%2E%2Fx%3Fy%3D1%23z");
    }

    #[test]
    fn tables_align_keys_and_show_null_as_a_dash() {
        let body = json!({"id": "u1", "email": "a@b.c", "name": null});
        assert_eq!(table(&body), "email  a@b.c\nid     u1\nname   -");
    }

    #[test]
    fn errors_name_status_code_detail_and_field() {
        let body = json!({"code": "EMAIL_TAKEN", "detail": "taken", "field": "email"});
        assert_eq!(
            describe_error(409, &body),
            "the server answered 409 EMAIL_TAKEN: taken (field: email)"
        );
    }
}
