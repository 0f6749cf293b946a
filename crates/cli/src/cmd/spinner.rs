//! The one-line spinner on stderr that `volcanic chat` and a waiting `volcanic a2a send` show on
//! a terminal (their callers decide whether stderr is one).

use std::borrow::Cow;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the spinner turns.
const TICK: Duration = Duration::from_millis(100);

/// A spinner on stderr showing `text`, turning until it is finished or cleared.
pub fn start(text: impl Into<Cow<'static, str>>) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{spinner:.cyan} {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    bar.set_style(style);
    bar.set_message(text);
    bar.enable_steady_tick(TICK);
    bar
}
