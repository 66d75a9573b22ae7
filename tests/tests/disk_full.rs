//! The data dir's file system fills up under a running server (a small tmpfs mounted for the
//! test; skipped with a message where mounting is not permitted): requests that write (every
//! authenticated one does: its nonce) are refused with a sanitized error while liveness goes
//! on, nothing is half written (SQLite's integrity check, the ledger reconciles, balances are
//! those of the acknowledged writes), and writes succeed again once space returns, without a
//! restart.

use std::path::{Path, PathBuf};
use std::process::Command;

use custody_e2e::Custody;
use serde_json::json;

/// A tmpfs of `size` at a fresh directory, unmounted (and removed) on drop.
struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        let at = std::env::temp_dir().join(format!("custody-disk-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&at).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&at)
            .status();
        if status.is_ok_and(|s| s.success()) {
            Some(SmallDisk { at })
        } else {
            let _ = std::fs::remove_dir(&at);
            None
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
        let _ = std::fs::remove_dir_all(&self.at);
    }
}

/// Writes `path` until the file system refuses more.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let block = vec![0x5a_u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    // What a 64 KiB block could not take: fill byte by byte to the last one.
    while f.write_all(&block[..1]).is_ok() {}
}

#[test]
fn a_full_disk_refuses_writes_cleanly_and_recovers_when_space_returns() {
    let Some(disk) = SmallDisk::mount("24m") else {
        println!("disk_full: skipped, mounting a tmpfs is not permitted here (needs root)");
        return;
    };
    let dir = tempfile::tempdir_in(&disk.at).unwrap();
    let mut c = Custody::init_in(dir, &["--insecure-dev-seed"], &[]);
    let cred = c.credential("acme", &["--rate-limit", "1000000"]);
    c.start();
    let client = c.client(&cred);
    let alice = client.wallet("alice", "TRON");
    client.wallet("bob", "TRON");
    c.adjust("acme", "alice", "TRON", "TRX", true, "1000000");

    let transfer = |key: &str| {
        client.post(
            "/v1/internal-transfers",
            &json!({ "sender_external_user_id": "alice", "recipient_external_user_id": "bob",
                     "asset": "TRX", "network": "TRON", "amount_units": "1" }),
            Some(key),
        )
    };
    let mut acknowledged = 0_u128;
    for i in 0..20 {
        assert_eq!(transfer(&format!("before-full-{i:04}")).status, 201);
        acknowledged += 1;
    }

    let filler = disk.at.join("filler");
    fill(&filler);
    let mut refused = 0;
    let mut refused_status = None;
    for i in 0..50 {
        let r = transfer(&format!("while-full-{i:04}"));
        match r.status {
            201 => acknowledged += 1,
            status => {
                assert!(
                    status == 500 || status == 503,
                    "a full disk is a server-side refusal, got {status} {}",
                    String::from_utf8_lossy(&r.body)
                );
                let body = String::from_utf8_lossy(&r.body).to_lowercase();
                assert!(
                    !body.contains("sqlite") && !body.contains("disk") && !body.contains("/"),
                    "sanitized: {body}"
                );
                assert_eq!(
                    r.header("retry-after"),
                    Some("1"),
                    "a transient refusal says when"
                );
                refused += 1;
                refused_status = Some((status, r.code()));
            }
        }
    }
    assert!(refused > 0, "the full disk refused no write");
    // Every authenticated request records its nonce (decisions §5), so reads are refused the
    // same way: a nonce that cannot be stored cannot be checked against a replay later.
    let read = client.get(&format!("/v1/wallets/{}", alice["id"].as_str().unwrap()));
    assert!(read.status == 500 || read.status == 503, "{}", read.status);
    println!(
        "disk_full: a refused write answers {refused_status:?}, a read {}",
        read.status
    );
    // Liveness is unaffected.
    let health = custody_e2e::raw_request(&c.addr, "GET", "/v1/health", &[], b"");
    assert_eq!(health.status, 200);

    // Space returns: writes succeed again, without a restart.
    std::fs::remove_file(&filler).unwrap();
    c.wait_for(30, "writes to succeed again", || {
        let r = transfer(&format!("after-{}", uuid::Uuid::new_v4()));
        (r.status == 201).then_some(())
    });
    acknowledged += 1;
    for i in 0..10 {
        assert_eq!(transfer(&format!("after-full-{i:04}")).status, 201);
        acknowledged += 1;
    }
    assert_eq!(
        client.available(&alice, "TRX"),
        1_000_000 - acknowledged,
        "alice paid exactly the acknowledged transfers"
    );
    let (balanced, out, err) = c.cli(&["ledger", "reconcile"]);
    assert!(balanced, "the ledger reconciles: {out} {err}");
    assert_eq!(c.stop(), Some(0), "a clean shutdown");
    let db = rusqlite::Connection::open(c.data_dir().join("custody.db")).unwrap();
    let integrity: String = db
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    println!(
        "disk_full: {refused} writes refused while full, {acknowledged} acknowledged and present"
    );
    drop(db);
    drop(c);
    drop(disk);
}
