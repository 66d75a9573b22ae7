//! Operator actions leave an audit trail: who, when, what it was, what it became, and why.

use serde::Serialize;
use uuid::Uuid;

use crate::error::PortError;
use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    pub id: Uuid,
    /// Credential id or `cli:<user>` of the operator.
    pub actor: String,
    pub action: String,
    pub target: String,
    pub old_value: Option<serde_json::Value>,
    pub new_value: Option<serde_json::Value>,
    pub reason: String,
    pub created_at: Timestamp,
}

pub trait AuditRepo {
    fn append_audit(&mut self, record: &AuditRecord) -> Result<(), PortError>;
    /// The newest `limit` records, newest first.
    fn list_audit(&mut self, limit: usize) -> Result<Vec<AuditRecord>, PortError>;
}
