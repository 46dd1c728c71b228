//! The shipped systemd units pass `systemd-analyze verify` with the
//! binaries' paths pointed at this build: no unknown key, no bad value, no
//! missing executable (systemd only warns on the first two, so any output
//! fails the test too).

use rlfleet_tests::{binary, workspace_root};
use std::process::Command;

#[test]
fn the_shipped_units_pass_systemd_analyze_verify() {
    let dir = tempfile::tempdir().unwrap();
    let mut units = Vec::new();
    for entry in std::fs::read_dir(workspace_root().join("systemd")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let mut text = std::fs::read_to_string(&path).unwrap();
        for bin in ["learner-server", "actor-client"] {
            let here = binary(bin);
            text = text.replace(&format!("/usr/local/bin/{bin}"), here.to_str().unwrap());
        }
        assert!(
            !text.contains("/usr/local/bin/"),
            "{name} starts a binary this test does not know"
        );
        // A template is verified as one of its instances.
        let name = name.replace("@.", "@ci.");
        std::fs::write(dir.path().join(&name), text).unwrap();
        units.push(name);
    }
    assert_eq!(units.len(), 3, "units: {units:?}");
    let out = rlfleet_tests::output_within(
        Command::new("systemd-analyze")
            .arg("verify")
            .args(units.iter().map(|u| format!("./{u}")))
            .current_dir(dir.path()),
        std::time::Duration::from_secs(120),
        "systemd-analyze verify (Debian's systemd, installed by scripts/setup.sh)",
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{said}"
    );
    assert!(
        said.trim().is_empty(),
        "systemd-analyze verify warned:\n{said}"
    );

    // It does catch what it is here for: a misspelt key fails this check.
    let bad = dir.path().join("rlfleet-bad.service");
    let learner = std::fs::read_to_string(dir.path().join("rlfleet-learner.service")).unwrap();
    std::fs::write(&bad, learner.replace("Restart=", "Restrat=")).unwrap();
    let out = rlfleet_tests::output_within(
        Command::new("systemd-analyze")
            .args(["verify", "./rlfleet-bad.service"])
            .current_dir(dir.path()),
        std::time::Duration::from_secs(120),
        "systemd-analyze verify of a bad unit",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Unknown key 'Restrat'"), "{stderr}");
}
