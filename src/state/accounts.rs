//! Users and bearer tokens, in memory for per-request authentication. Global
//! (not per organization). Only the commit path changes the table, by
//! applying committed writes ([`AccountTable::apply`]).

use std::collections::HashMap;
use std::sync::RwLock;

use crate::domain::change::Write;
use crate::domain::commands::members::UserLookup;
use crate::domain::names::fold;
use crate::domain::user::{TokenRecord, User};
use crate::ids::{TokenId, UserId};
use crate::secrets::sha256;

#[derive(Default)]
struct Tables {
    users: HashMap<UserId, User>,
    emails: HashMap<String, UserId>,
    /// Token SHA-256 → the token's record.
    tokens: HashMap<[u8; 32], TokenRecord>,
    token_ids: HashMap<TokenId, [u8; 32]>,
}

impl Tables {
    fn put_user(&mut self, user: User) {
        self.emails.insert(fold(&user.email), user.id);
        self.users.insert(user.id, user);
    }

    fn put_token(&mut self, token: TokenRecord) {
        self.token_ids.insert(token.id, token.sha256);
        self.tokens.insert(token.sha256, token);
    }

    fn delete_token(&mut self, token: &TokenRecord) {
        self.tokens.remove(&token.sha256);
        self.token_ids.remove(&token.id);
    }
}

/// The account table.
#[derive(Default)]
pub struct AccountTable {
    /// A std lock, not an async one: held only for a map lookup or update.
    tables: RwLock<Tables>,
}

impl AccountTable {
    /// The table of stored users and tokens.
    pub fn new(users: Vec<User>, tokens: Vec<TokenRecord>) -> Self {
        let mut tables = Tables::default();
        users.into_iter().for_each(|user| tables.put_user(user));
        tokens.into_iter().for_each(|token| tables.put_token(token));
        AccountTable {
            tables: RwLock::new(tables),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Tables> {
        self.tables.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The user a presented token acts as; `None` when unknown or revoked.
    #[inline]
    pub fn user_for_token(&self, token: &str) -> Option<UserId> {
        self.user_for_digest(&sha256(token.as_bytes()))
    }

    /// The user of the token whose SHA-256 is `digest`, if it is live.
    pub fn user_for_digest(&self, digest: &[u8; 32]) -> Option<UserId> {
        self.read().tokens.get(digest).map(|t| t.user_id)
    }

    /// A user by id.
    pub fn user(&self, id: UserId) -> Option<User> {
        self.read().users.get(&id).cloned()
    }

    /// Whether a user has this email, compared case-insensitively.
    pub fn email_taken(&self, email: &str) -> bool {
        self.read().emails.contains_key(&fold(email))
    }

    /// A token's record by its id.
    pub fn token(&self, id: TokenId) -> Option<TokenRecord> {
        let tables = self.read();
        let digest = tables.token_ids.get(&id)?;
        tables.tokens.get(digest).cloned()
    }

    /// Keeps `user` and `token`, read from a store that other nodes share
    /// (this node may not have seen them created).
    pub fn learn(&self, user: User, token: Option<TokenRecord>) {
        // Every request on a shared store comes here: the write lock only
        // for what is new.
        let known = {
            let tables = self.read();
            tables.users.get(&user.id) == Some(&user)
                && token
                    .as_ref()
                    .is_none_or(|token| tables.tokens.get(&token.sha256) == Some(token))
        };
        if known {
            return;
        }
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        tables.put_user(user);
        if let Some(token) = token {
            tables.put_token(token);
        }
    }

    /// Drops the token whose SHA-256 is `digest`: another node revoked it.
    pub fn forget_token(&self, digest: &[u8; 32]) {
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        if let Some(token) = tables.tokens.get(digest).cloned() {
            tables.delete_token(&token);
        }
    }

    /// Applies the account writes of a committed change.
    pub fn apply(&self, writes: &[Write]) {
        let mut accounts = writes
            .iter()
            .filter(|w| {
                matches!(
                    w,
                    Write::PutUser(_) | Write::PutToken(_) | Write::DeleteToken(_)
                )
            })
            .peekable();
        if accounts.peek().is_none() {
            return;
        }
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        for write in accounts {
            match write {
                Write::PutUser(user) => tables.put_user(user.clone()),
                Write::PutToken(token) => tables.put_token(token.clone()),
                Write::DeleteToken(token) => tables.delete_token(token),
                _ => {}
            }
        }
    }
}

impl UserLookup for AccountTable {
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
