//! A phase second by second, as the per-second tables and the chart show it: what the
//! upstream saw of the fleet and of the other application, what the demo sampled of the
//! bucket, and the supplier's calls open at once.

use serde::Serialize;

use crate::open_calls::SlowSpell;
use crate::scenario::PhaseOutcome;

/// One second of a phase, `[t, t + 1)` from the shared start.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Second {
    pub t: u32,
    /// The fleet's calls at the upstream: sent, served, refused, and of those refused the
    /// ones for concurrency (the supplier had its most calls open already).
    pub fleet_sent: u32,
    pub fleet_served: u32,
    pub fleet_refused: u32,
    pub refused_for_concurrency: u32,
    pub other_sent: u32,
    pub other_refused: u32,
    /// The lowest and the last rate factor sampled in the second, basis points.
    pub factor_min_bp: Option<u16>,
    pub factor_last_bp: Option<u16>,
    /// A pause was sampled in the second.
    pub paused: bool,
    /// The most calls open at once at the supplier (`open_per_bin`: its most per 100 ms).
    pub most_open: u32,
    /// Some of the second is inside the slow spell.
    pub slow: bool,
}

/// The phase's seconds up to the one holding `last_s`.
pub fn seconds(
    outcome: &PhaseOutcome,
    last_s: f64,
    open_per_bin: &[u32],
    spell: Option<SlowSpell>,
) -> Vec<Second> {
    let n = last_s.floor() as usize + 1;
    let index = |t: f64| (t.floor().max(0.0) as usize).min(n - 1);
    let mut seconds: Vec<Second> = (0..n)
        .map(|t| Second {
            t: t as u32,
            // Ten bins a second.
            most_open: open_per_bin
                .iter()
                .skip(t * 10)
                .take(10)
                .copied()
                .max()
                .unwrap_or(0),
            slow: spell.is_some_and(|s| s.from_s < (t + 1) as f64 && s.until_s > t as f64),
            ..Second::default()
        })
        .collect();
    for a in &outcome.arrivals {
        let s = &mut seconds[index(outcome.since_start(a.at))];
        s.fleet_sent += 1;
        s.fleet_served += u32::from(a.status == 200);
        s.fleet_refused += u32::from(a.status == 429);
        s.refused_for_concurrency += u32::from(a.too_many_open);
    }
    for a in &outcome.other_arrivals {
        let s = &mut seconds[index(outcome.since_start(a.at))];
        s.other_sent += 1;
        s.other_refused += u32::from(a.status == 429);
    }
    for sample in &outcome.samples {
        let s = &mut seconds[index(sample.t_s)];
        let bp = sample.factor_bp;
        s.factor_min_bp = Some(s.factor_min_bp.map_or(bp, |m| m.min(bp)));
        s.factor_last_bp = Some(bp);
        s.paused |= sample.paused;
    }
    seconds
}
