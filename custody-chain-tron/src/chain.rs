//! [`TronChain`]: the [`ChainSource`] port over the TRON HTTP API.

use async_trait::async_trait;
use custody_core::address::TronAddress;
use custody_core::amount::Amount;
use custody_core::asset::{Asset, AssetCatalog, AssetKind};
use custody_core::error::PortError;
use custody_core::network::Network;
use custody_core::ports::chain::{BlockHeader, ChainSource, OnchainBalance, ScannedBlock};

use crate::client::{BroadcastOutcome, EndpointHealth, SettingsError, TronClient, TronSettings};
use crate::scan::{self, TronCatalog};
use crate::tx::SignedTransaction;

/// The TRON network for the core: head, headers, blocks with their transfers, balances.
///
/// Every call asks the node afresh (no block content is cached, per the port's rules). A block
/// scan is two reads: `wallet/getblockbynum`, then `wallet/gettransactioninfobyblocknum` when
/// the block has contract calls; when the two answers disagree (a reorganization between
/// them) the scan fails transiently and the core retries.
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

    fn address(address: &str) -> Result<TronAddress, PortError> {
        TronAddress::parse(address)
            .map_err(|e| PortError::permanent("tron", format!("address {address:?}: {e}")))
    }
}

#[async_trait]
impl ChainSource for TronChain {
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
        let infos = if scan::needs_infos(&block) {
            self.client.transaction_infos_by_block_num(number).await?
        } else {
            Vec::new()
        };
        let scanned = scan::scan(&block, &infos, &self.catalog)?;
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

    /// TRX through `wallet/getaccount` (`balance`, 0 for an unknown account), a TRC20 token
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
        let units = match (asset.kind, &asset.contract) {
            (AssetKind::Native, _) => {
                let balance = self.client.account(&holder).await?.map_or(0, |a| a.balance);
                u128::try_from(balance).map_err(|_| {
                    PortError::permanent("tron", format!("negative TRX balance {balance}"))
                })?
            }
            (_, Some(contract)) => {
                let token = Self::address(contract)?;
                self.client.trc20_balance(&token, &holder).await?
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
            block_number,
        })
    }
}
