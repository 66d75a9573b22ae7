//! `custody serve` refuses unsafe chain settings at start-up: it exits non-zero, naming the
//! section and key, before it listens or scans anything.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use custody_e2e::{custody_bin, Custody};

/// Runs `custody serve` on `custody`'s data dir; returns its exit code and stderr. A serve that
/// is still running after 30 s is killed and reported as `None`.
fn serve_outcome(custody: &Custody) -> (Option<i32>, String) {
    let mut child = Command::new(custody_bin())
        .arg("--data-dir")
        .arg(custody.data_dir())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("CUSTODY_DATA_DIR")
        .env_remove("CUSTODY_PASSPHRASE")
        .env_remove("CUSTODY_BSC_RPC_URLS")
        .env_remove("CUSTODY_TRON_API_URLS")
        .env("CUSTODY_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("custody serve starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    (code, stderr)
}

#[test]
fn serve_refuses_zero_confirmations() {
    let custody = Custody::init();
    custody.edit_config("confirmations = 15", "confirmations = 0");
    let (code, stderr) = serve_outcome(&custody);
    assert!(
        code.is_some_and(|c| c != 0),
        "serve must exit non-zero, got {code:?}: {stderr}"
    );
    assert!(stderr.contains("[bsc] confirmations = 0"), "{stderr}");
    assert!(stderr.contains("at least 1"), "{stderr}");
}

#[test]
fn serve_refuses_a_reorganization_window_shorter_than_twice_the_confirmations() {
    let custody = Custody::init();
    custody.edit_config(
        "poll_interval_ms = 3000\nblocks_kept = 1000",
        "poll_interval_ms = 3000\nblocks_kept = 20",
    );
    let (code, stderr) = serve_outcome(&custody);
    assert!(
        code.is_some_and(|c| c != 0),
        "serve must exit non-zero, got {code:?}: {stderr}"
    );
    assert!(stderr.contains("[tron] blocks_kept = 20"), "{stderr}");
    assert!(stderr.contains("2 × confirmations = 38"), "{stderr}");
}

#[test]
fn serve_refuses_a_malformed_tron_genesis_block_id() {
    let custody = Custody::init();
    custody.edit_config(
        "genesis_block_id = \"00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc\"",
        "genesis_block_id = \"nile\"",
    );
    let (code, stderr) = serve_outcome(&custody);
    assert!(
        code.is_some_and(|c| c != 0),
        "serve must exit non-zero, got {code:?}: {stderr}"
    );
    assert!(stderr.contains("[tron] genesis_block_id"), "{stderr}");
}
