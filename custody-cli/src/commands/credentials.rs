//! `custody credentials create | list | revoke`.

use std::collections::BTreeSet;

use custody_core::auth::Scope;
use custody_core::ports::store::{read, write};
use custody_core::ports::Clock;
use custody_core::secret::Secret;
use custody_runtime::system::{OsEntropy, SystemClock};
use serde_json::json;

use crate::datadir::DataDir;
use crate::support::{cli_actor, open_store, print_json, runtime, vault_of};
use crate::CreateCredentialArgs;

pub fn create_credential(dir: &DataDir, args: &CreateCredentialArgs) -> Result<(), String> {
    use custody_core::auth::issue::{self, NewCredential};
    let tenant =
        custody_core::TenantId::parse(&args.tenant).map_err(|e| format!("--tenant: {e}"))?;
    let scopes: BTreeSet<Scope> = match &args.scopes {
        None => Scope::ALL.into_iter().collect(),
        Some(list) => {
            let names: Vec<String> = list.iter().map(|s| s.trim().to_owned()).collect();
            issue::check_scopes(&names).map_err(|issues| {
                let why: Vec<_> = issues.into_iter().map(|(_, issue)| issue).collect();
                format!("--scopes: {}", why.join("; "))
            })?
        }
    };
    let rate_limit = issue::check_rate_limit(u64::from(args.rate_limit))
        .map_err(|e| format!("--rate-limit {e}"))?;
    let request = NewCredential {
        tenant,
        scopes,
        admin: args.admin,
        rate_limit,
        pin: args.pin.clone().map(Secret::new),
        totp: args.totp,
    };
    let issued =
        issue::issue(request, &OsEntropy, SystemClock.now()).map_err(|e| format!("--pin {e}"))?;
    let config = dir.load_config()?;
    let (store, unlocked) = open_store(dir, &config)?;
    let to_store = issued.credential.seal(&vault_of(&unlocked));
    // Not audited: the operator holding the data dir is the root of trust that makes the first
    // admin key (the API's creations are audited, `credentials.create` in /admin/audit).
    runtime()?
        .block_on(write(store.as_ref(), move |tx| {
            Ok(tx.insert_credential(&to_store)?)
        }))
        .map_err(|e| format!("cannot store the credential: {e}"))?;
    store.close();
    print_json(&issued.shown_once())
}

pub fn list_credentials(dir: &DataDir) -> Result<(), String> {
    let config = dir.load_config()?;
    let (store, _) = open_store(dir, &config)?;
    let all = runtime()?
        .block_on(read(store.as_ref(), |tx| Ok(tx.list_credentials()?)))
        .map_err(|e| format!("cannot list credentials: {e}"))?;
    store.close();
    let views: Vec<_> = all
        .iter()
        .map(custody_core::auth::issue::CredentialView::of)
        .collect();
    print_json(&json!({ "data": views }))
}

pub fn revoke_credential(dir: &DataDir, api_key: &str) -> Result<(), String> {
    let config = dir.load_config()?;
    let (store, _) = open_store(dir, &config)?;
    let key = api_key.to_owned();
    let now = SystemClock.now();
    let audit_id = custody_core::ports::clock::new_uuid(&OsEntropy);
    let actor = cli_actor();
    let revoked = runtime()?.block_on(write(store.as_ref(), move |tx| {
        custody_core::auth::issue::revoke(
            tx,
            audit_id,
            &actor,
            &custody_core::auth::issue::CredentialRef::ApiKey(key.clone()),
            "revoked with the CLI",
            now,
        )
    }));
    store.close();
    match revoked {
        Ok(view) if view.revoked_at == Some(now) => {
            print_json(&json!({ "api_key": api_key, "revoked": true, "revoked_at": now }))
        }
        Ok(_) => Err(format!("no active credential has api key {api_key}")),
        Err(custody_core::error::CoreError::Refused(r))
            if r.code == custody_core::error::ErrorCode::NotFound =>
        {
            Err(format!("no active credential has api key {api_key}"))
        }
        Err(e) => Err(format!("cannot revoke: {e}")),
    }
}
