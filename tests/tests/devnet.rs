//! The newcomer's demo (`./scripts/dev.sh --devnet`): the devnet binary starts anvil with the
//! DEX and the catalog tokens, funds the hot wallet and runs `custody serve` against it; a user
//! then gets a deposit through `devnet send`, swaps it and sees the actual output, and withdraws
//! some to an address whose balance is read on the devnet's node. Stopped with
//! SIGINT to its process group, as Ctrl-C would, leaving nothing behind.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use custody_e2e::anvil::{anvil_bin, free_port, Anvil};
use custody_e2e::dex::USDT;
use custody_e2e::{custody_bin, Client, Cred};
use serde_json::{json, Value};

const E18: u128 = 1_000_000_000_000_000_000;

fn devnet_bin() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_devnet"))
}

fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// SIGINT to the devnet's whole process group (devnet, anvil, custody), then wait.
struct Group(std::process::Child);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", "--", &format!("-{}", self.0.id())])
            .status();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.0.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

#[test]
fn the_devnet_demo_deposits_swaps_and_withdraws_on_a_local_chain() {
    if anvil_bin().is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "anvil must be installed in CI"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("devnet");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(devnet_bin())
        .args(["up", data.to_str().unwrap(), &listen])
        .env("CUSTODY_BIN", custody_bin())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("devnet starts");
    // What the newcomer reads: drained to the end so the devnet never blocks on a full pipe.
    let printed = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let stdout = child.stdout.take().unwrap();
    let sink = std::sync::Arc::clone(&printed);
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    let _group = Group(child);
    wait_for(120, "the service", || {
        custody_e2e::try_raw_request(&listen, "GET", "/v1/health", &[], b"")
            .filter(|r| r.status == 200)
    });
    let shown = wait_for(30, "the printed commands", || {
        let text = printed.lock().unwrap().clone();
        text.contains("Ctrl-C stops both.").then_some(text)
    });
    // Each flow is printed from its quote to its execution and its record.
    for command in [
        "POST /v1/swaps/quote '",
        "POST /v1/swaps '{\"quote_id\"",
        "GET /v1/swaps/",
        "POST /v1/withdrawals/quote '",
        "POST /v1/withdrawals '{\"quote_id\"",
        "GET /v1/withdrawals/",
    ] {
        assert!(shown.contains(command), "{command} in:\n{shown}");
    }
    let cred: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("demo-credential.json")).unwrap())
            .unwrap();
    let client = Client {
        addr: listen.clone(),
        cred: Cred {
            api_key: cred["api_key"].as_str().unwrap().into(),
            secret: cred["hmac_secret"].as_str().unwrap().into(),
            tenant: "demo".into(),
            json: cred.clone(),
        },
    };
    let wallet = client.wallet("alice", "BSC");
    let address = wallet["address"].as_str().unwrap();

    // The helper sends test tokens as a real transfer: the service sees and credits it.
    let out = Command::new(devnet_bin())
        .args([
            "send",
            data.to_str().unwrap(),
            address,
            "USDT",
            &(250 * E18).to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(90, "the deposit credited", || {
        let d = client.deposits("");
        d.iter().any(|d| d["status"] == "credited").then_some(())
    });
    assert_eq!(client.available(&wallet, "USDT"), 250 * E18);

    // Swap it on the devnet's DEX.
    let q = client.post(
        "/v1/swaps/quote",
        &json!({ "external_user_id": "alice", "asset_in": "USDT", "asset_out": "BNB",
                 "amount_in_units": (100 * E18).to_string() }),
        None,
    );
    assert_eq!(q.status, 201, "{:?}", q.json());
    let s = client.post(
        "/v1/swaps",
        &json!({ "quote_id": q.json()["id"] }),
        Some("devnet-swap-1"),
    );
    assert_eq!(s.status, 201, "{:?}", s.json());
    let id = s.json()["id"].as_str().unwrap().to_owned();
    let done = wait_for(90, "the swap's end", || {
        let v = client.get(&format!("/v1/swaps/{id}")).json();
        (v["status"] == "confirmed" || v["status"] == "failed").then_some(v)
    });
    assert_eq!(done["status"], "confirmed", "{done}");
    let got: u128 = done["actual_amount_out_units"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(got > 0);
    assert_eq!(client.available(&wallet, "BNB"), got);

    // Withdraw some of what is left, as the printed commands do: quote, then execute.
    let destination = "0x00000000000000000000000000000000000000D5";
    let amount = 10 * E18;
    let q = client.post(
        "/v1/withdrawals/quote",
        &json!({ "external_user_id": "alice", "network": "BSC", "asset": "USDT",
                 "destination_address": destination, "amount_units": amount.to_string() }),
        None,
    );
    assert_eq!(q.status, 201, "{:?}", q.json());
    let w = client.post(
        "/v1/withdrawals",
        &json!({ "quote_id": q.json()["id"] }),
        Some("devnet-withdrawal-1"),
    );
    assert_eq!(w.status, 201, "{:?}", w.json());
    let id = w.json()["id"].as_str().unwrap().to_owned();
    let done = wait_for(90, "the withdrawal's end", || {
        let v = client.get(&format!("/v1/withdrawals/{id}")).json();
        (v["status"] == "confirmed" || v["status"] == "failed").then_some(v)
    });
    assert_eq!(done["status"], "confirmed", "{done}");
    // On the devnet's node, the destination holds exactly what was withdrawn.
    let devnet: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("devnet.json")).unwrap()).unwrap();
    let node = Anvil::attach(u16::try_from(devnet["rpc_port"].as_u64().unwrap()).unwrap());
    assert_eq!(node.token_balance(USDT, destination), amount);
}
