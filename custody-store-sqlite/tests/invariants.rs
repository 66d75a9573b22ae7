//! A broken invariant latches `kill_switch.global` through the `InvariantGuard`, and money stops
//! (internal transfers, deposit crediting) until an operator turns the switch off.

use std::sync::Arc;

use custody_core::admin::{restricted, set_control};
use custody_core::deposit::{
    self, Applied, DepositFilter, DepositStatus, PipelineSettings, WatchSet,
};
use custody_core::error::{CoreError, ErrorCode};
use custody_core::invariants::{InvariantGuard, GLOBAL_KILL_SWITCH, LATCH_ACTOR};
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::ledger::{self, ReferenceType, TxMeta, UserAccount};
use custody_core::ports::chain::{BlockHeader, ObservedTransfer, ScannedBlock};
use custody_core::ports::store::{read, write};
use custody_core::ports::{Clock, Entropy, Store};
use custody_core::transfer::{self, TransferIds, TransferRequest};
use custody_core::vault::SealingKey;
use custody_core::{Amount, AssetCatalog, AssetId, Network, Timestamp};
use custody_store_sqlite::{SqliteStore, StoreOptions};
use uuid::Uuid;

const NOW: Timestamp = Timestamp::from_unix_millis(1_800_000_000_000);

struct FixedClock;
impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        NOW
    }
}

struct RandomEntropy;
impl Entropy for RandomEntropy {
    fn fill(&self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(16) {
            let id = Uuid::new_v4();
            chunk.copy_from_slice(&id.as_bytes()[..chunk.len()]);
        }
    }
}

fn ids() -> TransferIds {
    TransferIds {
        transfer: Uuid::new_v4(),
        ledger_tx: Uuid::new_v4(),
        sender_event: Uuid::new_v4(),
        recipient_event: Uuid::new_v4(),
    }
}

fn usdt() -> AssetId {
    AssetId::new(Network::Bsc, "USDT".to_owned())
}

async fn transfer_one(store: &dyn Store) -> Result<(), CoreError> {
    let req = TransferRequest {
        tenant: "t".into(),
        sender: "alice".into(),
        recipient: "bob".into(),
        network: Network::Bsc,
        asset: "USDT".into(),
        amount: Amount::from_units(1),
    };
    write(store, move |tx| {
        transfer::execute(tx, ids(), &req, NOW).map(|_| ())
    })
    .await
}

fn block(number: u64, to: &str) -> ScannedBlock {
    let hash = |n: u64| format!("{n:064x}");
    ScannedBlock {
        header: BlockHeader {
            number,
            hash: hash(number),
            parent_hash: hash(number - 1),
            timestamp_ms: 0,
        },
        transfers: if number == 2 {
            vec![ObservedTransfer {
                tx_hash: "bb".repeat(32),
                log_index: Some(0),
                asset_code: "USDT".into(),
                from: "0x0000000000000000000000000000000000000001".into(),
                to: to.to_owned(),
                amount: Amount::from_units(7),
                succeeded: true,
            }]
        } else {
            Vec::new()
        },
    }
}

#[tokio::test]
async fn a_broken_invariant_latches_the_global_kill_switch_and_money_stops() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn Store> = Arc::new(
        SqliteStore::open(
            &dir.path().join("custody.db"),
            SealingKey::from_bytes([5; 32]),
            Arc::new(RandomEntropy),
            StoreOptions::default(),
        )
        .unwrap(),
    );
    let store = InvariantGuard::new(sqlite, Arc::new(FixedClock), Arc::new(RandomEntropy));

    // Two users of one tenant; alice holds 10 USDT.
    let phrase = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
    let signer =
        Arc::new(HdSigner::from_seed(&Mnemonic::parse(phrase).unwrap().to_seed()).unwrap());
    let mut address = String::new();
    for user in ["alice", "bob"] {
        let signer = Arc::clone(&signer);
        let ids = [Uuid::new_v4(), Uuid::new_v4()];
        let created = write(&store, move |tx| {
            custody_core::wallet::create_wallet(
                tx,
                signer.as_ref(),
                ids,
                "t",
                user,
                Network::Bsc,
                NOW,
            )
        })
        .await
        .unwrap();
        if user == "bob" {
            address = created.wallet.address;
        }
    }
    write(&store, |tx| {
        let meta = TxMeta {
            id: Uuid::new_v4(),
            reference_type: ReferenceType::Deposit,
            reference_id: Uuid::new_v4(),
            created_at: NOW,
        };
        let alice = UserAccount::new("t".to_owned(), "alice".to_owned(), usdt());
        Ok(ledger::credit_deposit(
            tx,
            &meta,
            &alice,
            Amount::from_units(10),
        )?)
    })
    .await
    .unwrap();
    transfer_one(&store).await.unwrap();

    // A job that finds the books broken: answered as an invariant error, and the switch latches.
    let broken = write(&store, |_tx| -> Result<(), CoreError> {
        Err(CoreError::Invariant(
            "forced: account totals disagree".into(),
        ))
    })
    .await;
    assert!(matches!(broken, Err(CoreError::Invariant(_))), "{broken:?}");
    let (control, alerts, audit) = read(&store, |tx| {
        Ok((
            tx.control(GLOBAL_KILL_SWITCH)?,
            tx.list_alerts(10)?,
            tx.list_audit(10)?,
        ))
    })
    .await
    .unwrap();
    let control = control.expect("the switch is recorded");
    assert!(control.enabled);
    assert_eq!(control.updated_by, LATCH_ACTOR);
    assert!(control.reason.contains("account totals disagree"));
    assert_eq!(alerts.len(), 1);
    assert_eq!(
        (alerts[0].kind.as_str(), alerts[0].severity.as_str()),
        ("invariant_violated", "critical")
    );
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].actor, LATCH_ACTOR);
    assert_eq!(audit[0].target, GLOBAL_KILL_SWITCH);

    // A second violation while latched adds nothing: the first is the one to read.
    let _ = write(&store, |_tx| -> Result<(), CoreError> {
        Err(CoreError::Invariant("again".into()))
    })
    .await;
    let alerts = read(&store, |tx| Ok(tx.list_alerts(10)?)).await.unwrap();
    assert_eq!(alerts.len(), 1);

    // Transfers stop.
    match transfer_one(&store).await {
        Err(CoreError::Refused(r)) => assert_eq!(r.code, ErrorCode::KillSwitchActive),
        other => panic!("a transfer went through a latched kill switch: {other:?}"),
    }
    // Deposit crediting stops: a deposit reaches full depth and stays confirmed.
    let watch = Arc::new(WatchSet::new());
    watch.extend(Network::Bsc, [address.clone()]);
    let settings = PipelineSettings {
        network: Network::Bsc,
        required_confirmations: 2,
        blocks_kept: 10,
    };
    for n in 1..=4 {
        let (b, w, s) = (block(n, &address), Arc::clone(&watch), settings.clone());
        let applied = write(&store, move |tx| {
            deposit::apply_block(
                tx,
                &RandomEntropy,
                &s,
                &AssetCatalog::mainnet(),
                &w,
                &b,
                NOW,
            )
        })
        .await
        .unwrap();
        assert!(matches!(applied, Applied::Block(_)), "{applied:?}");
    }
    let status = || async {
        read(&store, |tx| {
            Ok(tx.list_deposits("t", &DepositFilter::default(), 10)?)
        })
        .await
        .unwrap()[0]
            .status
    };
    assert_eq!(status().await, DepositStatus::Confirmed);

    // An operator looks and turns it off (audited): money moves again.
    write(&store, |tx| {
        set_control(
            tx,
            Uuid::new_v4(),
            "operator",
            GLOBAL_KILL_SWITCH,
            false,
            "checked the books",
            NOW,
        )
    })
    .await
    .unwrap();
    let still = read(&store, |tx| {
        Ok(restricted(tx, "kill_switch.internal_transfers")?)
    })
    .await
    .unwrap();
    assert!(!still);
    transfer_one(&store).await.unwrap();
    let s = settings.clone();
    write(&store, move |tx| {
        deposit::advance(tx, &RandomEntropy, &s, 4, NOW)
    })
    .await
    .unwrap();
    assert_eq!(status().await, DepositStatus::Credited);
}
