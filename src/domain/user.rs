//! Users and the records of their bearer tokens.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::{TokenId, UserId};
use crate::time::Timestamp;

/// A user account, stored and returned as is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct User {
    /// The user's id.
    pub id: UserId,
    /// Unique (case-insensitively) email.
    pub email: String,
    /// Display name, if given.
    pub name: Option<String>,
    /// When the user was created.
    pub created_at: Timestamp,
}

/// What a token is for; both act as their user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenKind {
    /// A dashboard session.
    Session,
    /// A service-to-service API token.
    Api,
}

/// A token as stored: only the SHA-256 of the secret is kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// The token's id (for revocation).
    pub id: TokenId,
    /// The user it acts as.
    pub user_id: UserId,
    /// Session or API.
    pub kind: TokenKind,
    /// A label, if given.
    pub name: Option<String>,
    /// SHA-256 of the plaintext token.
    pub sha256: [u8; 32],
    /// When it was issued.
    pub created_at: Timestamp,
}
