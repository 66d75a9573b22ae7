//! [`AuditRepo`](custody_core::admin::AuditRepo), [`AlertRepo`](custody_core::admin::AlertRepo) and
//! [`ControlRepo`](custody_core::admin::ControlRepo).

use std::sync::Arc;

use custody_core::admin::{self, Alert, AuditRecord, Control};
use custody_core::ports::store::{write, Store};

use super::{assert_port_error, at, r, suite, uid, w};

suite!(
    /// The audit trail, alerts and controls.
    admin_suite {
        audit_records_are_listed_newest_first,
        alerts_are_listed_newest_first_and_counted,
        acknowledged_alerts_leave_the_open_count_once,
        controls_are_replaced_and_listed_by_key,
    }
);

fn audit(n: u128, created: i64) -> AuditRecord {
    AuditRecord {
        id: uid(n),
        actor: format!("cli:user{n}"),
        action: "control.update".into(),
        target: "kill_switch.global".into(),
        old_value: None,
        new_value: Some(serde_json::json!({ "enabled": true, "n": n.to_string() })),
        reason: "conformance".into(),
        created_at: at(created),
    }
}

fn alert(n: u128, created: i64) -> Alert {
    Alert::open(
        uid(n),
        "deposit_reversed",
        "warning",
        format!("alert {n}"),
        None,
        at(created),
    )
}

fn control(key: &str, enabled: bool, updated: i64) -> Control {
    Control {
        control_key: key.into(),
        enabled,
        reason: format!("reason {updated}"),
        updated_by: "cli:test".into(),
        updated_at: at(updated),
    }
}

async fn audit_records_are_listed_newest_first(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let mut with_values = audit(3, 20);
    with_values.old_value = Some(serde_json::Value::Null);
    with_values.new_value = None;
    let rows = vec![
        audit(1, 10),
        audit(2, 30),
        with_values.clone(),
        audit(4, 30),
    ];
    let written = rows.clone();
    w(s, move |tx| {
        written.iter().try_for_each(|a| tx.append_audit(a))
    })
    .await
    .unwrap();
    assert_port_error(w(s, |tx| tx.append_audit(&audit(1, 40))).await);
    let listed = |limit: usize| {
        r(s, move |tx| {
            tx.list_audit(custody_core::page::Page::first(limit))
                .map(super::rows)
        })
    };
    // Newest first; equal times, the higher id first.
    assert_eq!(
        listed(10).await,
        vec![audit(4, 30), audit(2, 30), with_values, audit(1, 10)]
    );
    assert_eq!(listed(2).await, vec![audit(4, 30), audit(2, 30)]);
    assert!(listed(0).await.is_empty());
    // Equal times fall on either side of a page's end: the id orders them.
    for limit in [1, 3] {
        super::check_paging(s, limit, |tx, p| tx.list_audit(p), |a| a.id).await;
    }
}

async fn alerts_are_listed_newest_first_and_counted(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let mut critical = alert(2, 30);
    critical.severity = "critical".into();
    critical.reference_type = Some("deposit".into());
    critical.reference_id = Some(uid(77));
    let rows = [alert(1, 10), critical.clone(), alert(3, 20), alert(4, 30)];
    w(s, move |tx| rows.iter().try_for_each(|a| tx.raise_alert(a)))
        .await
        .unwrap();
    assert_port_error(w(s, |tx| tx.raise_alert(&alert(1, 40))).await);
    let mut info = alert(5, 40);
    info.severity = "info".into();
    assert_port_error(w(s, move |tx| tx.raise_alert(&info)).await);
    let (listed, two, open) = r(s, |tx| {
        Ok((
            tx.list_alerts(custody_core::page::Page::first(10))
                .map(super::rows)?,
            tx.list_alerts(custody_core::page::Page::first(2))
                .map(super::rows)?,
            tx.open_alert_count()?,
        ))
    })
    .await;
    assert_eq!(
        listed,
        vec![alert(4, 30), critical.clone(), alert(3, 20), alert(1, 10)]
    );
    assert_eq!(two, vec![alert(4, 30), critical]);
    assert_eq!(open, 4);
    for limit in [1, 3] {
        super::check_paging(s, limit, |tx, p| tx.list_alerts(p), |a| a.id).await;
    }
}

async fn acknowledged_alerts_leave_the_open_count_once(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let rows = [alert(1, 10), alert(2, 20), alert(3, 30)];
    w(s, move |tx| rows.iter().try_for_each(|a| tx.raise_alert(a)))
        .await
        .unwrap();
    let mut acked = alert(4, 40);
    acked.acknowledged_at = Some(at(41));
    assert_port_error(w(s, move |tx| tx.raise_alert(&acked)).await);
    assert_port_error(w(s, |tx| tx.acknowledge_alert(uid(9), at(50), "credential:x")).await);

    // The repository: the first acknowledgement stands.
    w(s, |tx| tx.acknowledge_alert(uid(2), at(50), "credential:a"))
        .await
        .unwrap();
    w(s, |tx| tx.acknowledge_alert(uid(2), at(60), "credential:b"))
        .await
        .unwrap();
    let (two, open, listed) = r(s, |tx| {
        Ok((
            tx.alert(uid(2))?,
            tx.open_alert_count()?,
            tx.list_alerts(custody_core::page::Page::first(10))
                .map(super::rows)?,
        ))
    })
    .await;
    let two = two.expect("the alert");
    assert_eq!(two.acknowledged_at, Some(at(50)));
    assert_eq!(two.acknowledged_by.as_deref(), Some("credential:a"));
    assert_eq!(open, 2);
    assert_eq!(listed[1], two, "the listing shows the acknowledgement");
    assert_eq!(r(s, |tx| tx.alert(uid(9))).await, None);

    // The command: the acknowledgement and one audit record, none for a repeat; 404, 422.
    let ack = |id: u128, audit: u128, reason: &'static str, now: i64| {
        write(s, move |tx| {
            admin::acknowledge_alert(tx, uid(audit), "credential:op", uid(id), reason, at(now))
        })
    };
    let first = ack(3, 100, " looked at it ", 70).await.unwrap();
    assert_eq!(first.acknowledged_at, Some(at(70)));
    let again = ack(3, 101, "again", 80).await.unwrap();
    assert_eq!(again, first, "acknowledging twice answers the same record");
    let audit = r(s, |tx| {
        tx.list_audit(custody_core::page::Page::first(10))
            .map(super::rows)
    })
    .await;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].action, "alert.acknowledge");
    assert_eq!(audit[0].target, uid(3).to_string());
    assert_eq!(audit[0].reason, "looked at it");
    assert_eq!(audit[0].actor, "credential:op");
    assert!(matches!(
        ack(9, 102, "x", 90).await,
        Err(custody_core::error::CoreError::Refused(ref e)) if e.code == custody_core::error::ErrorCode::NotFound
    ));
    assert!(matches!(
        ack(1, 103, "  ", 90).await,
        Err(custody_core::error::CoreError::Refused(ref e)) if e.code == custody_core::error::ErrorCode::ValidationFailed
    ));
    assert_eq!(r(s, |tx| tx.open_alert_count()).await, 1);
}

async fn controls_are_replaced_and_listed_by_key(store: Arc<dyn Store>) {
    let s = store.as_ref();
    w(s, |tx| {
        tx.put_control(&control("maintenance.TRON", true, 1))?;
        tx.put_control(&control("kill_switch.withdrawals", true, 2))?;
        tx.put_control(&control("kill_switch.global", false, 3))
    })
    .await
    .unwrap();
    w(s, |tx| {
        tx.put_control(&control("kill_switch.withdrawals", false, 4))
    })
    .await
    .unwrap();
    let (listed, one, none) = r(s, |tx| {
        Ok((
            tx.list_controls()?,
            tx.control("kill_switch.withdrawals")?,
            tx.control("kill_switch.swaps")?,
        ))
    })
    .await;
    assert_eq!(
        listed,
        vec![
            control("kill_switch.global", false, 3),
            control("kill_switch.withdrawals", false, 4),
            control("maintenance.TRON", true, 1),
        ]
    );
    assert_eq!(one, Some(control("kill_switch.withdrawals", false, 4)));
    assert_eq!(none, None);

    // The command: the control and its audit record, together.
    write(s, |tx| {
        admin::set_control(
            tx,
            uid(9),
            "cli:op",
            "kill_switch.global",
            true,
            "incident",
            at(10),
        )
    })
    .await
    .unwrap();
    let (restricted, audit) = r(s, |tx| {
        Ok((
            admin::restricted(tx, "kill_switch.swaps")?,
            tx.list_audit(custody_core::page::Page::first(10))
                .map(super::rows)?,
        ))
    })
    .await;
    assert!(restricted, "the global switch restricts everything");
    assert_eq!(audit.len(), 1);
    assert_eq!(
        audit[0].new_value,
        Some(serde_json::json!({ "enabled": true }))
    );
}
