//! Running part of a test in a network namespace of its own, with only a
//! loopback interface (`unshare --net --map-root-user`, no root needed):
//! where a test must look up a name that does not exist, the lookup then
//! fails on this machine instead of reaching a DNS server. Tests never send
//! traffic beyond loopback.
//!
//! Without user namespaces such a test is skipped with a printed reason,
//! unless `ROLECALL_REQUIRE_NETNS=1` (CI), which makes it a failure.

use std::process::{Command, Output};

/// Set in the environment of a test binary run inside the namespace.
pub const INSIDE: &str = "ROLECALL_TEST_INSIDE_NETNS";

/// Whether this machine can make such a namespace (and bring up its loopback).
pub fn available() -> bool {
    Command::new("unshare")
        .args(["--net", "--map-root-user", "ip", "link", "set", "lo", "up"])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Prints why `test` did not run; a failure when CI requires namespaces.
pub fn skip(test: &str) {
    assert!(
        std::env::var("ROLECALL_REQUIRE_NETNS").as_deref() != Ok("1"),
        "ROLECALL_REQUIRE_NETNS=1 but no network namespace can be made here \
         (unshare --net --map-root-user and ip from iproute2)"
    );
    eprintln!(
        "skipped {test}: it needs a network namespace (unshare --net --map-root-user, and ip \
         from iproute2), so that a name lookup cannot leave this machine"
    );
}

/// Runs `command` inside a new network namespace whose loopback is up;
/// answers its output.
pub fn run(command: &mut Command) -> Output {
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(ToOwned::to_owned).collect();
    let envs: Vec<_> = command
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect();
    Command::new("unshare")
        .args([
            "--net",
            "--map-root-user",
            "sh",
            "-c",
            "ip link set lo up && exec \"$0\" \"$@\"",
        ])
        .arg(program)
        .args(args)
        .envs(envs)
        .output()
        .expect("unshare runs")
}
