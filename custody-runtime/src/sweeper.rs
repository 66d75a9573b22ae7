//! The sweeper of one network: every round, it moves what deposit addresses hold to the hot
//! wallet (decisions §13), through the outgoing-transaction engine (the broadcaster sends what
//! it creates). The rules are the core's (`custody_core::sweep`); this loop reads the chain,
//! asks the core, and writes the plan in one job:
//!
//! 1. funded sweeps move on: an energy delegation that waited for the native funding
//!    activating its address is sent once that funding is final; the token transfer is created
//!    once every funding of the sweep is final (never on a funding's mere inclusion: a
//!    reorganization could take the gas or the energy back);
//! 2. every address with credited deposits and no open sweep is planned: tokens first (they
//!    need the address's native coin for gas, which a native sweep would take), then the
//!    native coin.
//!
//! On TRON with `[sweeps] tron_energy_mode = "delegate"`, a token sweep borrows the energy its
//! transfer needs (the resource planner's figure plus `tron_delegation_margin_percent`) from
//! the hot wallet's stake, converted to stake at the network's energy per staked TRX read from
//! the node; TRX is still sent for the bandwidth the address has no free points for (and its
//! activation). When the stake cannot lend that much (95 % of what the node says it can
//! delegate, less the delegations of this service not in a block yet), the sweep burns TRX as
//! in `burn_trx` mode and a warning is logged. The core reclaims the energy once the transfer ends; an
//! address whose reclaim is not final yet is not planned (the reclaim would take back energy
//! the new plan counts on: java-tron keeps one delegation per owner and receiver).
//!
//! Nothing is planned while `kill_switch.sweeps`, `kill_switch.global` or `maintenance.<NETWORK>` is on. A crash
//! between two rounds loses nothing: a sweep and its first transaction are created together,
//! at most one sweep is open per address (a constraint), and the engine never pays twice.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use custody_core::admin::restricted;
use custody_core::chain::ChainAddress;
use custody_core::error::CoreResult;
use custody_core::ports::clock::new_uuid;
use custody_core::ports::dex::DexRouter;
use custody_core::ports::sender::{ChainSender, Payment};
use custody_core::ports::store::{read, write};
use custody_core::ports::EnergyStake;
use custody_core::ports::Signer;
use custody_core::ports::{Clock, Entropy, Store};
use custody_core::sweep::{
    create_sweep, delegation_budget, plan_native, plan_token, plan_token_delegated,
    ready_for_transfer, reclaim_pending, start_delegation, start_funded_sweep, Delegation,
    DelegationFacts, Plan, SweepIds, SweepOrder, SweepPolicy, SweepSource, TokenFacts,
};
use custody_core::tron::delegation::{energy_to_lend, stake_for_energy};
use custody_core::tron::resources::{ResourcePlan, TRX_TRANSFER_BANDWIDTH_BYTES};
use custody_core::wallet::migration::{self, old_key_available, OldAddress};
use custody_core::wallet::seeds::check_seed_loaded;
use custody_core::withdrawal::{mul_div_ceil, HotWallet, Rate};
use custody_core::{Amount, Asset, AssetCatalog, Network};
use tokio::sync::watch;

/// Where the price of the native coin in a token comes from, for the cost test of a token
/// sweep: the DEX router on BSC, configured rates on TRON.
#[derive(Clone, Default)]
pub struct NativePrices {
    pub dex: Option<(Arc<dyn DexRouter>, String)>,
    pub fixed: BTreeMap<custody_core::AssetId, Rate>,
}

impl NativePrices {
    async fn rate(&self, asset: &Asset) -> Option<Rate> {
        if let Some(rate) = self.fixed.get(&asset.id()) {
            return Some(*rate);
        }
        let (dex, wrapped) = self.dex.as_ref()?;
        custody_core::pricing::native_rate(dex.as_ref(), wrapped, asset)
            .await
            .ok()
    }
}

/// `[sweeps] tron_energy_mode = "delegate"`: where the stake's figures come from.
#[derive(Clone)]
pub struct EnergyLending {
    pub stake: Arc<dyn EnergyStake>,
    /// The energy lent is the planner's figure plus this percentage.
    pub margin_percent: u64,
}

pub struct Sweeper {
    pub network: Network,
    pub sender: Arc<dyn ChainSender>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub entropy: Arc<dyn Entropy>,
    pub catalog: Arc<AssetCatalog>,
    pub hot: HotWallet,
    /// By asset code; an asset without one is never swept.
    pub policies: BTreeMap<String, SweepPolicy>,
    pub prices: NativePrices,
    /// Checks that the seed still holds the keys of migrated wallets' old addresses.
    pub signer: Arc<dyn Signer>,
    pub interval: Duration,
    /// How long an address whose last sweep failed is left alone (a paused token, a frozen
    /// address: each try would burn a fee).
    pub failure_backoff: Duration,
    /// TRON token sweeps borrow their energy from the hot wallet's stake (`None`: burn TRX).
    pub energy: Option<EnergyLending>,
}

/// What the books say each (address, asset) holds: credited deposits, plus what fundings
/// brought, less what sweeps took (their fees included).
type Books = HashMap<(String, String), Amount>;

/// What one round did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Round {
    pub transfers_started: usize,
    pub sweeps_planned: usize,
    /// Wallet migrations that changed state.
    pub migrations_moved: usize,
}

fn book_of(books: &Books, address: &str, asset: &str) -> Amount {
    books
        .get(&(address.to_owned(), asset.to_owned()))
        .copied()
        .unwrap_or(Amount::ZERO)
}

impl Sweeper {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        tracing::info!(network = %self.network, "sweeper started");
        loop {
            // The first round runs one interval after start: a restart does not sweep at once.
            tokio::select! {
                () = tokio::time::sleep(self.interval) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
            match self.round().await {
                Ok(r) if r != Round::default() => {
                    tracing::info!(network = %self.network, planned = r.sweeps_planned, transfers = r.transfers_started, migrations = r.migrations_moved, "sweeper round");
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(network = %self.network, error = %e, "sweeper round failed")
                }
            }
        }
        tracing::info!(network = %self.network, "sweeper stopped");
    }

    pub async fn round(&self) -> CoreResult<Round> {
        let network = self.network;
        let maintenance = format!("maintenance.{network}");
        let native = self
            .catalog
            .native(network)
            .map(|a| a.code.clone())
            .unwrap_or_default();
        let (stopped, waiting, credited, flows) = read(self.store.as_ref(), move |tx| {
            Ok((
                restricted(tx, &maintenance)? || restricted(tx, "kill_switch.sweeps")?,
                tx.sweeps_awaiting_transfer(network)?,
                tx.credited_by_address(network)?,
                tx.sweep_flows(network, &native)?,
            ))
        })
        .await?;
        let mut round = Round::default();
        if stopped {
            return Ok(round);
        }
        let addresses: BTreeSet<String> = credited.iter().map(|(a, _, _)| a.clone()).collect();
        let mut books: Books = credited
            .into_iter()
            .map(|(address, asset, units)| ((address, asset), units))
            .collect();
        for f in flows {
            let e = books.entry((f.address, f.asset)).or_default();
            *e = e
                .checked_add(f.arrived)
                .and_then(|v| v.checked_sub(f.left))
                .unwrap_or(Amount::ZERO);
        }
        for sweep in waiting {
            if self.start_transfer(sweep, &books).await? {
                round.transfers_started += 1;
            }
        }
        for address in addresses {
            match self.plan_address(&address, &books).await {
                Ok(true) => round.sweeps_planned += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(network = %network, %address, error = %e, "sweep not planned")
                }
            }
        }
        // After planning: an old address with a sweep just planned reads as being swept.
        round.migrations_moved = self.advance_migrations().await?;
        Ok(round)
    }

    /// Moves every open wallet migration of the network on what its old address holds
    /// (decisions §13): `sweeping` while an asset the sweeper sweeps is above its minimum
    /// there, `completed` once nothing is and no sweep is open, `failed` when the seed no
    /// longer gives the old address's key. The sweeps themselves are planned above, like any
    /// deposit address's: an old address keeps its credited deposits.
    async fn advance_migrations(&self) -> CoreResult<usize> {
        let network = self.network;
        let open = read(self.store.as_ref(), move |tx| {
            Ok(tx.open_migrations(network)?)
        })
        .await?;
        let mut moved = 0;
        for m in open {
            // A seed imported after this process started derives the old address: this
            // process would derive another key and take the key for lost (a terminal
            // failure). Left to a process that loaded it (this one after its restart).
            let (signer, account) = (Arc::clone(&self.signer), m.old_path.account);
            let loaded = read(self.store.as_ref(), move |tx| {
                match check_seed_loaded(tx, signer.as_ref(), account) {
                    Ok(()) => Ok(true),
                    Err(custody_core::CoreError::Refused(_)) => Ok(false),
                    Err(e) => Err(e),
                }
            })
            .await?;
            if !loaded {
                tracing::debug!(network = %network, migration = %m.id, old_address = %m.old_address, "wallet migration left alone: its old address's seed is not loaded here");
                continue;
            }
            let seen = match old_key_available(self.signer.as_ref(), &m) {
                Err(why) => OldAddress::KeyLost(why),
                Ok(()) => match self.held_above_minimum(&m.old_address).await {
                    Ok(Some(what)) => OldAddress::Holds(what),
                    Ok(None) => OldAddress::Empty,
                    // The chain did not answer: decide nothing on a guess, look next round.
                    Err(e) => {
                        tracing::debug!(network = %network, migration = %m.id, error = %e, "old address not read");
                        continue;
                    }
                },
            };
            let (id, now) = (m.id, self.clock.now());
            let changed = write(self.store.as_ref(), move |tx| {
                migration::observe(tx, id, &seen, now)
            })
            .await?;
            if let Some(m) = changed {
                tracing::info!(network = %network, migration = %m.id, wallet = %m.wallet_id, old_address = %m.old_address, status = m.status.as_str(), "wallet migration");
                moved += 1;
            }
        }
        Ok(moved)
    }

    /// The first swept asset `address` holds above its sweep minimum, as "CODE units".
    async fn held_above_minimum(&self, address: &str) -> CoreResult<Option<String>> {
        for asset in self.catalog.of_network(self.network) {
            let Some(policy) = self.policies.get(&asset.code) else {
                continue;
            };
            let (native, token) = match self
                .sender
                .balances(address, asset.contract.as_deref())
                .await
            {
                Ok(b) => b,
                // A permanent answer (a token contract with no code on this chain) means the
                // address cannot hold that asset; anything else may pass, so decide nothing.
                Err(e) if e.retry == custody_core::error::Retry::Permanent => continue,
                Err(e) => return Err(e.into()),
            };
            let held = match &asset.contract {
                Some(_) => token.unwrap_or(Amount::ZERO),
                None => native,
            };
            if held > policy.min_units {
                return Ok(Some(format!(
                    "{} {} units above the sweep minimum of {}",
                    asset.code,
                    held.units(),
                    policy.min_units.units()
                )));
            }
        }
        Ok(None)
    }

    /// The token transfer of a funded sweep, once its funding is final.
    async fn start_transfer(
        &self,
        sweep: custody_core::sweep::Sweep,
        books: &Books,
    ) -> CoreResult<bool> {
        let (id, now) = (sweep.id, self.clock.now());
        let delegated = write(self.store.as_ref(), move |tx| start_delegation(tx, id, now)).await?;
        if let Some(d) = delegated {
            tracing::info!(network = %self.network, sweep = %id, delegation = %d.id, address = %d.address, stake_sun = %d.amount.units(), "energy delegation sent after its funding");
            return Ok(false);
        }
        let waiting = sweep.clone();
        let funded = read(self.store.as_ref(), move |tx| {
            ready_for_transfer(tx, &waiting)
        })
        .await?;
        if !funded {
            return Ok(false);
        }
        let Some(asset) = self.catalog.get(self.network, &sweep.asset).cloned() else {
            return Ok(false);
        };
        let (_, token) = self
            .sender
            .balances(&sweep.address, asset.contract.as_deref())
            .await?;
        // What arrived since the plan goes too, as far as it is credited (never a deposit not
        // yet final, which a reorganization could take back).
        let booked = book_of(books, &sweep.address, &sweep.asset);
        let amount = token.unwrap_or(Amount::ZERO).min(booked).max(sweep.amount);
        let (id, outgoing, now) = (sweep.id, new_uuid(self.entropy.as_ref()), self.clock.now());
        let started = write(self.store.as_ref(), move |tx| {
            start_funded_sweep(tx, id, outgoing, &asset, amount, now)
        })
        .await?;
        Ok(started.is_some())
    }

    /// Plans the first asset of `address` worth sweeping; true when a sweep was created.
    async fn plan_address(&self, address: &str, books: &Books) -> CoreResult<bool> {
        let network = self.network;
        let parsed = ChainAddress::parse(network, address).map_err(|e| {
            custody_core::CoreError::Invariant(format!("stored address {address}: {e}"))
        })?;
        let owned = address.to_owned();
        // The path of THIS address: after a wallet migration the wallet's current path is
        // another key, and a sweep of the old address must be signed with the old one.
        let (latest, path, open) = read(self.store.as_ref(), move |tx| {
            Ok((
                tx.latest_sweep_at(network, &owned)?,
                match tx.wallet_by_address(network, &parsed)? {
                    Some(_) => tx.address_path(network, &owned)?,
                    None => None,
                },
                tx.open_fundings(network)?,
            ))
        })
        .await?;
        let Some(path) = path else {
            return Ok(false);
        };
        // A reclaim still on its way would take back energy a new plan counts on.
        if let Some(r) = reclaim_pending(&open, address) {
            tracing::debug!(network = %network, %address, reclaim = %r.id, "not swept: its energy reclaim is not final yet");
            return Ok(false);
        }
        if let Some(last) = latest {
            if last.status.is_open() {
                return Ok(false);
            }
            let backoff = i64::try_from(self.failure_backoff.as_millis()).unwrap_or(i64::MAX);
            let since = self
                .clock
                .now()
                .unix_millis()
                .saturating_sub(last.updated_at.unix_millis());
            if last.status == custody_core::sweep::SweepStatus::Failed && since < backoff {
                return Ok(false);
            }
        }
        let source = SweepSource {
            address: address.to_owned(),
            path,
        };
        // Tokens first: a native sweep would take the gas they need.
        let mut assets: Vec<&Asset> = self.catalog.of_network(network).collect();
        assets.sort_by_key(|a| a.contract.is_none());
        for asset in assets {
            let Some(policy) = self.policies.get(&asset.code) else {
                continue;
            };
            let booked = book_of(books, address, &asset.code);
            let planned = match &asset.contract {
                Some(_) => self.plan_token_sweep(asset, &source, policy, booked).await,
                None => self
                    .plan_native_sweep(asset, &source, policy, booked)
                    .await
                    .map(|o| o.map(|o| (o, None))),
            };
            // One asset the chain cannot answer for (a token contract missing on a devnet,
            // a node error) does not keep the others where they are.
            // With a delegation: the node's delegatable stake it was planned against.
            let (order, order_stake) = match planned {
                Ok(Some(planned)) => planned,
                Ok(None) => continue,
                Err(e) => {
                    tracing::debug!(network = %network, %address, asset = %asset.code, error = %e, "asset not planned");
                    continue;
                }
            };
            let ids = SweepIds {
                sweep: new_uuid(self.entropy.as_ref()),
                outgoing: new_uuid(self.entropy.as_ref()),
                funding: new_uuid(self.entropy.as_ref()),
                delegation: new_uuid(self.entropy.as_ref()),
                delegation_outgoing: new_uuid(self.entropy.as_ref()),
            };
            let now = self.clock.now();
            let created = write(self.store.as_ref(), move |tx| {
                // Checked again in the write: a switch turned on since the round began.
                if custody_core::admin::restricted(tx, "kill_switch.sweeps")? {
                    return Ok(None);
                }
                // Another delegation may have been planned since the stake was read (another
                // instance): the budget is checked again against the open ones in this write.
                if let (Plan::Delegate { delegation, .. }, Some(node)) = (&order.plan, order_stake)
                {
                    let budget = delegation_budget(node, &tx.open_fundings(order.asset.network)?);
                    if delegation.stake_sun > budget {
                        return Ok(None);
                    }
                }
                create_sweep(tx, ids, &order, now)
            })
            .await?;
            if let Some(s) = created {
                tracing::info!(network = %network, sweep = %s.id, address = %s.address, asset = %s.asset, amount = %s.amount.units(), status = s.status.as_str(), "sweep planned");
                return Ok(true);
            }
            return Ok(false);
        }
        Ok(false)
    }

    async fn plan_native_sweep(
        &self,
        asset: &Asset,
        source: &SweepSource,
        policy: &SweepPolicy,
        booked: Amount,
    ) -> CoreResult<Option<SweepOrder>> {
        // Only what the books say is there: a deposit not yet final (a reorganization could
        // take it back and void the sweep) or funds no deposit explains stay for now.
        let (onchain, _) = self.sender.balances(&source.address, None).await?;
        let balance = onchain.min(booked);
        if balance <= policy.min_units {
            return Ok(None);
        }
        let estimate = self
            .sender
            .price(
                &source.address,
                &Payment::Native {
                    to: self.hot.address.clone(),
                    amount: balance,
                },
            )
            .await?;
        let plan = plan_native(balance, estimate.expected_native, policy);
        self.order(asset, source, plan, estimate.expected_native)
    }

    async fn plan_token_sweep(
        &self,
        asset: &Asset,
        source: &SweepSource,
        policy: &SweepPolicy,
        booked: Amount,
    ) -> CoreResult<Option<(SweepOrder, Option<Amount>)>> {
        let contract = asset.contract.clone().unwrap_or_default();
        let (native, token) = self
            .sender
            .balances(&source.address, Some(&contract))
            .await?;
        let token = token.unwrap_or(Amount::ZERO).min(booked);
        if token.is_zero() || token <= policy.min_units {
            return Ok(None);
        }
        let estimate = self
            .sender
            .price(
                &source.address,
                &Payment::Token {
                    contract,
                    to: self.hot.address.clone(),
                    amount: token,
                },
            )
            .await?;
        if let (Some(lending), Some(plan)) = (&self.energy, estimate.plan) {
            let facts = (asset, source, policy, token, native);
            match self.plan_delegated(lending, facts, &plan).await {
                Ok(order) => return Ok(order),
                Err(why) => {
                    tracing::warn!(network = %self.network, address = %source.address, asset = %asset.code, %why, "energy not delegated: the sweep burns TRX");
                }
            }
        }
        let mut cost_native = estimate.expected_native;
        let needs_funding = native < estimate.max_native;
        if needs_funding {
            let funding = self
                .sender
                .price(
                    &self.hot.address,
                    &Payment::Native {
                        to: source.address.clone(),
                        amount: estimate.max_native.checked_sub(native).unwrap_or_default(),
                    },
                )
                .await?;
            cost_native = cost_native
                .checked_add(funding.expected_native)
                .unwrap_or(cost_native);
        }
        let cost_in_token = self.prices.rate(asset).await.and_then(|r| {
            mul_div_ceil(
                cost_native.units(),
                r.asset_units.units(),
                r.native_units.units(),
            )
            .map(Amount::from_units)
        });
        let plan = plan_token(
            &TokenFacts {
                token_balance: token,
                native_balance: native,
                fee_max_native: estimate.max_native,
                cost_in_token,
            },
            policy,
        );
        self.order(asset, source, plan, estimate.expected_native)
            .map(|o| o.map(|o| (o, None)))
    }

    /// A TRON token sweep whose energy the hot wallet's stake lends. `Err(why)` when it cannot
    /// (the caller burns TRX then): no energy market, not enough stake, a node that did not
    /// answer.
    async fn plan_delegated(
        &self,
        lending: &EnergyLending,
        (asset, source, policy, token, native): (
            &Asset,
            &SweepSource,
            &SweepPolicy,
            Amount,
            Amount,
        ),
        plan: &ResourcePlan,
    ) -> Result<Option<(SweepOrder, Option<Amount>)>, String> {
        let network = self.network;
        let stake = lending
            .stake
            .stake_facts(&self.hot.address)
            .await
            .map_err(|e| format!("the hot wallet's stake was not read: {e}"))?;
        // Delegations of this service not in a block yet do not show in the node's figure:
        // counted as taken; and some headroom is kept (`delegation_budget`). Checked again in
        // the write that creates the sweep.
        let open = read(
            self.store.as_ref(),
            move |tx| Ok(tx.open_fundings(network)?),
        )
        .await
        .map_err(|e| e.to_string())?;
        let delegatable = delegation_budget(stake.delegatable_sun, &open);
        // From the raw limit and usage: usage left above a limit a reclaim lowered counts too.
        let (limit, used) = lending
            .stake
            .account_energy(&source.address)
            .await
            .map_err(|e| format!("the address's energy was not read: {e}"))?;
        let energy_missing = energy_to_lend(plan.energy_needed, limit, used);
        let margin = lending.margin_percent;
        let delegation = stake.market.and_then(|m| {
            let stake_sun = stake_for_energy(energy_missing, &m, margin)?;
            let energy = energy_missing.saturating_add(energy_missing.saturating_mul(margin) / 100);
            Some(Delegation {
                stake_sun: Amount::from_units(u128::from(stake_sun)),
                energy,
            })
        });
        let burn_without_energy = Amount::from_units(u128::from(
            plan.bandwidth_burn_sun.saturating_add(plan.activation_sun),
        ));
        // The whole cost: the transfer's bandwidth, the TRX funding's fee (its activation) when
        // one is needed, and the delegation's and the reclaim's bandwidth.
        let mut cost = burn_without_energy;
        if let Some(missing) = burn_without_energy
            .checked_sub(native)
            .filter(|m| !m.is_zero())
        {
            let funding = self
                .sender
                .price(
                    &self.hot.address,
                    &Payment::Native {
                        to: source.address.clone(),
                        amount: missing,
                    },
                )
                .await
                .map_err(|e| format!("the bandwidth funding was not priced: {e}"))?;
            cost = cost.checked_add(funding.expected_native).unwrap_or(cost);
        }
        if let Some(d) = delegation.filter(|_| energy_missing > 0) {
            // An address the chain does not know yet cannot be priced a delegation: a system
            // contract's bandwidth burned in full stands for it.
            let delegation_fee = match self
                .sender
                .price(
                    &self.hot.address,
                    &Payment::DelegateEnergy {
                        receiver: source.address.clone(),
                        balance_sun: d.stake_sun,
                    },
                )
                .await
            {
                Ok(e) => e.expected_native,
                Err(_) => Amount::from_units(u128::from(
                    TRX_TRANSFER_BANDWIDTH_BYTES.saturating_mul(plan.prices.bandwidth_sun),
                )),
            };
            for _ in 0..2 {
                cost = cost.checked_add(delegation_fee).unwrap_or(cost);
            }
        }
        let cost_in_token = self.prices.rate(asset).await.and_then(|r| {
            mul_div_ceil(cost.units(), r.asset_units.units(), r.native_units.units())
                .map(Amount::from_units)
        });
        let facts = DelegationFacts {
            token_balance: token,
            native_balance: native,
            burn_without_energy,
            energy_missing,
            delegation,
            delegatable,
            cost_in_token,
        };
        let planned = plan_token_delegated(&facts, policy)?;
        if let Plan::Delegate { delegation, .. } = &planned {
            tracing::info!(network = %network, address = %source.address, asset = %asset.code, energy_needed = plan.energy_needed, energy_lent = delegation.energy, stake_sun = %delegation.stake_sun.units(), delegatable_sun = %delegatable.units(), "sweep energy to be delegated");
        }
        let node = matches!(planned, Plan::Delegate { .. }).then_some(stake.delegatable_sun);
        self.order(asset, source, planned, burn_without_energy)
            .map(|o| o.map(|o| (o, node)))
            .map_err(|e| e.to_string())
    }

    /// The order of `plan`; `None` for a skip (logged).
    fn order(
        &self,
        asset: &Asset,
        source: &SweepSource,
        plan: Plan,
        planned_fee_native: Amount,
    ) -> CoreResult<Option<SweepOrder>> {
        if let Plan::Skip(why) = &plan {
            tracing::debug!(network = %self.network, address = %source.address, asset = %asset.code, %why, "not swept");
            return Ok(None);
        }
        let Some(native) = self.catalog.native(self.network) else {
            return Ok(None);
        };
        Ok(Some(SweepOrder {
            asset: asset.clone(),
            source: source.clone(),
            hot: self.hot.clone(),
            plan,
            native: native.id(),
            planned_fee_native,
        }))
    }
}
