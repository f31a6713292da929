//! Webhook secrets sealed anew: at start, to seal the secrets stored in
//! clear once a key is set (and to check the key), and for `rolecall admin
//! rekey`. The rows are locked from the read to the commit, and every one
//! changes or none does.

use super::batch::statements;
use super::error::from_pg;
use super::transact::{finish_transaction, query};
use super::{rows, PgStore};
use crate::domain::change::Write;
use crate::domain::org_state::Edit;
use crate::secrets::{SealingKey, Secret};
use crate::storage::sealed::Rekeyed;
use crate::storage::StoreError;

impl PgStore {
    /// Stores every webhook secret sealed with `to` (or in clear), opening
    /// it with `from` (or reading it in clear) first; leaves a row already
    /// so as it is. A secret that does not open is replaced by
    /// `replace_unreadable`, or refuses the whole change.
    pub(super) async fn reseal(
        &self,
        from: Option<&SealingKey>,
        to: Option<&SealingKey>,
        replace_unreadable: Option<fn() -> Secret>,
    ) -> Result<Rekeyed, StoreError> {
        let sql = format!("SELECT {} FROM webhooks FOR UPDATE", rows::WEBHOOK);
        self.database
            .with("resealing secrets", async |client| {
                client.batch_execute("BEGIN").await.map_err(from_pg)?;
                let mut rekeyed = Rekeyed::default();
                let mut writes = Vec::new();
                for row in &query(client, &sql, &[]).await? {
                    let stored = rows::webhook(row)?;
                    if let Some(endpoint) = rekeyed.reseal(stored, from, to, replace_unreadable)? {
                        writes.push(Write::Edit(Edit::PutWebhook(endpoint)));
                    }
                }
                // Sealed already: written as they are.
                let statements = statements(writes.iter(), None)?;
                finish_transaction(client, &statements).await?;
                Ok(rekeyed)
            })
            .await
    }
}
