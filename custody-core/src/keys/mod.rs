//! HD keys: BIP39 mnemonic, BIP32/BIP44 derivation and the in-memory signer.
