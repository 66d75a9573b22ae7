//! `custody.toml` as a whole: the file `init` writes, edited, loaded as `serve` loads it.
//! Each section's own rules are tested beside its type.

use custody_chain_bsc::BscSenderSettings;
use custody_chain_tron::config::genesis_block_id;

use super::*;

#[test]
fn defaults_round_trip_through_toml() {
    let c = Config::default_for_init();
    let text = toml::to_string_pretty(&c).unwrap();
    let back: Config = toml::from_str(&text).unwrap();
    let catalog = back.catalog().unwrap();
    assert_eq!(catalog, AssetCatalog::mainnet());
    assert_eq!(back.swaps.pairs(&catalog).unwrap().len(), 3);
    assert_eq!(back.tron.confirmations, 19);
    back.validate().unwrap();
    let limits = back.server.limits().unwrap();
    assert_eq!(limits.connections_per_peer_max, 128);
    assert_eq!(limits.body_read_timeout_ms, 10_000);
}

/// `init`'s file with `edit` applied (`from` must occur once), loaded as `serve` loads it.
fn load_edited(edits: &[(&str, &str)]) -> Result<Config, String> {
    let dir = tempfile::tempdir().unwrap();
    let data = crate::datadir::DataDir::new(dir.path().to_path_buf());
    data.write_config(&Config::default_for_init()).unwrap();
    let mut text = std::fs::read_to_string(data.config_path()).unwrap();
    for (from, to) in edits {
        assert_eq!(text.matches(from).count(), 1, "{from:?} once in:\n{text}");
        text = text.replacen(from, to, 1);
    }
    std::fs::write(data.config_path(), text).unwrap();
    data.load_config()
}

#[test]
fn sending_settings_are_written_by_init_read_and_checked() {
    let c = load_edited(&[(
        "gas_price_cap_wei = 50000000000",
        "gas_price_cap_wei = 7000000000",
    )])
    .unwrap();
    assert_eq!(
        BscSenderSettings::from_config(&c.bsc.sending).gas_price_cap_wei,
        7_000_000_000
    );
    let policy = c.bsc.sending.engine_policy(Network::Bsc, 15);
    assert_eq!(
        policy.gas_price_cap_wei, 7_000_000_000,
        "one cap for price and replacements"
    );
    assert_eq!(policy.replace_after_ms, 60_000);
    let err = load_edited(&[(
        "gas_price_floor_wei = 50000000",
        "gas_price_floor_wei = 60000000000",
    )])
    .unwrap_err();
    assert!(err.contains("above gas_price_cap_wei"), "{err}");
    let err = load_edited(&[(
        "bump_percent = 12\nlease_ms = 60000\ngas_price_floor_wei",
        "bump_percent = 9\nlease_ms = 60000\ngas_price_floor_wei",
    )])
    .unwrap_err();
    assert!(err.contains("[bsc.sending] bump_percent = 9"), "{err}");
    let mut c = Config::default_for_init();
    c.tron.sending.gas_price_cap_wei = Some(1);
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("[tron.sending]"));
}

#[test]
fn zero_confirmations_are_refused_for_either_network() {
    for (from, to, named) in [
        (
            "confirmations = 15",
            "confirmations = 0",
            "[bsc] confirmations = 0",
        ),
        (
            "confirmations = 19",
            "confirmations = 0",
            "[tron] confirmations = 0",
        ),
    ] {
        let err = load_edited(&[(from, to)]).unwrap_err();
        assert!(err.contains(named), "{err}");
        assert!(err.contains("at least 1"), "{err}");
        assert!(err.contains("custody.toml"), "the file is named: {err}");
    }
}

#[test]
fn blocks_kept_below_twice_the_confirmations_is_refused() {
    // TRON: 19 confirmations need 38 blocks kept.
    let tron_kept = "poll_interval_ms = 3000\nblocks_kept = 1000";
    let err = load_edited(&[(tron_kept, "poll_interval_ms = 3000\nblocks_kept = 37")]).unwrap_err();
    assert!(err.contains("[tron] blocks_kept = 37"), "{err}");
    assert!(err.contains("2 × confirmations = 38"), "{err}");
    let ok = load_edited(&[(tron_kept, "poll_interval_ms = 3000\nblocks_kept = 38")]).unwrap();
    assert_eq!(ok.tron.blocks_kept, 38);

    // BSC: raising the confirmations past half the default window is refused too.
    let err = load_edited(&[("confirmations = 15", "confirmations = 501")]).unwrap_err();
    assert!(err.contains("[bsc] blocks_kept = 1000"), "{err}");
    assert!(err.contains("2 × confirmations = 1002"), "{err}");
    assert!(load_edited(&[("confirmations = 15", "confirmations = 500")]).is_ok());
    // One is the least accepted, with a window of two.
    let ok = load_edited(&[
        ("confirmations = 15", "confirmations = 1"),
        (
            "poll_interval_ms = 1000\nblocks_kept = 1000",
            "poll_interval_ms = 1000\nblocks_kept = 2",
        ),
    ]);
    assert_eq!(ok.unwrap().bsc.confirmations, 1);
}

#[test]
fn the_tron_genesis_is_written_by_init_and_checked() {
    let mainnet = custody_chain_tron::MAINNET_GENESIS_BLOCK_ID;
    let c = load_edited(&[]).unwrap();
    assert_eq!(c.tron.genesis_block_id.as_deref(), Some(mainnet));
    assert_eq!(c.bsc.genesis_block_id, None);
    assert_eq!(genesis_block_id(&c.tron), mainnet);
    let line = format!("genesis_block_id = \"{mainnet}\"");

    // Absent: mainnet's.
    let c = load_edited(&[(&line, "")]).unwrap();
    assert_eq!(c.tron.genesis_block_id, None);
    assert_eq!(genesis_block_id(&c.tron), mainnet);

    // Nile's, written with 0x and in capitals: normalized.
    let nile = "0000000000000000d698d4192c56cb6be724a558448e2684802de4d6cd8690dc";
    let edited = format!("genesis_block_id = \"0x{}\"", nile.to_ascii_uppercase());
    let c = load_edited(&[(&line, &edited)]).unwrap();
    assert_eq!(genesis_block_id(&c.tron), nile);

    for bad in [
        "genesis_block_id = \"\"",
        "genesis_block_id = \"1ebf88508a03865c71d452e25f4d51194196a1d22b6653dc\"",
        // Not block 0: the first 8 bytes are the block number.
        "genesis_block_id = \"00000000000000011ebf88508a03865c71d452e25f4d51194196a1d22b6653dc\"",
        "genesis_block_id = \"00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dz\"",
    ] {
        let err = load_edited(&[(&line, bad)]).unwrap_err();
        assert!(err.contains("[tron] genesis_block_id"), "{bad}: {err}");
    }

    let err =
        load_edited(&[("confirmations = 15", &format!("confirmations = 15\n{line}"))]).unwrap_err();
    assert!(err.contains("[bsc] genesis_block_id"), "{err}");
}

#[test]
fn a_server_section_written_before_the_connection_limits_still_loads() {
    let mut text = toml::to_string_pretty(&Config::default_for_init()).unwrap();
    for key in [
        "connections_per_peer_max",
        "idle_timeout_ms",
        "body_read_timeout_ms",
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap()
            .to_owned();
        text = text.replace(&format!("{line}\n"), "");
    }
    let back: Config = toml::from_str(&text).unwrap();
    assert_eq!(back.server.idle_timeout_ms, 10_000);
    let mut zero = back.server.clone();
    zero.body_read_timeout_ms = 0;
    let err = zero.limits().unwrap_err();
    assert!(err.to_string().contains("body_read_timeout_ms"));
    assert_eq!(
        (err.key.as_str(), err.value.as_deref()),
        ("[server] body_read_timeout_ms", Some("0"))
    );
}

#[test]
fn the_reconciliation_schedule_is_written_by_init_read_and_checked() {
    let c = load_edited(&[
        ("ledger_every_ms = 600000", "ledger_every_ms = 5000"),
        ("treasury_every_ms = 3600000", "treasury_every_ms = 0"),
    ])
    .unwrap();
    assert_eq!(
        c.reconciliation,
        ReconciliationConfig {
            ledger_every_ms: 5_000,
            treasury_every_ms: 0,
            claim_interval_ms: 1_000,
            lease_ms: 600_000,
        }
    );
    // A file written before the section existed gets the defaults of decisions §14.
    let mut text = toml::to_string_pretty(&Config::default_for_init()).unwrap();
    let start = text.find("[reconciliation]").unwrap();
    let last = "lease_ms = 600000\n";
    let end = start + text[start..].find(last).unwrap() + last.len();
    text.replace_range(start..end, "");
    assert!(!text.contains("every_ms"), "{text}");
    let back: Config = toml::from_str(&text).unwrap();
    assert_eq!(back.reconciliation.ledger_every_ms, 600_000);
    assert_eq!(back.reconciliation.treasury_every_ms, 3_600_000);
    let err = load_edited(&[("lease_ms = 600000", "lease_ms = 999")]).unwrap_err();
    assert!(err.contains("[reconciliation] lease_ms = 999"), "{err}");
    let err =
        load_edited(&[("treasury_every_ms = 3600000", "treasury_every_ms = -1")]).unwrap_err();
    assert!(err.contains("treasury_every_ms"), "{err}");
}
