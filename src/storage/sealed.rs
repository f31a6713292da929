//! Webhook secrets at rest, for every engine: sealed with
//! `storage.secret_key` (the organization id as associated data) when one
//! is set, opened again as they are read.

use crate::domain::webhook::WebhookEndpoint;
use crate::ids::OrgId;
use crate::secrets::{SealingKey, Secret};
use crate::storage::StoreError;

/// `endpoint` as stored: its secret sealed with `key`, if any.
pub fn sealed(
    endpoint: &WebhookEndpoint,
    key: Option<&SealingKey>,
) -> Result<WebhookEndpoint, StoreError> {
    let mut stored = endpoint.clone();
    if let Some(key) = key {
        let text = key.seal(endpoint.organization_id.as_bytes(), &endpoint.secret)?;
        stored.secret = Secret::new(text);
    }
    Ok(stored)
}

/// `endpoint` with its secret opened, when it is sealed: with `key`, which
/// must be the one it was sealed with.
pub fn opened(
    endpoint: WebhookEndpoint,
    key: Option<&SealingKey>,
) -> Result<WebhookEndpoint, StoreError> {
    if !SealingKey::is_sealed(endpoint.secret.expose()) {
        return Ok(endpoint);
    }
    let Some(key) = key else {
        return Err(StoreError::SecretKey(
            "the stored webhook secrets are encrypted, and no storage.secret_key is set: \
             set it (or storage.secret_key_file) to the key they were encrypted with"
                .into(),
        ));
    };
    let secret = key
        .open(
            endpoint.organization_id.as_bytes(),
            endpoint.secret.expose(),
        )
        .map_err(|_| {
            StoreError::SecretKey(
                "storage.secret_key does not decrypt the stored webhook secrets: it is not the \
                 key they were encrypted with (rolecall admin rekey changes keys)"
                    .into(),
            )
        })?;
    Ok(WebhookEndpoint { secret, ..endpoint })
}

/// What `rolecall admin rekey` changed.
#[derive(Debug, Default)]
pub struct Rekeyed {
    /// Secrets stored anew (re-encrypted, or stored in clear).
    pub changed: usize,
    /// Organizations whose secret did not open and was replaced.
    pub replaced: Vec<OrgId>,
}

impl Rekeyed {
    /// `stored` resealed as [`reseal`] does, counted; `None` when it stays
    /// as it is.
    pub fn reseal(
        &mut self,
        stored: WebhookEndpoint,
        from: Option<&SealingKey>,
        to: Option<&SealingKey>,
        replace_unreadable: Option<fn() -> Secret>,
    ) -> Result<Option<WebhookEndpoint>, StoreError> {
        let org = stored.organization_id;
        let endpoint = match reseal(stored, from, to, replace_unreadable)? {
            Resealed::Unchanged => return Ok(None),
            Resealed::Changed(endpoint) => endpoint,
            Resealed::Replaced(endpoint) => {
                self.replaced.push(org);
                endpoint
            }
        };
        self.changed += 1;
        Ok(Some(endpoint))
    }
}

/// What resealing a stored endpoint comes to (see [`reseal`]).
enum Resealed {
    /// Already stored as `to` wants it: nothing to write.
    Unchanged,
    /// Store this instead.
    Changed(WebhookEndpoint),
    /// Its secret did not open and was replaced by this new one.
    Replaced(WebhookEndpoint),
}

/// `stored` sealed with `to` (or in clear), opened with `from` (or read in
/// clear) first. A secret that does not open is replaced by
/// `replace_unreadable`, or refuses. Opening checks the key even when
/// nothing is to change.
fn reseal(
    stored: WebhookEndpoint,
    from: Option<&SealingKey>,
    to: Option<&SealingKey>,
    replace_unreadable: Option<fn() -> Secret>,
) -> Result<Resealed, StoreError> {
    let already = SealingKey::is_sealed(stored.secret.expose()) == to.is_some();
    let same_key = from.map(|k| k.expose()) == to.map(|k| k.expose());
    match (opened(stored.clone(), from), replace_unreadable) {
        (Ok(_), _) if already && same_key => Ok(Resealed::Unchanged),
        (Ok(endpoint), _) => Ok(Resealed::Changed(sealed(&endpoint, to)?)),
        (Err(StoreError::SecretKey(_)), Some(new_secret)) => {
            let endpoint = WebhookEndpoint {
                secret: new_secret(),
                ..stored
            };
            Ok(Resealed::Replaced(sealed(&endpoint, to)?))
        }
        (Err(err), _) => Err(err),
    }
}
