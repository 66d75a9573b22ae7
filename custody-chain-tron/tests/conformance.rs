//! The chain ports' conformance suite (`custody_testkit::chain_ports`) against `TronChain` and
//! `TronSender` on the TRON HTTP API test server (`custody_e2e::tron_api`), which checks and
//! executes what a node does, with mainnet's USDT contract as the token.

use async_trait::async_trait;
use custody_chain_tron::{TronChain, TronSender, TronSenderSettings, TronSettings};
use custody_core::asset::{Asset, AssetCatalog};
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::ports::chain::ChainSource;
use custody_core::ports::sender::ChainSender;
use custody_core::ports::signer::{HdPath, Signer};
use custody_core::Network;
use custody_e2e::tron_api::{TronApi, TEST_GENESIS_BLOCK_ID};
use custody_testkit::chain_ports::{run_all, ChainWorld};

const ABANDON_12: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                          abandon abandon abandon about";

/// The hot wallet path the service signs withdrawals with.
const PAYER: HdPath = HdPath {
    network: Network::Tron,
    account: 2_147_483_647,
    index: 0,
};

struct Tron {
    api: TronApi,
    chain: TronChain,
    sender: TronSender,
    signer: HdSigner,
    catalog: AssetCatalog,
}

impl Tron {
    fn start() -> Self {
        let api = TronApi::start();
        // Enough blocks for the default reference depth.
        api.append_empty(30);
        let mut settings = TronSettings::new(vec![api.url().to_owned()])
            .with_genesis_block_id(TEST_GENESIS_BLOCK_ID);
        settings.request_timeout_ms = 2_000;
        settings.connect_timeout_ms = 500;
        let catalog = AssetCatalog::mainnet();
        let chain = TronChain::new(&settings, &catalog).unwrap();
        let sender =
            TronSender::new(chain.client().clone(), TronSenderSettings::default()).unwrap();
        let signer = HdSigner::from_seed(&Mnemonic::parse(ABANDON_12).unwrap().to_seed()).unwrap();
        let world = Tron {
            api,
            chain,
            sender,
            signer,
            catalog,
        };
        let (payer, _) = world.payer();
        world.api.set_trx_balance(&payer, 1_000_000_000);
        let usdt = world.token().contract.unwrap();
        world
            .api
            .set_trc20_balance(&usdt, &payer, 1_000_000_000_000);
        world
    }
}

#[async_trait]
impl ChainWorld for Tron {
    fn source(&self) -> &dyn ChainSource {
        &self.chain
    }

    fn sender(&self) -> &dyn ChainSender {
        &self.sender
    }

    fn signer(&self) -> &dyn Signer {
        &self.signer
    }

    fn payer(&self) -> (String, HdPath) {
        let (address, _) = self.signer.keys().address(&PAYER).unwrap();
        (address, PAYER)
    }

    fn native(&self) -> Asset {
        self.catalog.native(Network::Tron).unwrap().clone()
    }

    fn token(&self) -> Asset {
        self.catalog.get(Network::Tron, "USDT").unwrap().clone()
    }

    fn fresh_address(&self, i: u32) -> String {
        let path = HdPath {
            network: Network::Tron,
            account: 7,
            index: i,
        };
        self.signer.keys().address(&path).unwrap().0
    }

    async fn mine(&self) {
        self.api.produce_block();
    }

    fn lists_blocks(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn the_tron_adapter_conforms_to_the_chain_ports() {
    run_all(&Tron::start()).await;
}
