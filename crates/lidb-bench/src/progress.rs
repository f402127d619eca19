//! Progress bars for long phases, on stderr. They draw only when stderr is a terminal (indicatif
//! hides itself otherwise), so JSON on stdout and CI logs stay clean.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps labelled `what`.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>28} [{bar:30}] {pos}/{len} ({elapsed}, eta {eta})")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}
