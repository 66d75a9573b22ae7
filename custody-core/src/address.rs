//! Network addresses: BSC (EIP-55 hex) and TRON (base58check).
