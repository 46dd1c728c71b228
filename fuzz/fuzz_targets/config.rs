//! Run configs from outside: any text as a TOML file, and any bytes as the
//! JSON body of `POST /v1/runs`, parse to a config or an error that names
//! the problem, never a panic; a config with a built-in env is validated
//! too; and whatever parses writes out (as the run's resolved TOML) to text
//! that parses again to the same config (the agent tables it does not read
//! at their defaults).
//!
//! A `python:`/`gymnasium:` env is parsed but not validated here:
//! validating one imports and builds it, which would let the fuzzer run
//! any Python callable it spells.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlfleet_shared::config::{RunConfig, from_json_keyed, from_toml_keyed};
use rlfleet_shared::env::is_python_id;

fn check(cfg: &RunConfig) {
    if !is_python_id(&cfg.env) {
        let _ = cfg.validate();
    }
    let text = cfg.to_resolved_toml();
    let again: RunConfig = from_toml_keyed(&text)
        .unwrap_or_else(|e| panic!("the resolved config does not parse: {e}\n{text}"));
    // By `Debug` text: NaN parses, and is not equal to itself. The agent
    // tables the run does not read are left out, so they come back at
    // their defaults.
    let written = cfg.with_unread_tables_reset();
    assert_eq!(format!("{again:?}"), format!("{written:?}"), "{text}");
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(cfg) = from_toml_keyed::<RunConfig>(text)
    {
        check(&cfg);
    }
    if let Ok(cfg) = from_json_keyed::<RunConfig>(data) {
        check(&cfg);
    }
});
