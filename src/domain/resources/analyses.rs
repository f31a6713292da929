//! Pull-request analyses (CONTRACT §7): the scanner reports findings that
//! name decisions; an admin accepts the results.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::representation::representation;
use crate::domain::resources::fields;
use crate::domain::resources::{Resource, ResourceKind};
use crate::ids::ResourceId;
use crate::time::Timestamp;

/// Most findings in one analysis.
pub const FINDINGS_MAX: usize = 100;

/// An analysis' status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AnalysisStatus {
    /// Reported, awaiting review.
    Proposed,
    /// Accepted by an admin.
    Accepted,
}

/// One finding: a change that concerns a decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// A decision of the same organization.
    pub decision_id: ResourceId,
    /// What the change does (1..=2000 characters).
    pub summary: String,
}

/// An analysis; also its REST representation and its events' `data`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Analysis {
    /// Id.
    pub id: ResourceId,
    /// The repository (1..=200 characters).
    pub repository: String,
    /// The pull request's number.
    pub number: u64,
    /// Findings.
    pub findings: Vec<Finding>,
    /// Status.
    pub status: AnalysisStatus,
    /// When it was reported.
    pub created_at: Timestamp,
}

impl Resource for Analysis {
    const KIND: ResourceKind = ResourceKind::Analysis;
    const NAME: &'static str = "analysis";
    fn id(&self) -> ResourceId {
        self.id
    }
    fn touch(&mut self, _: Timestamp) {}
}

/// Body of `POST …/pull-requests/analyses`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportAnalysis {
    repository: String,
    /// 1..=2^63-1 (the document's `int64`); `7.0` counts as 7, as in JSON Schema.
    #[serde(deserialize_with = "integral")]
    number: u64,
    findings: Vec<Finding>,
}

/// Largest pull-request number: the largest `int64`, as documented.
pub const NUMBER_MAX: u64 = i64::MAX as u64;

/// A JSON integer, written either way JSON Schema counts as one (`7` or `7.0`).
fn integral<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let number = serde_json::Number::deserialize(deserializer)?;
    if let Some(n) = number.as_u64() {
        return Ok(n);
    }
    match number.as_f64() {
        Some(f) if f.fract() == 0.0 && (0.0..=NUMBER_MAX as f64).contains(&f) => Ok(f as u64),
        Some(f) if f.fract() == 0.0 && f > 0.0 => Ok(u64::MAX),
        _ => Err(serde::de::Error::custom(format!(
            "must be an integer from 1 to {NUMBER_MAX}"
        ))),
    }
}

impl ReportAnalysis {
    /// A validated proposed analysis (decision references are checked by the caller).
    pub fn build(self) -> Result<Analysis, ApiError> {
        if self.number == 0 || self.number > NUMBER_MAX {
            return Err(ApiError::invalid(
                "number",
                format!("must be an integer from 1 to {NUMBER_MAX}"),
            ));
        }
        if self.findings.len() > FINDINGS_MAX {
            return Err(ApiError::invalid(
                "findings",
                format!("must have at most {FINDINGS_MAX} entries"),
            ));
        }
        let findings = self
            .findings
            .into_iter()
            .map(|f| {
                Ok(Finding {
                    summary: fields::short_text("findings.summary", &f.summary, 2000)?,
                    ..f
                })
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        Ok(Analysis {
            id: ResourceId::generate(),
            repository: fields::title("repository", &self.repository)?,
            number: self.number,
            findings,
            status: AnalysisStatus::Proposed,
            created_at: Timestamp::now(),
        })
    }
}

/// `pr.violation_detected` data: the analysis plus the violating finding.
pub fn violation_data(
    analysis: &Analysis,
    finding: &Finding,
) -> Result<serde_json::Value, ApiError> {
    representation(&Violation { analysis, finding })
}

/// The `data` of `pr.violation_detected`: the analysis as the REST API
/// returns it, and the finding that conflicts with an accepted decision.
#[derive(Serialize)]
pub struct Violation<'a> {
    /// The analysis.
    #[serde(flatten)]
    pub analysis: &'a Analysis,
    /// The finding.
    pub finding: &'a Finding,
}
