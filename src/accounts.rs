//! Account commands of the admin API: create users and tokens, revoke
//! tokens. One at a time (email uniqueness is checked without races),
//! committed through the commit path, which publishes them to the account
//! table before they are answered.

use std::sync::Arc;

use crate::commit::{Commit, CommitPath};
use crate::domain::change::Write;
use crate::domain::commands::members::UserLookup;
use crate::domain::error::ApiError;
use crate::domain::names::fold;
use crate::domain::user::{TokenKind, TokenRecord, User};
use crate::ids::{TokenId, UserId};
use crate::secrets::{new_token, Secret};
use crate::state::accounts::AccountTable;
use crate::storage::UserKey;
use crate::time::Timestamp;

/// Serializes account changes.
pub struct Accounts {
    table: Arc<AccountTable>,
    commit: Arc<CommitPath>,
    /// Held across the commit, so two creations of one email cannot both
    /// pass the check; async because the commit is awaited.
    writer: tokio::sync::Mutex<()>,
}

impl Accounts {
    /// Account commands checked against `table` and committed through `commit`.
    pub fn new(table: Arc<AccountTable>, commit: Arc<CommitPath>) -> Self {
        Accounts {
            table,
            commit,
            writer: tokio::sync::Mutex::new(()),
        }
    }

    /// A user, from memory or, on a store other nodes share, as stored
    /// (kept in memory from then on).
    pub async fn user(&self, by: UserKey<'_>) -> Result<Option<User>, ApiError> {
        let known = match by {
            UserKey::Id(id) => self.table.user(id),
            UserKey::Email(folded) => self.table.user_by_email(folded),
        };
        if known.is_some() || !self.commit.store().shared() {
            return Ok(known);
        }
        let stored = self.commit.store().user(by).await?;
        if let Some(user) = &stored {
            self.table.learn(user.clone(), None);
        }
        Ok(stored)
    }

    /// `POST /admin/users`. Another node may have created the email
    /// meanwhile: the store's unique index refuses it then.
    pub async fn create_user(&self, email: String, name: Option<String>) -> Result<User, ApiError> {
        let _writer = self.writer.lock().await;
        if self.user(UserKey::Email(&fold(&email))).await?.is_some() {
            return Err(ApiError::EmailTaken);
        }
        let user = User {
            id: UserId::generate(),
            email,
            name,
            created_at: Timestamp::now(),
        };
        let change = Commit::writes(vec![Write::PutUser(user.clone())]);
        self.commit.commit(change).await?;
        Ok(user)
    }

    /// `POST /admin/users/{userId}/tokens`: returns the record and the
    /// plaintext, which is never stored.
    pub async fn create_token(
        &self,
        user: UserId,
        kind: TokenKind,
        name: Option<String>,
    ) -> Result<(TokenRecord, Secret), ApiError> {
        let _writer = self.writer.lock().await;
        if self.user(UserKey::Id(user)).await?.is_none() {
            return Err(ApiError::NotFound("user"));
        }
        let secret = new_token();
        let record = TokenRecord {
            id: TokenId::generate(),
            user_id: user,
            kind,
            name,
            sha256: secret.digest(),
            created_at: Timestamp::now(),
        };
        let change = Commit::writes(vec![Write::PutToken(record.clone())]);
        self.commit.commit(change).await?;
        Ok((record, secret))
    }

    /// `DELETE /admin/tokens/{tokenId}`: refused from the next request on,
    /// durable before the answer.
    pub async fn revoke_token(&self, id: TokenId) -> Result<(), ApiError> {
        let _writer = self.writer.lock().await;
        let record = match self.table.token(id) {
            Some(record) => Some(record),
            None => self.commit.store().token(id).await?,
        };
        let record = record.ok_or(ApiError::NotFound("token"))?;
        let change = Commit::writes(vec![Write::DeleteToken(record)]);
        self.commit.commit(change).await?;
        Ok(())
    }
}
