//! The simulator's CI profile: a hundred seeds of 300 steps each (about a minute). One seed:
//! `CUSTODY_SIM_SEED=<n>`; more seeds or steps: `CUSTODY_SIM_SEEDS`, `CUSTODY_SIM_STEPS`.

use custody_sim::run::{run, Report};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn every_seed_keeps_the_books_and_credits_each_deposit_once() {
    let steps = usize::try_from(env("CUSTODY_SIM_STEPS", 300)).unwrap_or(300);
    let seeds: Vec<u64> = match std::env::var("CUSTODY_SIM_SEED") {
        Ok(one) => vec![one.parse().expect("CUSTODY_SIM_SEED is a number")],
        Err(_) => (0..env("CUSTODY_SIM_SEEDS", 100)).collect(),
    };
    let started = std::time::Instant::now();
    let mut total = Report::default();
    for &seed in &seeds {
        match run(seed, steps) {
            Ok(r) => {
                total.steps += r.steps;
                total.deposits += r.deposits;
                total.reorgs += r.reorgs;
                total.deepest_reorg = total.deepest_reorg.max(r.deepest_reorg);
                total.credited += r.credited;
                total.ticks += r.ticks;
            }
            Err(failure) => panic!("{failure}"),
        }
    }
    println!(
        "{} seeds, {} steps, {} deposits, {} reorganizations (deepest {}), {} credited, {} scanner ticks in {:?}",
        seeds.len(),
        total.steps,
        total.deposits,
        total.reorgs,
        total.deepest_reorg,
        total.credited,
        total.ticks,
        started.elapsed()
    );
    if seeds.len() >= 10 {
        assert!(
            total.credited > 0 && total.reorgs > 0,
            "the runs did something"
        );
    }
}

#[test]
fn a_seed_replays_exactly() {
    let (a, b) = (run(42, 200), run(42, 200));
    let (a, b) = (a.expect("seed 42 passes"), b.expect("seed 42 passes"));
    assert_eq!(a, b, "the same counts and the same trace, step for step");
    assert_ne!(
        a.trace_digest,
        run(43, 200).expect("seed 43 passes").trace_digest
    );
}
