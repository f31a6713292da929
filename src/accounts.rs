//! Users and bearer tokens: global (not per organization), kept in memory
//! for per-request authentication and written through to storage.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::domain::commands::members::UserLookup;
use crate::domain::error::ApiError;
use crate::domain::names::fold;
use crate::domain::user::{TokenKind, TokenRecord, User};
use crate::ids::{TokenId, UserId};
use crate::secrets::{new_token, sha256, Secret};
use crate::storage::{Storage, Write};
use crate::time::Timestamp;

#[derive(Default)]
struct Tables {
    users: HashMap<UserId, User>,
    emails: HashMap<String, UserId>,
    /// Token SHA-256 → the token's record.
    tokens: HashMap<[u8; 32], TokenRecord>,
    token_ids: HashMap<TokenId, [u8; 32]>,
}

/// The account directory.
pub struct Accounts {
    tables: RwLock<Tables>,
    /// Serializes account writes so email uniqueness is checked without races;
    /// async because it is held across the durability wait.
    writer: tokio::sync::Mutex<()>,
    storage: Storage,
}

impl Accounts {
    /// Builds the directory from stored rows.
    pub fn new(storage: Storage, users: Vec<User>, tokens: Vec<TokenRecord>) -> Self {
        let mut tables = Tables::default();
        for user in users {
            tables.emails.insert(fold(&user.email), user.id);
            tables.users.insert(user.id, user);
        }
        for token in tokens {
            tables.token_ids.insert(token.id, token.sha256);
            tables.tokens.insert(token.sha256, token);
        }
        Accounts {
            tables: RwLock::new(tables),
            writer: tokio::sync::Mutex::new(()),
            storage,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Tables> {
        self.tables.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Tables> {
        self.tables.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The user a presented token acts as; `None` when unknown or revoked.
    #[inline]
    pub fn user_for_token(&self, token: &str) -> Option<UserId> {
        let digest = sha256(token.as_bytes());
        self.read().tokens.get(&digest).map(|t| t.user_id)
    }

    /// A user by id.
    pub fn user(&self, id: UserId) -> Option<User> {
        self.read().users.get(&id).cloned()
    }

    /// `POST /admin/users`.
    pub async fn create_user(&self, email: String, name: Option<String>) -> Result<User, ApiError> {
        let _writer = self.writer.lock().await;
        let folded = fold(&email);
        if self.read().emails.contains_key(&folded) {
            return Err(ApiError::EmailTaken);
        }
        let user = User {
            id: UserId::generate(),
            email,
            name,
            created_at: Timestamp::now(),
        };
        self.storage
            .commit_durably(vec![Write::PutUser(user.clone(), folded.clone())])
            .await?;
        let mut tables = self.write();
        tables.emails.insert(folded, user.id);
        tables.users.insert(user.id, user.clone());
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
        if !self.read().users.contains_key(&user) {
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
        self.storage
            .commit_durably(vec![Write::PutToken(record.clone())])
            .await?;
        let mut tables = self.write();
        tables.token_ids.insert(record.id, record.sha256);
        tables.tokens.insert(record.sha256, record.clone());
        Ok((record, secret))
    }

    /// `DELETE /admin/tokens/{tokenId}`: refused from the moment the write
    /// commits, durable before the answer.
    pub async fn revoke_token(&self, id: TokenId) -> Result<(), ApiError> {
        let _writer = self.writer.lock().await;
        let record = {
            let tables = self.read();
            let digest = tables
                .token_ids
                .get(&id)
                .ok_or(ApiError::NotFound("token"))?;
            tables
                .tokens
                .get(digest)
                .cloned()
                .ok_or(ApiError::NotFound("token"))?
        };
        self.storage.commit(&[Write::DeleteToken(record.clone())])?;
        {
            let mut tables = self.write();
            tables.tokens.remove(&record.sha256);
            tables.token_ids.remove(&id);
        }
        self.storage.durable().await?;
        Ok(())
    }
}

impl UserLookup for Accounts {
    fn user_by_id(&self, id: UserId) -> Option<User> {
        self.user(id)
    }

    fn user_by_email(&self, folded_email: &str) -> Option<User> {
        let tables = self.read();
        tables
            .emails
            .get(folded_email)
            .and_then(|id| tables.users.get(id))
            .cloned()
    }
}
