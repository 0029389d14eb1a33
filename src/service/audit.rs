//! The evidence audit from the command line: every chain checked in the database
//! (`audit verify`), exported as JSON lines (`audit export`), and an export checked offline
//! (`audit verify --file`) by the same rules, reported the same way.

use time::OffsetDateTime;

use crate::domain::evidence::{ExportedLink, verify_exported};
use crate::service::database::{Database, StoreError};
use crate::store::AuditReport;

/// Artifacts are exported a page at a time, so a long chain never has to fit in memory at once.
const EXPORT_PAGE: i64 = 1_000;

/// An export in progress: each chain from its first link to its last artifact recorded by the
/// export's time, chain after chain ([`EvidenceExport::next_page`]).
pub struct EvidenceExport<'a> {
    database: &'a Database,
    /// The chains left, each with the last place it is exported to, in reverse order.
    chains: Vec<(String, i64)>,
    /// The last place exported of the chain at the end of `chains`.
    after: i64,
}

impl Database {
    /// Starts an export of every chain's artifacts recorded by `until`.
    pub async fn export_evidence(&self, until: OffsetDateTime) -> Result<EvidenceExport<'_>, StoreError> {
        let mut chains = self.store().evidence().export_cuts(until).await?;
        chains.reverse();
        Ok(EvidenceExport { database: self, chains, after: 0 })
    }
}

impl EvidenceExport<'_> {
    /// The next links in order, or `None` once every chain is exported.
    pub async fn next_page(&mut self) -> Result<Option<Vec<ExportedLink>>, StoreError> {
        while let Some((chain_id, cut)) = self.chains.last() {
            let evidence = self.database.store().evidence();
            let page = evidence.export_links(chain_id, self.after, *cut, EXPORT_PAGE).await?;
            match page.last() {
                Some(last) => {
                    self.after = last.seq;
                    return Ok(Some(page));
                }
                None => {
                    self.chains.pop();
                    self.after = 0;
                }
            }
        }
        Ok(None)
    }
}

/// An export's chains checked offline, each from its first link (after the checkpoint it names),
/// as `audit verify` reports the database's.
pub fn verify_export(links: impl IntoIterator<Item = ExportedLink>) -> AuditReport {
    let mut report = AuditReport { chains: vec![], first_break: None };
    for chain in verify_exported(links) {
        report.add(chain.chain_id, chain.checkpoint, chain.checked);
    }
    report
}
