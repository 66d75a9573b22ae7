//! The outbox: webhook events written in the same transaction as the change they report, so a
//! crash can neither lose an event nor invent one. Delivery reads them back later.

use serde::Serialize;
use uuid::Uuid;

use crate::error::PortError;
use crate::time::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    WalletCreated,
    DepositDetected,
    DepositConfirmed,
    DepositCredited,
    WithdrawalCreated,
    WithdrawalBroadcasted,
    WithdrawalConfirmed,
    WithdrawalFailed,
    SwapCreated,
    SwapConfirmed,
    SwapFailed,
    BalanceUpdated,
    WebhookTest,
}

impl EventType {
    pub const fn as_str(self) -> &'static str {
        use EventType::*;
        match self {
            WalletCreated => "wallet.created",
            DepositDetected => "deposit.detected",
            DepositConfirmed => "deposit.confirmed",
            DepositCredited => "deposit.credited",
            WithdrawalCreated => "withdrawal.created",
            WithdrawalBroadcasted => "withdrawal.broadcasted",
            WithdrawalConfirmed => "withdrawal.confirmed",
            WithdrawalFailed => "withdrawal.failed",
            SwapCreated => "swap.created",
            SwapConfirmed => "swap.confirmed",
            SwapFailed => "swap.failed",
            BalanceUpdated => "balance.updated",
            WebhookTest => "webhook.test",
        }
    }
}

impl Serialize for EventType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The envelope exactly as interface §6: nothing else.
#[derive(Debug, Clone, Serialize)]
pub struct Envelope<'a> {
    pub id: Uuid,
    pub event_type: EventType,
    pub created_at: Timestamp,
    pub data: &'a serde_json::Value,
}

/// An event to deliver to a tenant's endpoint. `body` is the serialized envelope; it is
/// fixed at creation so every retry sends the same bytes under the same id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub id: Uuid,
    pub tenant: String,
    pub event_type: EventType,
    pub body: Vec<u8>,
    pub created_at: Timestamp,
}

impl NewEvent {
    pub fn new(
        id: Uuid,
        tenant: &str,
        event_type: EventType,
        data: &serde_json::Value,
        created_at: Timestamp,
    ) -> Self {
        let envelope = Envelope {
            id,
            event_type,
            created_at,
            data,
        };
        let body = serde_json::to_vec(&envelope).expect("an envelope always serializes");
        NewEvent {
            id,
            tenant: tenant.to_owned(),
            event_type,
            body,
            created_at,
        }
    }
}

pub trait OutboxRepo {
    /// Queues an event for delivery, due at once.
    fn enqueue_event(&mut self, event: &NewEvent) -> Result<(), PortError>;
}
