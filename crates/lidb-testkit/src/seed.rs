//! The seeded case runner of model and random tests: runs N cases, each a function of its seed
//! alone, and when one fails prints the command that replays exactly that case.
//!
//! Case `i` of a run has the seed `base + i` (wrapping), and its random generator is
//! `ChaCha8Rng::seed_from_u64(seed)`. A test names its default base and count; the environment
//! overrides them for one run:
//!
//! - `LIDB_SEED=<u64>` (decimal or `0x` hex) replaces the base seed,
//! - `LIDB_CASES=<n>` replaces the number of cases (more for a soak run, 1 for a replay).
//!
//! Because case 0 of a run has the base seed, `LIDB_SEED=<seed of the failed case> LIDB_CASES=1`
//! runs the failed case and only it; the runner prints that line, followed by the `cargo test`
//! command of the running test, then re-raises the panic so the test fails as before.
//!
//! Invariant that makes the replay exact: the case closure receives nothing but the generator and
//! the seed, so a case cannot depend on its position in the run. Who calls: the model tests of
//! lidb-lsm and lidb-kv and the other seeded tests of their test trees, from the test's own
//! thread (the replay command names the test by that thread's name, as libtest sets it).

use std::any::Any;
use std::fmt::Write as _;
use std::panic::{self, AssertUnwindSafe};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The environment variable that replaces the base seed.
pub const SEED_VAR: &str = "LIDB_SEED";
/// The environment variable that replaces the number of cases.
pub const CASES_VAR: &str = "LIDB_CASES";

/// A run of seeded cases: a name for messages, a base seed and a count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cases {
    name: String,
    base_seed: u64,
    count: u64,
}

/// Runs `default_count` cases of `f` with base seed 0 (overridable from the environment);
/// `Cases::new(name, n).base_seed(s).run(f)` picks another base.
pub fn cases(name: &str, default_count: u64, f: impl FnMut(&mut ChaCha8Rng, u64)) {
    Cases::new(name, default_count).run(f);
}

/// The seed of case `index` of a run whose base seed is `base`.
pub fn case_seed(base: u64, index: u64) -> u64 {
    base.wrapping_add(index)
}

/// Parses a seed or a count: decimal, or hexadecimal after `0x`.
fn parse_u64(var: &str, text: &str) -> u64 {
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|e| panic!("{var}={text}: not a u64 (decimal or 0x hex): {e}"))
}

impl Cases {
    /// `default_count` cases from base seed 0, named `name` in failure messages.
    pub fn new(name: impl Into<String>, default_count: u64) -> Cases {
        Cases {
            name: name.into(),
            base_seed: 0,
            count: default_count,
        }
    }

    /// Replaces the default base seed (an existing test keeps the seeds it always ran).
    pub fn base_seed(mut self, base_seed: u64) -> Cases {
        self.base_seed = base_seed;
        self
    }

    /// These cases with the base seed and count that `var` overrides (`var` looks up an
    /// environment variable; `run` passes the process environment).
    pub fn overridden(mut self, var: impl Fn(&str) -> Option<String>) -> Cases {
        if let Some(seed) = var(SEED_VAR) {
            self.base_seed = parse_u64(SEED_VAR, &seed);
        }
        if let Some(count) = var(CASES_VAR) {
            self.count = parse_u64(CASES_VAR, &count);
        }
        self
    }

    /// The seeds the cases run with, in order.
    pub fn seeds(&self) -> impl Iterator<Item = u64> + use<> {
        let base = self.base_seed;
        (0..self.count).map(move |i| case_seed(base, i))
    }

    /// Runs the cases with the environment's overrides; on the first failing case prints how to
    /// replay it and re-raises its panic.
    pub fn run(self, f: impl FnMut(&mut ChaCha8Rng, u64)) {
        let cases = self.overridden(|name| std::env::var(name).ok());
        if let Err(failure) = cases.try_run(f) {
            eprintln!("{}", failure.report());
            failure.resume();
        }
    }

    /// Runs the cases as they are (no environment); the first failure, its panic caught.
    pub fn try_run(&self, mut f: impl FnMut(&mut ChaCha8Rng, u64)) -> Result<(), Failure> {
        for (index, seed) in self.seeds().enumerate() {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| f(&mut rng, seed)));
            if let Err(payload) = outcome {
                return Err(Failure {
                    name: self.name.clone(),
                    index: index as u64,
                    count: self.count,
                    seed,
                    payload,
                });
            }
        }
        Ok(())
    }
}

/// A failed case: which one, and its panic.
#[derive(Debug)]
pub struct Failure {
    name: String,
    index: u64,
    count: u64,
    seed: u64,
    payload: Box<dyn Any + Send>,
}

impl Failure {
    /// The failed case's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The environment that replays the failed case alone.
    pub fn replay_env(&self) -> String {
        format!("{SEED_VAR}={} {CASES_VAR}=1", self.seed)
    }

    /// What the runner prints: the case, its seed and the full replay command.
    pub fn report(&self) -> String {
        format!(
            "{}: case {} of {} failed with seed {}; replay it alone with:\n    {} {}",
            self.name,
            self.index,
            self.count,
            self.seed,
            self.replay_env(),
            test_command()
        )
    }

    /// Re-raises the case's panic.
    pub fn resume(self) -> ! {
        panic::resume_unwind(self.payload)
    }
}

/// The `cargo test` command of the running test, as far as the process can tell: the package
/// from `CARGO_PKG_NAME` (cargo sets it for the test binaries it runs), the target from the
/// binary's name, the test from the thread's name.
fn test_command() -> String {
    let package = std::env::var("CARGO_PKG_NAME").ok();
    let binary = std::env::args_os().next().and_then(|exe| {
        let stem = std::path::Path::new(&exe)
            .file_stem()?
            .to_string_lossy()
            .into_owned();
        // cargo names a test binary `{target}-{16 hex digits}`.
        Some(match stem.rsplit_once('-') {
            Some((target, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => {
                target.to_owned()
            }
            _ => stem,
        })
    });
    let mut command = String::from("cargo test");
    if let Some(package) = &package {
        let _ = write!(command, " -p {package}");
    }
    match (&package, &binary) {
        (Some(p), Some(b)) if *b == p.replace('-', "_") => command.push_str(" --lib"),
        (_, Some(b)) => {
            let _ = write!(command, " --test {b}");
        }
        _ => {}
    }
    let thread = std::thread::current();
    if let Some(test) = thread.name().filter(|n| *n != "main") {
        let _ = write!(command, " -- {test} --exact");
    }
    command
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::Rng;

    use super::*;

    /// The value after `var=` in `text`.
    fn value_of(text: &str, var: &str) -> Option<String> {
        let at = text.find(&format!("{var}="))? + var.len() + 1;
        let rest = text.get(at..)?;
        Some(
            rest.chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect(),
        )
    }

    /// A case that fails when its first draw is below 40 (about one case in six), after
    /// recording its seed and first draw.
    fn flaky(log: &mut Vec<(u64, u8)>) -> impl FnMut(&mut ChaCha8Rng, u64) + '_ {
        |rng, seed| {
            let draw: u8 = rng.r#gen();
            log.push((seed, draw));
            assert!(draw >= 40, "seed {seed} drew {draw}");
        }
    }

    #[test]
    fn the_replay_line_printed_reruns_exactly_the_failed_case() {
        let mut first = Vec::new();
        let failure = Cases::new("flaky", 200)
            .base_seed(1_000)
            .try_run(flaky(&mut first))
            .err()
            .unwrap_or_else(|| panic!("no case of 200 failed: {first:?}"));
        let &(failed_seed, failed_draw) = first.last().unwrap_or_else(|| panic!("no case ran"));
        assert!(
            first.len() > 1,
            "pick a base whose first case passes: {first:?}"
        );
        assert_eq!(failure.seed(), failed_seed);

        // Replay with exactly the variables the printed report names.
        let report = failure.report();
        let vars: BTreeMap<&str, String> = [SEED_VAR, CASES_VAR]
            .into_iter()
            .filter_map(|v| Some((v, value_of(&report, v)?)))
            .collect();
        assert_eq!(vars.len(), 2, "{report}");
        let mut replayed = Vec::new();
        let again = Cases::new("flaky", 200)
            .base_seed(1_000)
            .overridden(|v| vars.get(v).cloned())
            .try_run(flaky(&mut replayed));
        assert_eq!(replayed, vec![(failed_seed, failed_draw)], "{report}");
        assert_eq!(again.err().map(|f| f.seed()), Some(failed_seed));
    }

    #[test]
    fn the_environment_overrides_base_and_count() {
        let cases = Cases::new("t", 3).base_seed(10);
        assert_eq!(cases.seeds().collect::<Vec<_>>(), vec![10, 11, 12]);
        let env = |v: &str| match v {
            SEED_VAR => Some("0x20".to_owned()),
            CASES_VAR => Some("2".to_owned()),
            _ => None,
        };
        let mut seen = Vec::new();
        let result = cases
            .clone()
            .overridden(env)
            .try_run(|_, seed| seen.push(seed));
        assert!(result.is_ok());
        assert_eq!(seen, vec![0x20, 0x21]);
        // Only the seed set: the default count stays.
        let only_seed = cases.overridden(|v| (v == SEED_VAR).then(|| "7".to_owned()));
        assert_eq!(only_seed.seeds().collect::<Vec<_>>(), vec![7, 8, 9]);
    }

    #[test]
    fn each_case_gets_the_generator_of_its_seed() {
        let mut draws = Vec::new();
        let result = Cases::new("t", 2).base_seed(5).try_run(|rng, seed| {
            draws.push((
                rng.r#gen::<u64>(),
                ChaCha8Rng::seed_from_u64(seed).r#gen::<u64>(),
            ));
        });
        assert!(result.is_ok());
        assert_eq!(draws.len(), 2);
        assert!(draws.iter().all(|(got, want)| got == want), "{draws:?}");
    }

    #[test]
    fn a_failure_reraises_the_cases_panic() {
        let failure = Cases::new("t", 1)
            .try_run(|_, _| panic!("the engine is wrong"))
            .err()
            .unwrap_or_else(|| panic!("the case did not fail"));
        let payload = panic::catch_unwind(AssertUnwindSafe(|| failure.resume()))
            .err()
            .unwrap_or_else(|| panic!("resume returned"));
        let message = payload.downcast_ref::<&str>().copied();
        assert_eq!(message, Some("the engine is wrong"));
    }

    #[test]
    fn the_report_names_this_test() {
        let failure = Cases::new("named", 1)
            .base_seed(42)
            .try_run(|_, _| panic!("fail"))
            .err()
            .unwrap_or_else(|| panic!("the case did not fail"));
        let report = failure.report();
        assert!(
            report.contains("LIDB_SEED=42 LIDB_CASES=1 cargo test"),
            "{report}"
        );
        assert!(
            report.contains("the_report_names_this_test --exact"),
            "{report}"
        );
    }

    #[test]
    #[should_panic(expected = "LIDB_SEED=seven: not a u64")]
    fn a_malformed_override_is_refused() {
        let _ = Cases::new("t", 1).overridden(|v| (v == SEED_VAR).then(|| "seven".to_owned()));
    }
}
