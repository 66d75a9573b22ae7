//! Webhook receivers that misbehave, beside a healthy one: a receiver that is slow (holds
//! each request past the delivery timeout), one that flaps (503 and 204 in turn) and one that
//! answers 410 Gone. The healthy tenant's events arrive while the slow one's attempts time out;
//! the slow and flapping tenants' events arrive in the end, each with one event id across its
//! attempts; the 410 tenant's are dead-lettered at the first answer. webhooks.rs covers the
//! retry schedule, the tenth failure and `kill -9` with attempts in flight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use custody_e2e::receiver::{set_config, Answer, Receiver};
use custody_e2e::Custody;

const WAIT: Duration = Duration::from_secs(90);

fn register(c: &Custody, tenant: &str, url: &str) -> String {
    c.cli_ok(&["webhooks", "set", "--tenant", tenant, "--url", url])["secret"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn queue_test(c: &Custody, tenant: &str) -> String {
    c.cli_ok(&["webhooks", "test", "--tenant", tenant])["event_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn slow_flapping_and_gone_receivers_cost_their_own_tenant_only() {
    let mut c = Custody::init();
    let dir = c.data_dir();
    set_config(&dir, "webhooks", "allow_insecure_loopback", "true");
    set_config(&dir, "webhooks", "retry_base_ms", "50");
    set_config(&dir, "webhooks", "retry_cap_ms", "200");
    set_config(&dir, "webhooks", "poll_interval_ms", "50");
    set_config(&dir, "webhooks", "timeout_ms", "1000");
    // The slow receiver holds its first three requests (the service gives up after 1 s each);
    // the flapping one answers 503 and 204 in turn.
    let never = Arc::new(AtomicBool::new(false));
    let slow_seen = Arc::new(AtomicUsize::new(0));
    let flaps = Arc::new(AtomicUsize::new(0));
    let (n, s, f) = (
        Arc::clone(&never),
        Arc::clone(&slow_seen),
        Arc::clone(&flaps),
    );
    let receiver = Receiver::start(move |_, r| match r.path.as_str() {
        "/slow" if s.fetch_add(1, Ordering::SeqCst) < 3 => Answer::Hold(Arc::clone(&n)),
        "/flapping" if f.fetch_add(1, Ordering::SeqCst) % 2 == 0 => Answer::Status(503),
        "/gone" => Answer::Status(410),
        _ => Answer::Status(204),
    });
    let secrets: HashMap<&str, String> = [
        ("slow", "/slow"),
        ("flapping", "/flapping"),
        ("gone", "/gone"),
        ("healthy", "/healthy"),
    ]
    .iter()
    .map(|(t, p)| (*t, register(&c, t, &receiver.url(p))))
    .collect();
    let admin = c.credential("ops", &["--admin"]);
    c.start();

    let slow_event = queue_test(&c, "slow");
    receiver.wait_until(WAIT, "the slow receiver holding an attempt", |r| {
        r.iter().any(|r| r.path == "/slow")
    });
    // While the slow receiver holds attempts, the healthy tenant's events go through.
    let healthy: Vec<String> = (0..3).map(|_| queue_test(&c, "healthy")).collect();
    let flapping: Vec<String> = (0..3).map(|_| queue_test(&c, "flapping")).collect();
    let gone = queue_test(&c, "gone");
    receiver.wait_until(
        Duration::from_secs(3),
        "healthy deliveries beside a slow receiver",
        |r| {
            healthy.iter().all(|id| {
                r.iter()
                    .any(|r| r.event_id() == id && r.answered == Some(204))
            })
        },
    );

    for (id, path) in
        std::iter::once((&slow_event, "/slow")).chain(flapping.iter().map(|id| (id, "/flapping")))
    {
        receiver.wait_until(WAIT, &format!("{path} delivering {id}"), |r| {
            r.iter()
                .any(|r| r.path == path && r.event_id() == id && r.answered == Some(204))
        });
    }
    let got = receiver.requests();
    // One event id across all attempts of an event, each attempt signed for its tenant.
    for r in &got {
        let tenant = r.path.trim_start_matches('/');
        assert!(r.verifies_with(&secrets[tenant]), "{tenant}: signature");
    }
    let slow_attempts: Vec<_> = got.iter().filter(|r| r.path == "/slow").collect();
    assert!(
        slow_attempts.len() >= 4,
        "three timeouts, then the delivery"
    );
    assert!(slow_attempts.iter().all(|r| r.event_id() == slow_event));
    for id in &flapping {
        let answered_ok = got
            .iter()
            .filter(|r| r.event_id() == id && r.answered == Some(204))
            .count();
        assert_eq!(answered_ok, 1, "{id}: delivered once");
    }
    let gone_attempts = got.iter().filter(|r| r.path == "/gone").count();

    let admin = c.client(&admin);
    let events = c.wait_for(60, "the 410 event dead-lettered", || {
        let events = admin.get("/v1/admin/webhooks?limit=100").json();
        let dead = events["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["id"] == gone.as_str() && e["status"] == "dead_lettered");
        dead.then_some(events)
    });
    let status_of = |id: &str| {
        events["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .map(|e| e["status"].as_str().unwrap().to_owned())
    };
    assert_eq!(status_of(&gone).as_deref(), Some("dead_lettered"));
    assert_eq!(gone_attempts, 1, "410 is permanent: one attempt");
    assert_eq!(status_of(&slow_event).as_deref(), Some("delivered"));
    for id in flapping.iter().chain(&healthy) {
        assert_eq!(status_of(id).as_deref(), Some("delivered"), "{id}");
    }
    never.store(true, Ordering::SeqCst);
    assert_eq!(c.stop(), Some(0));
}
