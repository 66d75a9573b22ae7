//! What the process does about its own secrets before it holds any: the passphrase leaves the
//! environment as soon as it is read, and no core dump (or same-user ptrace) can copy the seed
//! out of memory.

use zeroize::Zeroizing;

/// Reads environment variable `name` and removes it, so no child process, library or crash
/// reporter that reads the environment later finds it. Call before any thread starts (the
/// environment is process-wide). An empty value counts as unset.
pub fn take_secret_env(name: &str) -> Option<Zeroizing<String>> {
    let value = std::env::var(name).ok().map(Zeroizing::new);
    std::env::remove_var(name);
    value.filter(|v| !v.is_empty())
}

/// Makes the process undumpable: no core file (RLIMIT_CORE 0) and PR_SET_DUMPABLE 0, which also
/// keeps other processes of the same user from attaching with ptrace or reading its memory
/// through /proc. Called before the seed is decrypted.
pub fn forbid_core_dumps() -> Result<(), String> {
    use rustix::process::{set_dumpable_behavior, setrlimit, DumpableBehavior, Resource, Rlimit};
    setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    )
    .map_err(|e| format!("cannot turn core dumps off (RLIMIT_CORE): {e}"))?;
    set_dumpable_behavior(DumpableBehavior::NotDumpable)
        .map_err(|e| format!("cannot make the process undumpable (PR_SET_DUMPABLE): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_read_once_and_leaves_the_environment() {
        let name = "CUSTODY_HARDEN_TEST_SECRET";
        std::env::set_var(name, "correct horse");
        assert_eq!(
            take_secret_env(name).as_deref().map(String::as_str),
            Some("correct horse")
        );
        assert!(std::env::var_os(name).is_none());
        assert!(take_secret_env(name).is_none());
        std::env::set_var(name, "");
        assert!(take_secret_env(name).is_none(), "empty is unset");
        assert!(std::env::var_os(name).is_none());
    }

    #[test]
    fn no_core_file_can_be_written_after_hardening() {
        forbid_core_dumps().unwrap();
        let limit = rustix::process::getrlimit(rustix::process::Resource::Core);
        assert_eq!((limit.current, limit.maximum), (Some(0), Some(0)));
        assert_eq!(
            std::fs::read_to_string("/proc/self/limits")
                .unwrap()
                .lines()
                .find(|l| l.starts_with("Max core file size"))
                .map(|l| l.split_whitespace().skip(4).take(2).collect::<Vec<_>>()),
            Some(vec!["0", "0"])
        );
        assert_eq!(
            rustix::process::dumpable_behavior().unwrap(),
            rustix::process::DumpableBehavior::NotDumpable
        );
    }
}
