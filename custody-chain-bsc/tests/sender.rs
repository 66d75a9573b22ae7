//! `BscSender` against a real EVM node (anvil, chain id 56): transactions built here, signed by
//! the core's `HdSigner` with anvil's own mnemonic, assembled, broadcast and looked up.

use std::sync::Arc;

use custody_chain_bsc::{BscChain, BscSender, BscSenderSettings, BscSettings};
use custody_core::address::BscAddress;
use custody_core::amount::Amount;
use custody_core::asset::{Asset, AssetKind};
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::ports::sender::{
    BroadcastOutcome, BuildRequest, ChainSender, FeeBid, MoveKind, Payment, SignedTx, TxLookup,
};
use custody_core::ports::signer::HdPath;
use custody_core::ports::Signer;
use custody_core::Network;
use custody_e2e::anvil::Anvil;

const ANVIL_MNEMONIC: &str = "test test test test test test test test test test test junk";
const RECIPIENT: &str = "0x00000000000000000000000000000000000000C0";
const GWEI: u128 = 1_000_000_000;

fn eip55(a: &str) -> String {
    BscAddress::parse(&a.to_lowercase()).unwrap().to_string()
}

struct Fixture {
    anvil: Anvil,
    sender: BscSender,
    signer: HdSigner,
    from: String,
}

fn fixture() -> Option<Fixture> {
    let anvil = Anvil::start()?;
    let chain = BscChain::new(BscSettings {
        urls: vec![anvil.url()],
        chain_id: 56,
        assets: vec![Asset {
            network: Network::Bsc,
            code: "BNB".into(),
            kind: AssetKind::Native,
            decimals: 18,
            contract: None,
        }],
        ..BscSettings::default()
    })
    .unwrap();
    let signer = HdSigner::from_seed(&Mnemonic::parse(ANVIL_MNEMONIC).unwrap().to_seed()).unwrap();
    let from = eip55(anvil.account(0));
    Some(Fixture {
        sender: BscSender::new(Arc::new(chain), BscSenderSettings::default()),
        anvil,
        signer,
        from,
    })
}

const PATH: HdPath = HdPath {
    network: Network::Bsc,
    account: 0,
    index: 0,
};

impl Fixture {
    async fn signed(&self, payment: Payment, nonce: u64, bid: FeeBid) -> SignedTx {
        let unsigned = self
            .sender
            .build(&BuildRequest {
                from: self.from.clone(),
                payment,
                nonce: Some(nonce),
                bid,
            })
            .await
            .unwrap();
        let sig = self.signer.sign_digest(&PATH, &unsigned.digest).unwrap();
        self.sender.assemble(&unsigned, &sig).unwrap()
    }

    /// Looks `hash` up until it is in a block (anvil's automine mines just after answering).
    async fn included(&self, hash: &str) -> TxLookup {
        for _ in 0..50 {
            let found = self.sender.lookup(hash).await.unwrap();
            if matches!(found, TxLookup::Included(_)) {
                return found;
            }
            tokio::time::sleep(std::time::Duration::from_millis(40)).await;
        }
        self.sender.lookup(hash).await.unwrap()
    }

    async fn nonce(&self) -> u64 {
        self.sender
            .confirmed_nonce(&self.from)
            .await
            .unwrap()
            .unwrap()
    }
}

fn native(units: u128) -> Payment {
    Payment::Native {
        to: RECIPIENT.into(),
        amount: Amount::from_units(units),
    }
}

fn gas(limit: u64, price: u128) -> FeeBid {
    FeeBid::Gas {
        gas_limit: limit,
        gas_price_wei: price,
    }
}

#[tokio::test]
async fn a_bnb_payment_goes_through_with_the_nodes_hash() {
    let Some(f) = fixture() else { return };
    let estimate = f.sender.price(&f.from, &native(1)).await.unwrap();
    let FeeBid::Gas {
        gas_limit,
        gas_price_wei,
    } = estimate.bid
    else {
        panic!("gas")
    };
    assert_eq!(gas_limit, 21_000);
    assert_eq!(estimate.max_native.units(), 21_000 * gas_price_wei);
    let signed = f
        .signed(native(3 * GWEI), f.nonce().await, estimate.bid)
        .await;
    assert_eq!(
        f.sender.broadcast(&signed).await,
        BroadcastOutcome::Accepted
    );
    let looked = f.included(&signed.hash).await;
    let TxLookup::Included(i) = looked else {
        panic!("automine includes it: {looked:?}")
    };
    assert!(i.succeeded);
    assert_eq!(i.fee_native.units(), 21_000 * gas_price_wei);
    let receipt = f.anvil.mined(&format!("0x{}", signed.hash));
    assert_eq!(receipt["transactionHash"], format!("0x{}", signed.hash));
    assert_eq!(f.anvil.balance(RECIPIENT), 3 * GWEI);
    // The same bytes again, now mined: the nonce is used (the engine then looks it up).
    assert_eq!(
        f.sender.broadcast(&signed).await,
        BroadcastOutcome::NonceUsed
    );
    let (head, time) = f.sender.head().await.unwrap();
    assert!(head >= i.block_number && time > 0);
}

#[tokio::test]
async fn token_payments_are_priced_by_the_node_and_a_revert_is_included_failed() {
    let Some(f) = fixture() else { return };
    let owner = f.anvil.account(0).to_owned();
    let token = f.anvil.deploy_token(&owner, "Test", "TST");
    f.anvil.mint(&token, &owner, &owner, 1_000);
    let pay = |units| Payment::Token {
        contract: eip55(&token),
        to: RECIPIENT.into(),
        amount: Amount::from_units(units),
    };
    let estimate = f.sender.price(&f.from, &pay(400)).await.unwrap();
    let FeeBid::Gas { gas_limit, .. } = estimate.bid else {
        panic!("gas")
    };
    assert!(gas_limit > 21_000 && estimate.max_native > estimate.expected_native);
    let signed = f.signed(pay(400), f.nonce().await, estimate.bid).await;
    assert_eq!(
        f.sender.broadcast(&signed).await,
        BroadcastOutcome::Accepted
    );
    let TxLookup::Included(paid) = f.included(&signed.hash).await else {
        panic!("included")
    };
    assert!(paid.succeeded);
    // Its receipt shows the Transfer the core requires before it counts a token payment paid,
    // in address forms it compares without case.
    let transfers: Vec<_> = paid
        .moves
        .iter()
        .map(|m| {
            (
                m.kind,
                m.contract.to_lowercase(),
                m.from.to_lowercase(),
                m.to.to_lowercase(),
                m.amount,
            )
        })
        .collect();
    assert_eq!(
        transfers,
        [(
            MoveKind::Transfer,
            token.to_lowercase(),
            f.from.to_lowercase(),
            RECIPIENT.to_lowercase(),
            Amount::from_units(400)
        )]
    );
    assert_eq!(f.anvil.token_balance(&token, RECIPIENT), 400);
    let (_, held) = f
        .sender
        .balances(RECIPIENT, Some(&eip55(&token)))
        .await
        .unwrap();
    assert_eq!(held, Some(Amount::from_units(400)));

    // More than the sender holds: the node cannot estimate it, so it is priced at the bound
    // of a token transfer (the payment waits for the tokens); sent anyway, it reverts.
    let bounded = f.sender.price(&f.from, &pay(10_000)).await.unwrap();
    let FeeBid::Gas { gas_limit, .. } = bounded.bid else {
        panic!("{bounded:?}")
    };
    assert_eq!(gas_limit, 100_000);
    let reverting = f
        .signed(pay(10_000), f.nonce().await, gas(80_000, 2 * GWEI))
        .await;
    assert_eq!(
        f.sender.broadcast(&reverting).await,
        BroadcastOutcome::Accepted
    );
    let TxLookup::Included(i) = f.included(&reverting.hash).await else {
        panic!("included")
    };
    assert!(!i.succeeded, "a reverted transfer is included, failed");
    let (_, now_ms) = f.sender.head().await.unwrap();
    assert!(
        i.block_time_ms.is_some_and(|t| t > 0 && t <= now_ms),
        "with its block's time: {i:?}"
    );
    assert!(i.fee_native.units() > 0, "and still pays its gas");
}

#[tokio::test]
async fn a_signature_of_another_account_is_never_assembled() {
    let Some(f) = fixture() else { return };
    let unsigned = f
        .sender
        .build(&BuildRequest {
            from: f.from.clone(),
            payment: native(GWEI),
            nonce: Some(f.nonce().await),
            bid: gas(21_000, 2 * GWEI),
        })
        .await
        .unwrap();
    // Anvil's second account, funded like the first: a node would take it, from the wrong
    // account.
    let other = HdPath { index: 1, ..PATH };
    let sig = f.signer.sign_digest(&other, &unsigned.digest).unwrap();
    let e = f.sender.assemble(&unsigned, &sig).unwrap_err();
    assert!(e.message.contains("does not recover to the sender"), "{e}");
}

#[tokio::test]
async fn a_bnb_swap_beyond_the_senders_balance_is_priced_at_the_swap_bound() {
    let Some(f) = fixture() else { return };
    let held = f.anvil.balance(&f.from);
    let swap = |wei: u128| Payment::Swap {
        router: eip55("0x10ed43c718714eb63d5aa57b78b54704e256024e"),
        path: vec![
            eip55("0xbb4cdb9cbd36b01bd1cbaebf2de08d9173bc095c"),
            eip55("0x55d398326f99059ff775485246999027b3197955"),
        ],
        amount_in: Amount::from_units(wei),
        min_out: Amount::ZERO,
        native_in: true,
        native_out: false,
        to: f.from.clone(),
        deadline_s: u64::MAX,
    };
    // The node answers "insufficient funds" for a value above the balance: not a node that is
    // down, so the quote is priced at the bound of a one-hop swap (the swap waits for funds).
    let bounded = f.sender.price(&f.from, &swap(held + 1)).await.unwrap();
    let FeeBid::Gas {
        gas_limit,
        gas_price_wei,
    } = bounded.bid
    else {
        panic!("{bounded:?}")
    };
    assert_eq!(gas_limit, 250_000);
    assert_eq!(bounded.expected_native.units(), 250_000 * gas_price_wei);
    // Within the balance the node estimates it (no router at that address: a plain call).
    let estimated = f.sender.price(&f.from, &swap(1)).await.unwrap();
    assert!(estimated.expected_native < bounded.expected_native);
}

#[tokio::test]
async fn pending_replacements_and_one_inclusion_per_nonce() {
    let Some(f) = fixture() else { return };
    f.anvil.set_automine(false);
    let nonce = f.nonce().await;
    let first = f.signed(native(1), nonce, gas(21_000, 10 * GWEI)).await;
    assert_eq!(f.sender.broadcast(&first).await, BroadcastOutcome::Accepted);
    assert_eq!(
        f.sender.broadcast(&first).await,
        BroadcastOutcome::Accepted,
        "already known"
    );
    assert_eq!(
        f.sender.lookup(&first.hash).await.unwrap(),
        TxLookup::Pending
    );
    // Another payment of the same nonce at the same price: a node keeps the first.
    let cheap = f.signed(native(2), nonce, gas(21_000, 10 * GWEI)).await;
    assert_eq!(
        f.sender.broadcast(&cheap).await,
        BroadcastOutcome::Underpriced
    );
    let better = f.signed(native(1), nonce, gas(21_000, 12 * GWEI)).await;
    assert_eq!(
        f.sender.broadcast(&better).await,
        BroadcastOutcome::Accepted
    );
    f.anvil.mine(1);
    let looks = [
        f.sender.lookup(&first.hash).await.unwrap(),
        f.included(&better.hash).await,
    ];
    assert_eq!(looks[0], TxLookup::Unknown, "replaced, never mined");
    assert!(matches!(&looks[1], TxLookup::Included(i) if i.succeeded));
    assert_eq!(f.anvil.balance(RECIPIENT), 1, "paid once");
    assert_eq!(
        f.sender.lookup(&"ab".repeat(32)).await.unwrap(),
        TxLookup::Unknown
    );
}

#[tokio::test]
async fn a_node_that_never_answers_is_unknown_never_a_refusal() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    // Accept and hold connections without answering.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let chain = BscChain::new(BscSettings {
        urls: vec![url],
        chain_id: 56,
        request_timeout_ms: 300,
        assets: vec![Asset {
            network: Network::Bsc,
            code: "BNB".into(),
            kind: AssetKind::Native,
            decimals: 18,
            contract: None,
        }],
        ..BscSettings::default()
    })
    .unwrap();
    let sender = BscSender::new(Arc::new(chain), BscSenderSettings::default());
    let outcome = sender
        .broadcast(&SignedTx {
            hash: "00".repeat(32),
            raw: vec![0xc0],
        })
        .await;
    assert!(
        matches!(outcome, BroadcastOutcome::Unknown(_)),
        "{outcome:?}"
    );
}

/// BNB to a contract (F7): the node's estimate with a margin instead of 21,000 gas (which would
/// fail and burn), and a contract that reverts on BNB is refused at pricing, never sent.
#[tokio::test]
async fn bnb_to_a_contract_is_priced_by_the_node_and_a_refusing_contract_is_refused() {
    let Some(f) = fixture() else { return };
    // A receiver whose code stores what it is sent (CALLVALUE PUSH1 0 SSTORE STOP), as a Safe
    // or an exchange's deposit contract runs code on receipt: about 43,000 gas.
    let receiver = eip55("0x00000000000000000000000000000000000000c1");
    f.anvil.rpc(
        "anvil_setCode",
        serde_json::json!([receiver, "0x3460005500"]),
    );
    let to = |address: &str, units: u128| Payment::Native {
        to: address.to_owned(),
        amount: Amount::from_units(units),
    };
    let estimate = f
        .sender
        .price(&f.from, &to(&receiver, 3 * GWEI))
        .await
        .unwrap();
    let FeeBid::Gas { gas_limit, .. } = estimate.bid else {
        panic!("gas")
    };
    assert!(gas_limit > 40_000, "{estimate:?}");
    let signed = f
        .signed(to(&receiver, 3 * GWEI), f.nonce().await, estimate.bid)
        .await;
    assert_eq!(
        f.sender.broadcast(&signed).await,
        BroadcastOutcome::Accepted
    );
    let TxLookup::Included(i) = f.included(&signed.hash).await else {
        panic!("automine includes it")
    };
    assert!(i.succeeded, "the contract took the BNB");
    assert_eq!(f.anvil.balance(&receiver), 3 * GWEI);
    // With 21,000 gas the same payment fails on chain and burns its gas: what F7 prevents.
    let starved = f
        .signed(to(&receiver, GWEI), f.nonce().await, gas(21_000, GWEI * 5))
        .await;
    f.sender.broadcast(&starved).await;
    let looked = f.included(&starved.hash).await;
    assert!(
        !matches!(looked, TxLookup::Included(ref i) if i.succeeded),
        "{looked:?}"
    );
    // A token contract has no payable fallback: it reverts on BNB, and is refused.
    let token = f.anvil.deploy_token(&f.from, "Token", "TKN");
    let refused = f
        .sender
        .price(&f.from, &to(&eip55(&token), 1))
        .await
        .unwrap_err();
    assert_eq!(
        refused.port,
        custody_core::ports::sender::DESTINATION_REFUSES,
        "{refused:?}"
    );
    // Beyond the hot wallet's balance the node cannot tell: the contract bound stands in.
    let held = f.anvil.balance(&f.from);
    let bounded = f
        .sender
        .price(&f.from, &to(&receiver, held + 1))
        .await
        .unwrap();
    assert!(
        matches!(bounded.bid, FeeBid::Gas { gas_limit, .. } if gas_limit == custody_chain_bsc::CONTRACT_NATIVE_GAS),
        "{bounded:?}"
    );
    // An address without code is priced at 21,000 as before.
    let plain = f.sender.price(&f.from, &native(1)).await.unwrap();
    assert!(matches!(
        plain.bid,
        FeeBid::Gas {
            gas_limit: 21_000,
            ..
        }
    ));
}

#[tokio::test]
async fn what_took_a_nonce_is_read_from_its_block_once_it_is_final() {
    let Some(f) = fixture() else { return };
    let start = f.nonce().await;
    // Automine: each payment in a block of its own.
    let mut hashes = Vec::new();
    for i in 0..5 {
        let signed = f.signed(native(1), start + i, gas(21_000, 10 * GWEI)).await;
        assert_eq!(
            f.sender.broadcast(&signed).await,
            BroadcastOutcome::Accepted
        );
        f.included(&signed.hash).await;
        hashes.push(signed.hash);
    }
    // The newest is one block deep: not final at 3 confirmations; the one before it is... not
    // either (2 deep); the third from the end is.
    let at = |nonce: u64, confirmations: u32| {
        let sender = &f.sender;
        let from = f.from.clone();
        async move {
            sender
                .final_transaction_at_nonce(&from, nonce, confirmations)
                .await
                .unwrap()
        }
    };
    assert_eq!(at(start + 4, 3).await, None, "not deep enough");
    assert_eq!(at(start + 2, 3).await, Some(hashes[2].clone()));
    assert_eq!(at(start, 3).await, Some(hashes[0].clone()));
    assert_eq!(at(start + 4, 1).await, Some(hashes[4].clone()));
    assert_eq!(at(start + 5, 1).await, None, "never used");
    f.anvil.mine(3);
    assert_eq!(at(start + 4, 3).await, Some(hashes[4].clone()));
}
