//! [`TronChain`]: the [`ChainSource`] port over the TRON HTTP API.

use async_trait::async_trait;
use custody_core::address::TronAddress;
use custody_core::amount::Amount;
use custody_core::asset::{Asset, AssetCatalog, AssetKind};
use custody_core::error::PortError;
use custody_core::network::Network;
use custody_core::ports::chain::{BlockHeader, ChainSource, OnchainBalance, ScannedBlock};

use crate::api;
use crate::client::{
    BroadcastOutcome, EndpointHealth, ReadError, SettingsError, TronClient, TronSettings,
};
use crate::scan::{self, TronCatalog};
use crate::tx::SignedTransaction;

/// Most `gettransactioninfobyid` reads in flight when a block's infos are read one by one.
pub const INFO_READS_IN_FLIGHT: usize = 8;

/// The TRON network for the core: head, headers, blocks with their transfers, balances.
///
/// Every call asks the node afresh (no block content is cached, per the port's rules). A block
/// scan is two reads: `wallet/getblockbynum`, then `wallet/gettransactioninfobyblocknum` when
/// the block has contract calls; when the two answers disagree (a reorganization between
/// them) the scan fails transiently and the core retries.
///
/// When the block's transaction infos are larger than `response_bytes_max`, they are read one
/// by one instead (`wallet/gettransactioninfobyid`, for the contract calls only, at most
/// [`INFO_READS_IN_FLIGHT`] at a time), each checked to be of this block's number, and the
/// block's id is read again afterwards: if it changed meanwhile the scan fails transiently.
/// Each request is then bounded by one transaction's info, so a busy block cannot stop the
/// scanner; only a single info over the limit (or a block body over it, which the API cannot
/// split) remains a permanent error.
#[derive(Debug, Clone)]
pub struct TronChain {
    client: TronClient,
    catalog: TronCatalog,
}

impl TronChain {
    /// `catalog` is the whole asset catalog; its TRON assets are the ones reported.
    pub fn new(settings: &TronSettings, catalog: &AssetCatalog) -> Result<Self, SettingsError> {
        Ok(TronChain {
            client: TronClient::new(settings)?,
            catalog: TronCatalog::from_assets(catalog).map_err(SettingsError::Catalog)?,
        })
    }

    /// The HTTP client, for the calls outside the port (fees, resources, constant calls).
    pub fn client(&self) -> &TronClient {
        &self.client
    }

    /// Health of every endpoint, for the admin `rpcs` listing (serde-serializable).
    pub fn health(&self) -> Vec<EndpointHealth> {
        self.client.health()
    }

    /// Number of the newest solidified (irreversible) block.
    pub async fn solid_head_number(&self) -> Result<u64, PortError> {
        let head = self.client.solid_block().await?;
        Ok(scan::header_of(&head.block_id, head.block_header.as_ref())?.number)
    }

    /// The newest block's header (for a transaction's reference block).
    pub async fn head_header(&self) -> Result<BlockHeader, PortError> {
        let head = self.client.now_block().await?;
        Ok(scan::header_of(&head.block_id, head.block_header.as_ref())?)
    }

    /// Sends a signed transaction to one endpoint (see [`TronClient::broadcast_hex`]).
    pub async fn broadcast(&self, tx: &SignedTransaction) -> Result<BroadcastOutcome, PortError> {
        self.client.broadcast_hex(&tx.broadcast_hex()).await
    }

    /// The infos of the block's contract calls, one read each (see the type's documentation),
    /// then a check that block `number` is still `block_id`.
    async fn call_infos_one_by_one(
        &self,
        block: &api::Block,
        number: u64,
        block_id: &str,
    ) -> Result<Vec<api::TransactionInfo>, PortError> {
        let txids = scan::call_txids(block)?;
        let mut infos = Vec::with_capacity(txids.len());
        for chunk in txids.chunks(INFO_READS_IN_FLIGHT) {
            let mut reads = tokio::task::JoinSet::new();
            for txid in chunk {
                let client = self.client.clone();
                let txid = txid.clone();
                reads.spawn(async move {
                    let info = client.transaction_info_by_id(&txid).await;
                    (txid, info)
                });
            }
            while let Some(joined) = reads.join_next().await {
                let (txid, info) = joined.map_err(|e| {
                    PortError::transient("tron", format!("transaction info read stopped: {e}"))
                })?;
                match info {
                    Ok(Some(info)) => infos.push(info),
                    Ok(None) => {
                        return Err(PortError::transient(
                            "tron",
                            format!(
                                "the node has no info for transaction {txid} of block {number}: \
                                 a reorganization may be under way"
                            ),
                        ))
                    }
                    Err(ReadError::TooLarge(e)) => {
                        return Err(PortError::permanent(
                            "tron",
                            format!(
                                "block {number}: the info of transaction {txid} alone is larger \
                                 than the response limit: {}",
                                e.message
                            ),
                        ))
                    }
                    Err(ReadError::Failed(e)) => return Err(e),
                }
            }
        }
        let again = self.client.block_head_by_num(number).await?;
        let still = again
            .as_ref()
            .is_some_and(|b| b.block_id.eq_ignore_ascii_case(block_id));
        if !still {
            return Err(PortError::transient(
                "tron",
                format!(
                    "block {number} changed while its transaction infos were read one by one \
                     (reorganization?)"
                ),
            ));
        }
        Ok(infos)
    }

    fn address(address: &str) -> Result<TronAddress, PortError> {
        TronAddress::parse(address)
            .map_err(|e| PortError::permanent("tron", format!("address {address:?}: {e}")))
    }
}

#[async_trait]
impl ChainSource for TronChain {
    fn endpoint_health(&self) -> Vec<custody_core::chain::EndpointHealth> {
        self.client.endpoint_health()
    }

    fn network(&self) -> Network {
        Network::Tron
    }

    async fn head_number(&self) -> Result<u64, PortError> {
        Ok(self.head_header().await?.number)
    }

    async fn header(&self, number: u64) -> Result<Option<BlockHeader>, PortError> {
        let Some(head) = self.client.block_head_by_num(number).await? else {
            return Ok(None);
        };
        let header = scan::header_of(&head.block_id, head.block_header.as_ref())?;
        if header.number != number {
            return Err(PortError::permanent(
                "tron",
                format!("asked for block {number}, got block {}", header.number),
            ));
        }
        Ok(Some(header))
    }

    async fn scan_block(&self, number: u64) -> Result<Option<ScannedBlock>, PortError> {
        let Some(block) = self.client.block_by_num(number).await? else {
            return Ok(None);
        };
        let scanned = if !scan::needs_infos(&block) {
            scan::scan(&block, &[], &self.catalog)?
        } else {
            match self.client.try_transaction_infos_by_block_num(number).await {
                Ok(infos) => scan::scan(&block, &infos, &self.catalog)?,
                Err(ReadError::TooLarge(e)) => {
                    tracing::warn!(
                        block = number,
                        error = %e.message,
                        "TRON block's transaction infos are over the response limit: reading \
                         them one by one"
                    );
                    let infos = self
                        .call_infos_one_by_one(&block, number, &block.block_id)
                        .await?;
                    scan::scan_with_call_infos(&block, &infos, &self.catalog)?
                }
                Err(ReadError::Failed(e)) => return Err(e),
            }
        };
        if scanned.header.number != number {
            return Err(PortError::permanent(
                "tron",
                format!(
                    "asked for block {number}, got block {}",
                    scanned.header.number
                ),
            ));
        }
        Ok(Some(scanned))
    }

    /// TRX through `wallet/getaccount` (`balance` plus the Stake 2.0 TRX: `frozenV2`,
    /// `unfrozenV2` and what is delegated, all the owner's; 0 for an unknown account), a TRC20 token
    /// through `balanceOf` (`wallet/triggerconstantcontract`). The node does not say at which
    /// block it answered: `block_number` is the head read just before, so the balance is at
    /// least that recent.
    async fn balance(&self, address: &str, asset: &Asset) -> Result<OnchainBalance, PortError> {
        if asset.network != Network::Tron {
            return Err(PortError::permanent(
                "tron",
                format!("asset {} {} is not a TRON asset", asset.network, asset.code),
            ));
        }
        let holder = Self::address(address)?;
        let block_number = self.head_number().await?;
        let (units, staked) = match (asset.kind, &asset.contract) {
            (AssetKind::Native, _) => {
                let account = self.client.account(&holder).await?.unwrap_or_default();
                let balance = account.balance;
                let liquid = u128::try_from(balance).map_err(|_| {
                    PortError::permanent("tron", format!("negative TRX balance {balance}"))
                })?;
                let staked = account.staked_sun().ok_or_else(|| {
                    PortError::permanent("tron", "negative or overflowing staked TRX figures")
                })?;
                let total = liquid.checked_add(staked).ok_or_else(|| {
                    PortError::permanent("tron", "TRX balance and stake overflow")
                })?;
                (total, staked)
            }
            (_, Some(contract)) => {
                let token = Self::address(contract)?;
                (self.client.trc20_balance(&token, &holder).await?, 0)
            }
            (_, None) => {
                return Err(PortError::permanent(
                    "tron",
                    format!("token {} has no contract", asset.code),
                ))
            }
        };
        Ok(OnchainBalance {
            units: Amount::from_units(units),
            staked_units: Amount::from_units(staked),
            block_number,
        })
    }
}
