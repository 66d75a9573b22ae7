//! The chain ports' conformance suite (`custody_testkit::chain_ports`) against `BscChain` and
//! `BscSender` on a real EVM node (anvil, chain id 56) with an OpenZeppelin ERC-20 as the token.

use std::sync::Arc;

use async_trait::async_trait;
use custody_chain_bsc::{BscChain, BscSender, BscSenderSettings, BscSettings};
use custody_core::address::BscAddress;
use custody_core::asset::{Asset, AssetKind};
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::ports::chain::ChainSource;
use custody_core::ports::sender::ChainSender;
use custody_core::ports::signer::{HdPath, Signer};
use custody_core::Network;
use custody_e2e::anvil::Anvil;
use custody_testkit::chain_ports::{run_all, ChainWorld};

const ANVIL_MNEMONIC: &str = "test test test test test test test test test test test junk";

struct Bsc {
    anvil: Anvil,
    chain: Arc<BscChain>,
    sender: BscSender,
    signer: HdSigner,
    payer: String,
    token: Asset,
}

fn eip55(a: &str) -> String {
    BscAddress::parse(&a.to_lowercase()).unwrap().to_string()
}

fn native() -> Asset {
    Asset {
        network: Network::Bsc,
        code: "BNB".into(),
        kind: AssetKind::Native,
        decimals: 18,
        contract: None,
    }
}

fn world() -> Option<Bsc> {
    let anvil = Anvil::start()?;
    let payer = eip55(anvil.account(0));
    let contract = eip55(&anvil.deploy_token(&payer, "Test Token", "TT"));
    anvil.mint(&contract, &payer, &payer, 10u128.pow(24));
    let token = Asset {
        network: Network::Bsc,
        code: "TT".into(),
        kind: AssetKind::Bep20,
        decimals: 18,
        contract: Some(contract),
    };
    let chain = Arc::new(
        BscChain::new(BscSettings {
            urls: vec![anvil.url()],
            chain_id: 56,
            assets: vec![native(), token.clone()],
            ..BscSettings::default()
        })
        .unwrap(),
    );
    let signer = HdSigner::from_seed(&Mnemonic::parse(ANVIL_MNEMONIC).unwrap().to_seed()).unwrap();
    Some(Bsc {
        sender: BscSender::new(Arc::clone(&chain), BscSenderSettings::default()),
        chain,
        anvil,
        signer,
        payer,
        token,
    })
}

#[async_trait]
impl ChainWorld for Bsc {
    fn source(&self) -> &dyn ChainSource {
        self.chain.as_ref()
    }

    fn sender(&self) -> &dyn ChainSender {
        &self.sender
    }

    fn signer(&self) -> &dyn Signer {
        &self.signer
    }

    fn payer(&self) -> (String, HdPath) {
        let path = HdPath {
            network: Network::Bsc,
            account: 0,
            index: 0,
        };
        (self.payer.clone(), path)
    }

    fn native(&self) -> Asset {
        native()
    }

    fn token(&self) -> Asset {
        self.token.clone()
    }

    fn fresh_address(&self, i: u32) -> String {
        eip55(&format!("0x{:040x}", 0x00c0_ffee_0000_u64 + u64::from(i)))
    }

    async fn mine(&self) {
        self.anvil.mine(1);
    }

    fn lists_blocks(&self) -> bool {
        false
    }
}

#[tokio::test]
async fn the_bsc_adapter_conforms_to_the_chain_ports() {
    let Some(world) = world() else { return };
    run_all(&world).await;
}
