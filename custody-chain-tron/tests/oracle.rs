//! Encoding oracle: TronWeb (the TRON Foundation's JavaScript SDK, installed into `.cache/node`
//! by `scripts/install-tronweb.sh`) builds and signs the same TRX and TRC20 transfers OFFLINE
//! from the same reference blocks, and everything must match byte for byte: `raw_data_hex`,
//! txID, the signature's `r ‖ s` (RFC 6979 on both sides) and its recovery id (TronWeb writes
//! `v = 27 + id`, we write the id; java-tron accepts both), and the addresses of the keys.
//!
//! Our side signs through `HdSigner` (the `Signer` port). TronWeb needs raw private keys: they
//! are derived here, test-only, with the `bip32` crate directly from the same mnemonic and
//! paths, and handed to the node script on stdin.
//!
//! Needs `node` and TronWeb: `CUSTODY_NODE_DIR` (the folder holding `node_modules/`, as
//! printed by `scripts/install-tronweb.sh`, which `scripts/test.sh` runs), else
//! `<repo>/.cache/node`. When TronWeb is in neither place the tests print why and skip,
//! except under `CI=true`, where they fail.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use custody_chain_tron::fees::{TRC20_TRANSFER_BANDWIDTH_BYTES, TRX_TRANSFER_BANDWIDTH_BYTES};
use custody_chain_tron::{sign, trc20_transfer, trx_transfer, RefBlock, TxTiming};
use custody_core::address::TronAddress;
use custody_core::amount::Amount;
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::network::Network;
use custody_core::ports::signer::HdPath;
use serde_json::{json, Value};

const ABANDON_12: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                          abandon abandon abandon about";
const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";

/// The folder holding `node_modules/tronweb`, or `None` (after saying why) to skip.
fn node_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("CUSTODY_NODE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(".cache")
                .join("node")
        });
    if dir.join("node_modules/tronweb/package.json").is_file() {
        return Some(dir);
    }
    let why = format!(
        "TronWeb is not installed in {}: run scripts/install-tronweb.sh and export \
         CUSTODY_NODE_DIR to the folder it prints",
        dir.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("skipping the TronWeb oracle: {why}");
    None
}

/// Runs tests/oracle/build.js with `input` on stdin; `None` when TronWeb is not installed.
fn tronweb(input: &Value) -> Option<Value> {
    let dir = node_dir()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/build.js");
    let mut child = Command::new("node")
        .arg(&script)
        .env("NODE_PATH", dir.join("node_modules"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (apt-get install nodejs)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "build.js failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("build.js prints JSON"))
}

fn path(account: u32, index: u32) -> HdPath {
    HdPath {
        network: Network::Tron,
        account,
        index,
    }
}

/// The raw private key at `path`, derived with the bip32 crate alone (test-only export).
fn raw_private_key(p: &HdPath) -> String {
    let seed = Mnemonic::parse(ABANDON_12).unwrap().to_seed();
    let derivation: bip32::DerivationPath = p.render().parse().unwrap();
    let xprv = bip32::XPrv::derive_from_path(seed.expose(), &derivation).unwrap();
    hex::encode(xprv.private_key().to_bytes())
}

fn signer() -> HdSigner {
    HdSigner::from_seed(&Mnemonic::parse(ABANDON_12).unwrap().to_seed()).unwrap()
}

fn address(signer: &HdSigner, p: &HdPath) -> TronAddress {
    TronAddress::parse(&signer.keys().address(p).unwrap().0).unwrap()
}

/// A reference block as the node would give it: number and a block id starting with it.
fn block(number: u64, fill: u8, timestamp_ms: i64, lifetime_ms: i64) -> (RefBlock, TxTiming) {
    let mut id = [fill; 32];
    id[..8].copy_from_slice(&number.to_be_bytes());
    (
        RefBlock::from_block(number, &id),
        TxTiming::new(timestamp_ms, lifetime_ms),
    )
}

fn block_json(r: &RefBlock, t: &TxTiming) -> Value {
    json!({
        "ref_block_bytes": hex::encode(r.bytes),
        "ref_block_hash": hex::encode(r.hash),
        "expiration": t.expiration_ms,
        "timestamp": t.timestamp_ms,
    })
}

enum Kind {
    Trx,
    Trc20 { token: TronAddress, fee_limit: u64 },
}

struct Case {
    kind: Kind,
    from: HdPath,
    to: TronAddress,
    amount: u128,
    reference: (RefBlock, TxTiming),
}

#[test]
fn tronweb_builds_and_signs_the_same_trx_and_trc20_transfers() {
    let signer = signer();
    let paths = [path(0, 0), path(0, 1), path(0, 7), path(3, 2)];
    let usdt = TronAddress::parse(USDT).unwrap();
    let other_token = TronAddress::from_bytes([0x5a; 20]);
    let blocks = [
        block(70_000_123, 0xab, 1_760_000_000_123, 60_000),
        block(1, 0x01, 1_529_891_469_000, 24 * 3_600_000),
        block(0xffff_ff01, 0xfe, 1_900_000_000_000, 1),
    ];
    let to = |i: usize| address(&signer, &paths[i]);
    let mut cases = Vec::new();
    for (b, reference) in blocks.iter().enumerate() {
        for (amount, from, recipient) in [
            (1u128, 0, 1),
            (1_234_567, 1, 0),
            (100_000_000_000, 2, 3),
            // Largest sum TronWeb's sendTrx keeps exact (it takes a JS number).
            ((1 << 53) - 1, 3, 0),
        ] {
            cases.push(Case {
                kind: Kind::Trx,
                from: paths[from],
                to: to(recipient),
                amount,
                reference: *reference,
            });
        }
        for (amount, fee_limit, token) in [
            (1u128, 1, usdt),
            (1_000_000, 30_000_000, usdt),
            (123_456_789_012_345, 15_000_000_000, other_token),
            (u128::MAX, 100_000_000, usdt),
        ] {
            cases.push(Case {
                kind: Kind::Trc20 { token, fee_limit },
                from: paths[b % paths.len()],
                to: to((b + 1) % paths.len()),
                amount,
                reference: *reference,
            });
        }
    }
    // A transfer to an address outside our keys, in hex form on the wire.
    cases.push(Case {
        kind: Kind::Trx,
        from: paths[0],
        to: usdt,
        amount: 42,
        reference: blocks[0],
    });

    let keys: Vec<String> = paths.iter().map(raw_private_key).collect();
    let key_of = |p: &HdPath| paths.iter().position(|q| q == p).unwrap();
    let input = json!({
        "keys": keys,
        "cases": cases.iter().map(|c| {
            let (r, t) = &c.reference;
            match &c.kind {
                Kind::Trx => json!({
                    "kind": "trx", "key": key_of(&c.from), "to": c.to.to_string(),
                    "amount": c.amount.to_string(), "block": block_json(r, t),
                }),
                Kind::Trc20 { token, fee_limit } => json!({
                    "kind": "trc20", "key": key_of(&c.from), "token": token.to_string(),
                    "to": c.to.to_string(), "amount": c.amount.to_string(),
                    "fee_limit": fee_limit, "block": block_json(r, t),
                }),
            }
        }).collect::<Vec<_>>(),
    });
    let Some(oracle) = tronweb(&input) else {
        return;
    };
    let txs = oracle["txs"].as_array().unwrap();
    assert_eq!(txs.len(), cases.len());

    for (i, (case, theirs)) in cases.iter().zip(txs).enumerate() {
        let owner = address(&signer, &case.from);
        let (r, t) = case.reference;
        let amount = Amount::from_units(case.amount);
        let unsigned = match &case.kind {
            Kind::Trx => trx_transfer(&owner, &case.to, amount, r, t).unwrap(),
            Kind::Trc20 { token, fee_limit } => {
                trc20_transfer(&owner, token, &case.to, amount, *fee_limit, r, t).unwrap()
            }
        };
        assert_eq!(
            theirs["raw_data_hex"].as_str().unwrap(),
            unsigned.raw_data_hex(),
            "case {i}: raw_data_hex"
        );
        assert_eq!(
            theirs["txID"].as_str().unwrap(),
            unsigned.txid_hex(),
            "case {i}: txID"
        );
        assert_eq!(theirs["owner"].as_str().unwrap(), owner.to_string());

        let signed = sign(unsigned, &signer, &case.from).unwrap();
        let their_sig = theirs["signature"].as_str().unwrap().to_ascii_lowercase();
        let ours = signed.signature();
        assert_eq!(
            &their_sig[..128],
            hex::encode(&ours[..64]),
            "case {i}: r and s"
        );
        let their_v = u8::from_str_radix(&their_sig[128..], 16).unwrap();
        assert_eq!(their_v, 27 + ours[64], "case {i}: recovery id");

        // Bandwidth constants hold for the transactions we send (4-byte amounts and up).
        if case.amount >= 1_000_000 && case.amount < (1 << 53) {
            let expected = match case.kind {
                Kind::Trx => TRX_TRANSFER_BANDWIDTH_BYTES,
                Kind::Trc20 { .. } => TRC20_TRANSFER_BANDWIDTH_BYTES,
            };
            let got = signed.bandwidth_bytes();
            assert!(
                got.abs_diff(expected) <= 6,
                "case {i}: bandwidth {got} far from the constant {expected}"
            );
        }
    }
}

#[test]
fn tronweb_derives_the_same_addresses_from_the_private_keys() {
    let signer = signer();
    let paths: Vec<HdPath> = (0..5)
        .map(|i| path(0, i))
        .chain([
            path(1, 0),
            path(HdPath::COMPONENT_MAX, HdPath::COMPONENT_MAX),
        ])
        .collect();
    let keys: Vec<String> = paths.iter().map(raw_private_key).collect();
    let Some(oracle) = tronweb(&json!({ "keys": keys, "cases": [] })) else {
        return;
    };
    let theirs = oracle["addresses"].as_array().unwrap();
    for (p, their) in paths.iter().zip(theirs) {
        assert_eq!(
            their.as_str().unwrap(),
            address(&signer, p).to_string(),
            "{}",
            p.render()
        );
    }
    // The published first TRON address of the abandon mnemonic.
    assert_eq!(theirs[0], "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH");
}
