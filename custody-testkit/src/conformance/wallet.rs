//! [`WalletRepo`](custody_core::wallet::WalletRepo): account and address index allocation, wallets.

use std::sync::Arc;

use crate::test_signer;
use custody_core::error::{CoreError, CoreResult, ErrorCode, Refusal};
use custody_core::ports::store::{write, Store};
use custody_core::wallet::{self, Wallet};
use custody_core::Network;

use super::{addr, assert_port_error, at, chain_addr, r, suite, tid, uid, w, wallet_row};

suite!(
    /// HD wallets: one account per tenant, address indexes per tenant and network, one wallet
    /// per user and network and per address.
    wallet_suite {
        tenant_accounts_are_allocated_once_in_order,
        address_indexes_count_per_tenant_and_network,
        wallets_are_found_by_user_id_and_address,
        one_wallet_per_user_and_network_and_per_address,
        create_wallet_creates_once_with_its_event,
        new_addresses_are_read_after_a_position,
    }
);

fn refusal() -> CoreError {
    Refusal::new(ErrorCode::InsufficientBalance, "refused by the test").into()
}

async fn tenant_accounts_are_allocated_once_in_order(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let allocate =
        |tenant: &'static str| w(s, move |tx| tx.allocate_tenant_account(&tid(tenant), at(1)));
    assert_eq!(allocate("acme").await.unwrap(), 0);
    assert_eq!(allocate("beta").await.unwrap(), 1);
    assert_port_error(allocate("acme").await);
    // A rolled-back allocation takes nothing.
    let rolled_back: CoreResult<()> = write(s, |tx| {
        tx.allocate_tenant_account(&tid("gamma"), at(1))?;
        Err(refusal())
    })
    .await;
    assert!(rolled_back.is_err());
    assert_eq!(r(s, |tx| tx.tenant_account(&tid("gamma"))).await, None);
    assert_eq!(allocate("gamma").await.unwrap(), 2);
    let accounts = r(s, |tx| {
        ["acme", "beta", "gamma", "nobody"]
            .iter()
            .map(|t| tx.tenant_account(&tid(t)))
            .collect::<Result<Vec<_>, _>>()
    })
    .await;
    assert_eq!(accounts, [Some(0), Some(1), Some(2), None]);
}

async fn address_indexes_count_per_tenant_and_network(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let take = |tenant: &'static str, network: Network| {
        w(s, move |tx| tx.take_address_index(&tid(tenant), network))
    };
    assert_eq!(take("acme", Network::Bsc).await.unwrap(), 0);
    let in_one_job = w(s, |tx| {
        Ok([
            tx.take_address_index(&tid("acme"), Network::Bsc)?,
            tx.take_address_index(&tid("acme"), Network::Bsc)?,
        ])
    });
    assert_eq!(in_one_job.await.unwrap(), [1, 2]);
    assert_eq!(take("acme", Network::Tron).await.unwrap(), 0);
    assert_eq!(take("beta", Network::Bsc).await.unwrap(), 0);
    // A rolled-back job handed nothing out: its index is taken next.
    let rolled_back: CoreResult<()> = write(s, |tx| {
        tx.take_address_index(&tid("acme"), Network::Bsc)?;
        Err(refusal())
    })
    .await;
    assert!(rolled_back.is_err());
    assert_eq!(take("acme", Network::Bsc).await.unwrap(), 3);
}

async fn wallets_are_found_by_user_id_and_address(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let alice_bsc = wallet_row(1, "acme", "alice", Network::Bsc, "0xA11CE");
    let alice_tron = wallet_row(2, "acme", "alice", Network::Tron, "TA11CE");
    let bob_other = wallet_row(3, "other", "bob", Network::Bsc, "0xB0B");
    let rows = [alice_bsc.clone(), alice_tron.clone(), bob_other.clone()];
    w(s, move |tx| {
        rows.iter().try_for_each(|x| tx.insert_wallet(x))
    })
    .await
    .unwrap();
    let found = r(s, |tx| {
        Ok((
            tx.wallet_by_user(&tid("acme"), "alice", Network::Bsc)?,
            tx.wallet_by_user(&tid("acme"), "alice", Network::Tron)?,
            tx.wallet_by_user(&tid("other"), "alice", Network::Bsc)?,
            tx.wallet_by_id(&tid("acme"), uid(1))?,
            tx.wallet_by_id(&tid("other"), uid(1))?,
            tx.wallet_by_address(Network::Bsc, &chain_addr(Network::Bsc, "0xB0B"))?,
            tx.wallet_by_address(Network::Tron, &chain_addr(Network::Tron, "0xB0B"))?,
        ))
    })
    .await;
    assert_eq!(found.0, Some(alice_bsc.clone()));
    assert_eq!(found.1, Some(alice_tron));
    assert_eq!(found.2, None);
    assert_eq!(found.3, Some(alice_bsc), "by id within the tenant");
    assert_eq!(found.4, None, "another tenant's wallet is not found");
    assert_eq!(found.5, Some(bob_other), "by address, of any tenant");
    assert_eq!(found.6, None);
    let ids = r(s, |tx| {
        Ok((
            tx.wallet_id_by_user(&tid("acme"), "alice", Network::Bsc)?,
            tx.wallet_id_by_user(&tid("acme"), "alice", Network::Tron)?,
            tx.wallet_id_by_user(&tid("other"), "alice", Network::Bsc)?,
            tx.wallet_id_by_user(&tid("acme"), "bob", Network::Bsc)?,
            tx.wallet_id_by_user(&tid("other"), "bob", Network::Tron)?,
        ))
    })
    .await;
    assert_eq!(ids, (Some(uid(1)), Some(uid(2)), None, None, None));
    let in_writer = w(s, |tx| {
        tx.wallet_id_by_user(&tid("other"), "bob", Network::Bsc)
    })
    .await
    .unwrap();
    assert_eq!(
        in_writer,
        Some(uid(3)),
        "the writer's transaction answers it too"
    );
    let (mut bsc, tron) = r(s, |tx| {
        Ok((
            tx.wallet_addresses(Network::Bsc)?,
            tx.wallet_addresses(Network::Tron)?,
        ))
    })
    .await;
    bsc.sort_unstable();
    assert_eq!(
        bsc,
        [addr(Network::Bsc, "0xA11CE"), addr(Network::Bsc, "0xB0B")],
        "every tenant's, in any order"
    );
    assert_eq!(tron, [addr(Network::Tron, "TA11CE")]);
}

async fn one_wallet_per_user_and_network_and_per_address(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let first = wallet_row(1, "acme", "alice", Network::Bsc, "0xA11CE");
    let f = first.clone();
    w(s, move |tx| tx.insert_wallet(&f)).await.unwrap();
    let refused: [Wallet; 4] = [
        // Same user and network, another address.
        wallet_row(2, "acme", "alice", Network::Bsc, "0xOTHER"),
        // Same address on the same network, another user.
        wallet_row(3, "acme", "bob", Network::Bsc, "0xA11CE"),
        // Same id.
        Wallet {
            index: 99,
            ..wallet_row(1, "acme", "carol", Network::Bsc, "0xCA401")
        },
        // Same derivation path on the network.
        Wallet {
            index: first.index,
            ..wallet_row(4, "acme", "dave", Network::Bsc, "0xDA7E")
        },
    ];
    for x in refused {
        let user = x.external_user_id.clone();
        let result = w(s, move |tx| tx.insert_wallet(&x)).await;
        assert!(
            matches!(result, Err(CoreError::Port(_))),
            "{user}: {result:?}"
        );
    }
    // The same user on another network, and the same address on another network, are fine.
    let tron = wallet_row(5, "acme", "alice", Network::Tron, "0xA11CE");
    w(s, move |tx| tx.insert_wallet(&tron)).await.unwrap();
    let (alice, bsc) = r(s, |tx| {
        Ok((
            tx.wallet_by_user(&tid("acme"), "alice", Network::Bsc)?,
            tx.wallet_addresses(Network::Bsc)?,
        ))
    })
    .await;
    assert_eq!(alice, Some(first));
    assert_eq!(bsc, [addr(Network::Bsc, "0xA11CE")]);
}

async fn create_wallet_creates_once_with_its_event(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let create = |user: &'static str, ids: [u128; 2]| {
        write(s, move |tx| {
            wallet::create_wallet(
                tx,
                &test_signer(),
                [uid(ids[0]), uid(ids[1])],
                &tid("acme"),
                user,
                Network::Bsc,
                at(5),
            )
        })
    };
    let alice = create("alice", [1, 2]).await.unwrap();
    assert!(alice.new);
    assert_eq!(
        (alice.wallet.id, alice.wallet.account, alice.wallet.index),
        (uid(1), 0, 0)
    );
    let again = create("alice", [3, 4]).await.unwrap();
    assert_eq!((again.new, again.wallet), (false, alice.wallet.clone()));
    let bob = create("bob", [5, 6]).await.unwrap();
    assert_eq!((bob.wallet.account, bob.wallet.index), (0, 1));
    assert_ne!(bob.wallet.address, alice.wallet.address);
    let events = r(s, |tx| {
        tx.list_webhook_events(custody_core::page::Page::first(10))
            .map(super::rows)
    })
    .await;
    let created: Vec<_> = events
        .iter()
        .map(|e| (e.id, e.event_type.as_str()))
        .collect();
    assert_eq!(
        created,
        [(uid(6), "wallet.created"), (uid(2), "wallet.created")]
    );
    let by_address = r(s, move |tx| {
        tx.wallet_by_address(
            Network::Bsc,
            &custody_core::chain::ChainAddress::parse(Network::Bsc, &bob.wallet.address)
                .expect("canonical"),
        )
    })
    .await;
    assert_eq!(by_address.map(|x| x.external_user_id), Some("bob".into()));
}

async fn new_addresses_are_read_after_a_position(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let first = [
        wallet_row(1, "acme", "alice", Network::Bsc, "0xA11CE"),
        wallet_row(2, "acme", "alice", Network::Tron, "TA11CE"),
    ];
    w(s, move |tx| {
        first.iter().try_for_each(|x| tx.insert_wallet(x))
    })
    .await
    .unwrap();
    let seen = r(s, |tx| tx.wallet_addresses_after(Network::Bsc, 0, 10)).await;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].1, addr(Network::Bsc, "0xA11CE"));
    let last = seen[0].0;
    assert!(r(s, move |tx| tx.wallet_addresses_after(
        Network::Bsc,
        last,
        10
    ))
    .await
    .is_empty());

    // Wallets stored later (by this or any other writer) come after the position seen.
    let later = [
        wallet_row(3, "other", "bob", Network::Bsc, "0xB0B"),
        wallet_row(4, "other", "carol", Network::Bsc, "0xCA401"),
    ];
    w(s, move |tx| {
        later.iter().try_for_each(|x| tx.insert_wallet(x))
    })
    .await
    .unwrap();
    let next = r(s, move |tx| {
        tx.wallet_addresses_after(Network::Bsc, last, 10)
    })
    .await;
    let addresses: Vec<_> = next.iter().map(|(_, a)| a.clone()).collect();
    assert_eq!(
        addresses,
        [addr(Network::Bsc, "0xB0B"), addr(Network::Bsc, "0xCA401")]
    );
    assert!(next[0].0 > last && next[1].0 > next[0].0, "{next:?}");
    let one = r(s, move |tx| {
        tx.wallet_addresses_after(Network::Bsc, last, 1)
    })
    .await;
    assert_eq!(one, next[..1]);
}
