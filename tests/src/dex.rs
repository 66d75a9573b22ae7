//! BSC's DEX on anvil, from the bytecode npm ships (`@uniswap/v2-core@1.0.1`: factory and
//! pair; `@uniswap/v2-periphery@1.1.0-beta.0`: Router02, and WETH9 standing in for WBNB), with
//! every contract at its BSC mainnet address: the catalog's USDT and USDC (the OpenZeppelin test
//! token's runtime code), WBNB, PancakeSwap's factory and router. So a service with the default
//! catalog and `[swaps]` runs against it unchanged.
//!
//! Code is placed with `anvil_setCode` (constructors do not run there: the factory's
//! `feeToSetter`, WETH9's name and the tokens' roles stay unset, which nothing here reads); the
//! router is deployed once with the mainnet factory and WBNB addresses as its immutables, then
//! its runtime code is copied to the mainnet router address. Token balances are written into the
//! token's balance mapping with `anvil_setStorageAt` ([`Dex::deal`]).

use std::path::PathBuf;

use serde_json::{json, Value};
use tiny_keccak::{Hasher, Keccak};

use crate::anvil::{hex_u128, Anvil};

pub const USDT: &str = "0x55d398326f99059fF775485246999027B3197955";
pub const USDC: &str = "0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d";
pub const WBNB: &str = "0xbb4CdB9CBd36B01bD1cBaEBF2De08d9173bc095c";
pub const FACTORY: &str = "0xcA143Ce32Fe78f1f7019d7d551a6402fC5350c73";
pub const ROUTER: &str = "0x10ED43C718714eb63d5aA57B78B54704E256024E";

const DEADLINE: u128 = 4_000_000_000;

fn node_modules() -> PathBuf {
    std::env::var_os("CUSTODY_OZ_DIR")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .and_then(|oz| oz.parent()?.parent().map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.cache/node/node_modules")
        })
}

/// The creation bytecode of an npm artifact, without `0x`.
fn bytecode(package: &str, contract: &str) -> String {
    let path = node_modules()
        .join(package)
        .join("build")
        .join(format!("{contract}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}): run scripts/install-anvil.sh",
            path.display()
        )
    });
    let artifact: Value = serde_json::from_str(&text).expect("an artifact is JSON");
    artifact["bytecode"]
        .as_str()
        .or_else(|| artifact["evm"]["bytecode"]["object"].as_str())
        .expect("the artifact has a bytecode")
        .trim_start_matches("0x")
        .to_owned()
}

fn keccak(data: &[u8]) -> [u8; 32] {
    let mut k = Keccak::v256();
    k.update(data);
    let mut out = [0u8; 32];
    k.finalize(&mut out);
    out
}

/// A function selector, as hex.
fn selector(signature: &str) -> String {
    hex::encode(&keccak(signature.as_bytes())[..4])
}

fn word_address(a: &str) -> String {
    format!("{:0>64}", a.trim_start_matches("0x").to_ascii_lowercase())
}

fn word(v: u128) -> String {
    format!("{v:064x}")
}

/// The ABI encoding of `address[]` as a tail (length, then the words).
fn address_array(path: &[&str]) -> String {
    let mut out = word(path.len() as u128);
    for a in path {
        out.push_str(&word_address(a));
    }
    out
}

/// The DEX on anvil; `lp` is the dev account that provides liquidity.
pub struct Dex<'a> {
    pub anvil: &'a Anvil,
    pub lp: String,
}

impl<'a> Dex<'a> {
    /// Places the tokens, WBNB, the factory and the router at their mainnet addresses.
    pub fn deploy(anvil: &'a Anvil) -> Dex<'a> {
        let lp = anvil.account(0).to_owned();
        // The test token's runtime code, at USDT's and USDC's addresses.
        let token = anvil.deploy_token(&lp, "Tether USD", "USDT");
        let token_code = anvil.rpc("eth_getCode", json!([token, "latest"]));
        for at in [USDT, USDC] {
            anvil.rpc("anvil_setCode", json!([at, token_code]));
        }
        // WBNB and the factory: their runtime code is what their creation code returns.
        for (at, package, contract, args) in [
            (WBNB, "@uniswap/v2-periphery", "WETH9", String::new()),
            (
                FACTORY,
                "@uniswap/v2-core",
                "UniswapV2Factory",
                word_address(&lp),
            ),
        ] {
            let deployed = deploy(
                anvil,
                &lp,
                &format!("{}{args}", bytecode(package, contract)),
            );
            let code = anvil.rpc("eth_getCode", json!([deployed, "latest"]));
            anvil.rpc("anvil_setCode", json!([at, code]));
        }
        // The router keeps its factory and WETH in its code: deploy it with the mainnet ones.
        let router = deploy(
            anvil,
            &lp,
            &format!(
                "{}{}{}",
                bytecode("@uniswap/v2-periphery", "UniswapV2Router02"),
                word_address(FACTORY),
                word_address(WBNB)
            ),
        );
        let code = anvil.rpc("eth_getCode", json!([router, "latest"]));
        anvil.rpc("anvil_setCode", json!([ROUTER, code]));
        Dex { anvil, lp }
    }

    /// Gives `owner` exactly `amount` of `token` by writing the token's balance mapping (the
    /// slot is found by trying with a value no balance has, as forge-std's `deal` does).
    pub fn deal(&self, token: &str, owner: &str, amount: u128) {
        const PROBE: u128 = 0x5eed_5eed_5eed_5eed_5eed_5eed;
        for slot in 0u128..16 {
            let key = format!(
                "0x{}",
                hex::encode(keccak(
                    &hex::decode(format!("{}{}", word_address(owner), word(slot))).unwrap()
                ))
            );
            let before = self
                .anvil
                .rpc("eth_getStorageAt", json!([token, key, "latest"]));
            self.anvil.rpc(
                "anvil_setStorageAt",
                json!([token, key, format!("0x{}", word(PROBE))]),
            );
            if self.anvil.token_balance(token, owner) == PROBE {
                self.anvil.rpc(
                    "anvil_setStorageAt",
                    json!([token, key, format!("0x{}", word(amount))]),
                );
                assert_eq!(self.anvil.token_balance(token, owner), amount);
                return;
            }
            self.anvil
                .rpc("anvil_setStorageAt", json!([token, key, before]));
        }
        panic!("no balance slot found in {token}");
    }

    fn call(&self, from: &str, to: &str, data: String, value: u128) {
        let hash = self.anvil.send(json!({
            "from": from, "to": to, "data": format!("0x{data}"),
            "value": format!("{value:#x}"), "gas": "0x7a1200",
        }));
        let receipt = self.anvil.mined(&hash);
        assert_eq!(receipt["status"], "0x1", "{to} {data}: reverted");
    }

    fn approve_router(&self, token: &str, amount: u128) {
        self.call(
            &self.lp,
            token,
            format!(
                "{}{}{}",
                selector("approve(address,uint256)"),
                word_address(ROUTER),
                word(amount)
            ),
            0,
        );
    }

    /// A pool of two tokens with these reserves (the provider's tokens are dealt first).
    pub fn add_liquidity(&self, a: &str, b: &str, amount_a: u128, amount_b: u128) {
        for (t, amt) in [(a, amount_a), (b, amount_b)] {
            let held = self.anvil.token_balance(t, &self.lp);
            self.deal(t, &self.lp, held + amt);
            self.approve_router(t, amt);
        }
        self.call(
            &self.lp,
            ROUTER,
            format!(
                "{}{}{}{}{}{}{}{}{}",
                selector(
                    "addLiquidity(address,address,uint256,uint256,uint256,uint256,address,uint256)"
                ),
                word_address(a),
                word_address(b),
                word(amount_a),
                word(amount_b),
                word(0),
                word(0),
                word_address(&self.lp),
                word(DEADLINE)
            ),
            0,
        );
    }

    /// A pool of `token` and BNB (wrapped by the router) with these reserves.
    pub fn add_liquidity_bnb(&self, token: &str, amount_token: u128, wei: u128) {
        let held = self.anvil.token_balance(token, &self.lp);
        self.deal(token, &self.lp, held + amount_token);
        self.approve_router(token, amount_token);
        self.call(
            &self.lp,
            ROUTER,
            format!(
                "{}{}{}{}{}{}{}",
                selector("addLiquidityETH(address,uint256,uint256,uint256,address,uint256)"),
                word_address(token),
                word(amount_token),
                word(0),
                word(0),
                word_address(&self.lp),
                word(DEADLINE)
            ),
            wei,
        );
    }

    /// Swaps `amount_in` of `path[0]` through the router for the provider (moves the price).
    pub fn swap(&self, amount_in: u128, path: &[&str]) {
        let held = self.anvil.token_balance(path[0], &self.lp);
        self.deal(path[0], &self.lp, held + amount_in);
        self.approve_router(path[0], amount_in);
        self.call(
            &self.lp,
            ROUTER,
            format!(
                "{}{}{}{}{}{}{}",
                selector("swapExactTokensForTokens(uint256,uint256,address[],address,uint256)"),
                word(amount_in),
                word(0),
                word(5 * 32),
                word_address(&self.lp),
                word(DEADLINE),
                address_array(path)
            ),
            0,
        );
    }

    /// The router's `getAmountsOut(amount_in, path)`.
    pub fn amounts_out(&self, amount_in: u128, path: &[&str]) -> Vec<u128> {
        let data = format!(
            "0x{}{}{}{}",
            selector("getAmountsOut(uint256,address[])"),
            word(amount_in),
            word(2 * 32),
            address_array(path)
        );
        let v = self
            .anvil
            .rpc("eth_call", json!([{"to": ROUTER, "data": data}, "latest"]));
        let body = v.as_str().expect("hex").trim_start_matches("0x");
        // offset, length, then the amounts.
        let words: Vec<&str> = (0..body.len() / 64)
            .map(|i| &body[i * 64..i * 64 + 64])
            .collect();
        words[2..]
            .iter()
            .map(|w| hex_u128(&json!(format!("0x{w}"))))
            .collect()
    }
}

/// Deploys creation code `code` (hex, arguments appended) from `from`: the new address.
fn deploy(anvil: &Anvil, from: &str, code: &str) -> String {
    let hash = anvil.send(json!({"from": from, "data": format!("0x{code}"), "gas": "0x1c9c380"}));
    let receipt = anvil.mined(&hash);
    assert_eq!(receipt["status"], "0x1", "deployment reverted");
    receipt["contractAddress"]
        .as_str()
        .expect("a contract address")
        .to_owned()
}
