//! Whether the hot wallet can fund a new payment (decisions §11): a payment it cannot fund is
//! not signed, stays where it is, and raises `hot_wallet_insufficient`; it goes out once the
//! wallet is funded. Pure arithmetic over what the chain says the wallet holds and what is
//! already on its way from it.

use crate::amount::Amount;
use crate::ports::sender::Payment;

use super::{Bid, OutStatus, OutgoingTx};

/// What the hot wallet holds on chain now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holdings {
    /// The native coin (wei, sun).
    pub native: Amount,
    /// The payment's token, when it pays one.
    pub token: Option<Amount>,
}

/// What a payment needs from the wallet: (native coin, token contract and units).
fn needs(payment: &Payment, max_fee_native: u128) -> (u128, Option<(&str, u128)>) {
    let s = payment.spends();
    (
        max_fee_native.saturating_add(s.native.units()),
        s.token.map(|(c, a)| (c, a.units())),
    )
}

/// The most an attempt's bid may burn (the TRON fee limit covers energy; bandwidth is small
/// and comes from free or staked resources first).
fn max_fee(bid: Bid) -> u128 {
    match bid {
        Bid::Gas {
            gas_limit,
            gas_price_wei,
        } => u128::from(gas_limit).saturating_mul(gas_price_wei),
        Bid::FeeLimit { sun } => u128::from(sun),
    }
}

/// Signed and not yet in a block: the chain's balance does not show it yet. Counted unless
/// every attempt of it was refused by a node (it waits for funds like the payment checked, and
/// counting it would make two such payments wait on each other); one stored and not yet
/// answered is on its way (its send is under way, or follows at once after a crash).
fn on_its_way(tx: &OutgoingTx) -> bool {
    matches!(tx.status, OutStatus::Signed | OutStatus::Sent)
        && tx.attempts.iter().any(|a| {
            a.sent_at.is_some() || a.last_answer.as_ref().is_none_or(|x| x.refusal().is_none())
        })
}

/// Why the wallet cannot fund `payment` at a worst-case fee of `max_fee_native`, beside the
/// unfinished transactions `in_flight` from the same wallet (the payment's own transaction, if
/// listed, is skipped by `own_id`); `None` when it can.
pub fn shortfall(
    payment: &Payment,
    max_fee_native: Amount,
    holdings: Holdings,
    in_flight: &[OutgoingTx],
    own_id: uuid::Uuid,
) -> Option<String> {
    let (mut native, own) = needs(payment, max_fee_native.units());
    let own_token = own.map(|(c, _)| c);
    let mut token = own.map_or(0, |(_, units)| units);
    for tx in in_flight.iter().filter(|t| t.id != own_id && on_its_way(t)) {
        let fee = tx
            .attempts
            .iter()
            .map(|a| max_fee(a.bid))
            .max()
            .unwrap_or(0);
        let (n, t) = needs(&tx.payment, fee);
        native = native.saturating_add(n);
        if let Some((contract, units)) = t {
            if own_token.is_some_and(|own| own.eq_ignore_ascii_case(contract)) {
                token = token.saturating_add(units);
            }
        }
    }
    let mut short = Vec::new();
    if holdings.native.units() < native {
        short.push(format!(
            "native coin: holds {}, needs {native} (fee and amount, with what is on its way)",
            holdings.native.units()
        ));
    }
    if token > 0 {
        let held = holdings.token.map_or(0, Amount::units);
        if held < token {
            short.push(format!(
                "token {}: holds {held}, needs {token}",
                own_token.unwrap_or("?")
            ));
        }
    }
    (!short.is_empty()).then(|| short.join("; "))
}

/// The payments of a wallet a funds check counted beside the one it checked (those on their
/// way). The write that stores the checked payment's new attempt compares it with what the
/// store holds then ([`FundsSeen::signed_since`]): a payment of the wallet on its way now that
/// the check did not count (signed in between by another instance, or a refused one accepted
/// since) means the check must run again. The store's writes are serializable, so of two such
/// writes racing, one sees the other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FundsSeen(std::collections::BTreeSet<uuid::Uuid>);

impl FundsSeen {
    /// What a check of payment `own_id` counts among `in_flight`.
    pub fn of(in_flight: &[OutgoingTx], own_id: uuid::Uuid) -> Self {
        FundsSeen(signed_others(in_flight, own_id).collect())
    }

    /// A payment of `in_flight` (other than `own_id`) signed since this check, if any.
    pub fn signed_since(&self, in_flight: &[OutgoingTx], own_id: uuid::Uuid) -> Option<uuid::Uuid> {
        signed_others(in_flight, own_id).find(|id| !self.0.contains(id))
    }
}

fn signed_others(
    in_flight: &[OutgoingTx],
    own_id: uuid::Uuid,
) -> impl Iterator<Item = uuid::Uuid> + '_ {
    in_flight
        .iter()
        .filter(move |t| t.id != own_id && on_its_way(t))
        .map(|t| t.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::Network;
    use crate::outgoing::{Attempt, Purpose};
    use crate::ports::signer::HdPath;
    use crate::time::Timestamp;
    use uuid::Uuid;

    fn payment(token: bool, amount: u128) -> Payment {
        if token {
            Payment::Token {
                contract: "usdt".into(),
                to: "to".into(),
                amount: Amount::from_units(amount),
            }
        } else {
            Payment::Native {
                to: "to".into(),
                amount: Amount::from_units(amount),
            }
        }
    }

    fn flying(id: u128, p: Payment, offered: bool, status: OutStatus) -> OutgoingTx {
        let mut t = OutgoingTx::new(
            Uuid::from_u128(id),
            Network::Bsc,
            Purpose::Withdrawal,
            Uuid::from_u128(id + 100),
            "hot".into(),
            HdPath {
                network: Network::Bsc,
                account: 2_147_483_647,
                index: 0,
            },
            p,
            Some(0),
            Timestamp::from_unix_millis(0),
        );
        t.attempts.push(Attempt {
            hash: format!("{id}"),
            raw: vec![],
            bid: Bid::Gas {
                gas_limit: 10,
                gas_price_wei: 2,
            },
            expires_at_ms: None,
            signed_at: Timestamp::from_unix_millis(0),
            sent_at: offered.then(|| Timestamp::from_unix_millis(0)),
            last_answer: None,
            plan: None,
            reference_block: None,
            void: false,
        });
        t.status = status;
        t
    }

    fn holds(native: u128, token: Option<u128>) -> Holdings {
        Holdings {
            native: Amount::from_units(native),
            token: token.map(Amount::from_units),
        }
    }

    #[test]
    fn a_native_payment_needs_its_amount_and_its_worst_fee() {
        let p = payment(false, 100);
        let own = Uuid::from_u128(9);
        assert_eq!(
            shortfall(&p, Amount::from_units(20), holds(120, None), &[], own),
            None
        );
        assert!(shortfall(&p, Amount::from_units(20), holds(119, None), &[], own).is_some());
    }

    #[test]
    fn a_token_payment_needs_the_token_and_the_fee_in_the_native_coin() {
        let p = payment(true, 100);
        let own = Uuid::from_u128(9);
        assert_eq!(
            shortfall(&p, Amount::from_units(20), holds(20, Some(100)), &[], own),
            None
        );
        let why = shortfall(&p, Amount::from_units(20), holds(19, Some(99)), &[], own).unwrap();
        assert!(
            why.contains("native coin") && why.contains("token usdt"),
            "{why}"
        );
    }

    #[test]
    fn what_is_on_its_way_counts_what_waits_or_is_mined_does_not() {
        let p = payment(false, 100);
        let own = Uuid::from_u128(9);
        let sent = flying(1, payment(false, 50), true, OutStatus::Sent);
        // 100 + 20 for us, 50 + 20 for the one sent.
        assert_eq!(
            shortfall(
                &p,
                Amount::from_units(20),
                holds(190, None),
                std::slice::from_ref(&sent),
                own
            ),
            None
        );
        assert!(shortfall(&p, Amount::from_units(20), holds(189, None), &[sent], own).is_some());
        // Refused by the node (waiting like us), already included (the balance shows it), or
        // our own transaction: none of these is counted.
        let mut waiting = flying(2, payment(false, 50), false, OutStatus::Signed);
        waiting.attempts[0].last_answer = Some(crate::ports::sender::BroadcastOutcome::Rejected(
            "insufficient funds for gas * price + value".into(),
        ));
        let included = flying(3, payment(false, 50), true, OutStatus::Included);
        let ours = flying(9, payment(false, 100), true, OutStatus::Sent);
        assert_eq!(
            shortfall(
                &p,
                Amount::from_units(20),
                holds(120, None),
                &[waiting, included, ours],
                own
            ),
            None
        );
    }

    #[test]
    fn one_signed_and_stored_but_not_yet_answered_is_on_its_way() {
        let p = payment(false, 100);
        let sending = flying(1, payment(false, 50), false, OutStatus::Signed);
        assert!(shortfall(
            &p,
            Amount::from_units(20),
            holds(189, None),
            std::slice::from_ref(&sending),
            Uuid::from_u128(9)
        )
        .is_some());
        // Counted by the check, it is no news to the write; another one signed since is.
        let seen = FundsSeen::of(std::slice::from_ref(&sending), Uuid::from_u128(9));
        assert_eq!(
            seen.signed_since(std::slice::from_ref(&sending), Uuid::from_u128(9)),
            None
        );
        let later = flying(3, payment(false, 50), false, OutStatus::Signed);
        assert_eq!(
            seen.signed_since(&[sending, later], Uuid::from_u128(9)),
            Some(Uuid::from_u128(3))
        );
    }

    #[test]
    fn other_tokens_on_their_way_do_not_count_against_this_token() {
        let p = payment(true, 100);
        let own = Uuid::from_u128(9);
        let mut other = flying(1, payment(true, 500), true, OutStatus::Sent);
        other.payment = Payment::Token {
            contract: "busd".into(),
            to: "to".into(),
            amount: Amount::from_units(500),
        };
        assert_eq!(
            shortfall(
                &p,
                Amount::from_units(0),
                holds(20, Some(100)),
                &[other],
                own
            ),
            None
        );
    }
}
