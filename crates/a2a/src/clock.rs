//! The server's clock: "now" for everything the server dates and ages (task status timestamps,
//! the safe-retry window, the usage caps' days, retention's cutoff). A leaf: it imports nothing
//! of the crate. The system's by default; a test sets one it moves by hand (a simulated month, a
//! day's cap crossing midnight), and then everything time-windowed moves with it.

use std::sync::Arc;

use chrono::{DateTime, Utc};

/// The server's clock.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(Utc::now)
}
