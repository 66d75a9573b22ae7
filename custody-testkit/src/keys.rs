//! The keys of test wallets.

use custody_core::keys::{HdSigner, Mnemonic};

/// The BIP39 test vector mnemonic (all `abandon` and `about`): test wallets only.
pub const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";

/// An HD signer over [`MNEMONIC`].
pub fn test_signer() -> HdSigner {
    let mnemonic = Mnemonic::parse(MNEMONIC).expect("the test mnemonic parses");
    HdSigner::from_seed(&mnemonic.to_seed()).expect("the test seed derives")
}
