//! The report's prose: the heading, and what the numbers mean (the ideal schedule, whether
//! the bucket fits the upstream's rule, what the supplier's 429s did, how the two phases
//! compare). The chart's notes and the text under the table say the same.

use crate::cli::{Phase, RunArgs, StrategyArg};
use crate::limit::UpstreamMode;
use crate::report::summary::Summary;
use crate::theory::{self, num};

/// The heading: who calls whom, under which rule.
pub fn heading(args: &RunArgs) -> String {
    format!(
        "{} replicas x {} PIX status queries at once; the API allows {}",
        args.replicas,
        args.calls,
        args.upstream_mode.rule(args.quota)
    )
}

/// What the chart's notes and the text's explanation share.
pub fn explanations(summary: &Summary) -> Vec<String> {
    let mut lines = Vec::new();
    let rate = num(summary.rate);
    let late = summary.calls.saturating_sub(summary.capacity);
    if late > 0 {
        lines.push(format!(
            "Ideal through the bucket: {} calls at once, then {late} more at {rate}/s: \
             {late} x {:.3} ms = {:.3} s, never earlier.",
            summary.capacity.min(summary.calls),
            summary.token_interval_ms,
            late as f64 * summary.token_interval_ms / 1e3
        ));
    } else {
        lines.push(format!(
            "All {} calls fit in the bucket's burst of {}: no wait.",
            summary.calls, summary.capacity
        ));
    }
    lines.push(format!("Fit: {}.", summary.fit_reason));
    if summary.upstream_mode == UpstreamMode::Window {
        lines.push(format!(
            "Window mode: the upstream takes at most {q} calls in ANY one-second span, and a \
             full bucket releases its burst plus one second of refill within one second \
             ({} + {} = {}). A window has no cumulative line, so the last panel counts each \
             call's trailing second.",
            summary.capacity,
            num(summary.rate),
            num(theory::bucket_release(summary.capacity, summary.rate, 1.0)),
            q = summary.quota
        ));
    }
    if let Some((capacity, rate)) = summary.fit_example {
        lines.push(format!(
            "To stay inside it, try --capacity {capacity} --rate {rate} (capacity + rate = {}).",
            capacity + rate
        ));
    }
    lines.extend(pause_story(summary));
    lines.extend(open_story(summary));
    lines
}

/// What the supplier's limit on calls open at once did to the bucket phase, and the cap.
fn open_story(summary: &Summary) -> Vec<String> {
    let Some((shared, open)) = summary
        .phases
        .iter()
        .find(|p| p.phase == Phase::Bucket)
        .and_then(|p| p.open_calls.as_ref().map(|o| (p, o)))
    else {
        return Vec::new();
    };
    let spell = open.slow_spell.map_or(String::new(), |s| {
        format!(
            " (from {} s to {} s every call took {} to {} ms, so calls stayed open longer)",
            num(s.from_s),
            num(s.until_s),
            s.min_ms,
            s.max_ms
        )
    });
    let mut lines = Vec::new();
    match (open.max_in_flight, open.slot_waits) {
        (Some(cap), Some(waits)) => lines.push(format!(
            "With --max-in-flight {cap} every call held one of {cap} slots of the shared bucket \
             from its token to its answer: the supplier counted at most {} open at once{spell}; \
             {waits} calls waited for a slot, {} refused for concurrency.",
            open.most_open, shared.refused_for_concurrency
        )),
        _ => lines.push(format!(
            "Without a cap on calls in flight the bucket spaced the calls out but not their \
             answers: the supplier counted up to {} open at once{spell}, and refused {} for \
             concurrency{}.",
            open.most_open,
            shared.refused_for_concurrency,
            open.supplier_max_open.map_or(String::new(), |n| format!(
                " (its limit: {n}; --max-in-flight {n} keeps the fleet under it)"
            ))
        )),
    }
    lines
}

/// What the supplier's 429s did to the bucket phase: the pause, what it held back, what
/// came after.
fn pause_story(summary: &Summary) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(shared) = summary.phases.iter().find(|p| p.phase == Phase::Bucket) else {
        return lines;
    };
    let (Some(first), Some(pauses @ 1..)) = (shared.first_429_s, shared.pauses) else {
        return lines;
    };
    // Without Retry-After (nginx) the replicas pause for 1 s.
    let retry_after = shared.first_retry_after_s.unwrap_or(1);
    let interval = summary.token_interval_ms;
    let pushback = summary.pushback.as_ref();
    let cut = pushback.is_some_and(|p| p.cut);
    lines.push(format!(
        "The API's first 429 came at {first:.3} s {}. The replica that got it paused the \
         shared bucket for it ({} {} ms{}), which stops every replica on that key, not just \
         itself; {pauses} pause{} in all.",
        match shared.first_retry_after_s {
            Some(ra) => format!("with Retry-After: {ra}"),
            None => "without Retry-After (the replicas then pause 1 s)".to_owned(),
        },
        if cut {
            "THROTTLE.CUT"
        } else {
            "THROTTLE.PAUSE"
        },
        retry_after * 1000,
        if cut {
            ", and cut its rate to 0.7, climbing back over the recovery time"
        } else {
            ""
        },
        if pauses == 1 { "" } else { "s" }
    ));
    let held = shared.arrivals_in_first_pause.unwrap_or_default();
    let after = shared.refused_after_first_pause.unwrap_or_default();
    let end = first + retry_after as f64;
    match summary.strategy {
        StrategyArg::Poll => {
            lines.push(format!(
                "{} from either replica reached the API from {first:.3} s to {end:.3} s; then \
                 the bucket gave one token every {interval:.3} ms, with no burst (a pause \
                 resumes from a single token).",
                match held {
                    0 => "No call".to_owned(),
                    1 => "1 call".to_owned(),
                    n => format!("{n} calls"),
                }
            ));
        }
        StrategyArg::Reserve if pushback.is_some_and(|p| p.pause_check) => {
            let checked = pushback.map_or(0, |p| p.held_by_pause);
            lines.push(format!(
                "With --strategy reserve every call reserved its slot at the start; each looked \
                 at the bucket after its sleep (the pause check, one PEEK), so {checked} \
                 reserved call{} the pause covered {} held back and reserved again after it, \
                 and {held} reached the API during it (--no-pause-check shows the difference).",
                if checked == 1 { "" } else { "s" },
                if checked == 1 { "was" } else { "were" },
            ));
        }
        StrategyArg::Reserve => {
            if shared.pauses_absorbed > 0 || held > 0 {
                lines.push(format!(
                    "With --strategy reserve every call reserved its slot at the start, and a \
                     pause never moves a reservation already granted: {held} call{} reserved \
                     inside the pause still reached the API during it, and {} of the {pauses} \
                     pauses changed nothing (the bucket already owed tokens further out); each \
                     refused call reserved again at the end of the queue. Polling (the default \
                     against a window) holds no slot while it waits, so one 429 stops the \
                     whole fleet.",
                    if held == 1 { "" } else { "s" },
                    shared.pauses_absorbed
                ));
            }
        }
    }
    let rate_over = summary.rate > f64::from(summary.quota);
    if shared.refused_for_concurrency > 0 {
        // Not the rate's doing: the story is the calls open at once (`open_story`).
        lines.push(format!(
            "{} of the {} 429s were for concurrency, not the rate: a pause and a cut slow the \
             rate, and calls already open stay open.",
            shared.refused_for_concurrency, shared.refused
        ));
    } else if after == 0 {
        lines.push(format!(
            "No 429 after the pause: {}/s with no burst fits the API's {}.",
            num(summary.rate),
            match summary.upstream_mode {
                UpstreamMode::Bucket => format!("{}/s", summary.quota),
                UpstreamMode::Window => format!("window of {} in any second", summary.quota),
            }
        ));
    } else if rate_over {
        lines.push(format!(
            "{after} 429s came after the first pause: the bucket's rate, {}/s, is still above \
             the API's {}/s, so each pause is followed by more refusals and another pause. The \
             pauses, not the bucket, keep the fleet to what the API takes; set --rate {} or \
             lower.",
            num(summary.rate),
            summary.quota,
            summary.quota
        ));
    } else {
        lines.push(format!(
            "{after} 429s came after the first pause, though {}/s fits the API: calls that \
             reached it more than one interval after their token bunched up (the machine's \
             doing: the bucket gave one token per interval).",
            num(summary.rate)
        ));
    }
    if let Some(pauses @ 1..) = shared.predicted_pauses {
        lines.push(format!(
            "On an ideal machine, obeying each 429 with a pause only (no cut, no pause check): \
             {} refused, {pauses} pause{}, the last call at {:.3} s (the ideal above, with the \
             pauses).",
            shared.predicted_refused,
            if pauses == 1 { "" } else { "s" },
            shared.ideal_total_s
        ));
    }
    if shared.unserved == 0 {
        lines.push(format!(
            "Every call was served in the end: {} retr{} (at most {} sends per call).",
            shared.retries,
            if shared.retries == 1 { "y" } else { "ies" },
            summary.max_attempts
        ));
    } else {
        lines.push(format!(
            "{} calls were not served after {} sends.",
            shared.unserved, summary.max_attempts
        ));
    }
    if summary.strategy_defaulted && summary.strategy == StrategyArg::Poll {
        lines.push(
            "Strategy poll: the default with --upstream-mode window, so that a 429 stops the \
             fleet at once (--strategy reserve shows the difference)."
                .to_owned(),
        );
    }
    lines
}

/// The two phases side by side, in a sentence (and, against a window, what it still refused
/// through the bucket).
pub fn comparison(summary: &Summary) -> Vec<String> {
    let mut lines = Vec::new();
    let [direct, shared] = summary.phases.as_slice() else {
        return lines;
    };
    lines.push(format!(
        "Direct, the API served {} and refused {}; through the shared bucket it served {} and \
         refused {}: the calls waited instead{}.",
        direct.served,
        direct.refused,
        shared.served,
        shared.refused,
        shared
            .wait_mean_s
            .map_or(String::new(), |w| format!(" (mean {w:.2} s)"))
    ));
    if summary.upstream_mode == UpstreamMode::Window && shared.refused > 0 {
        lines.push(format!(
            "The window refused {} through the bucket ({} predicted; {} had the fleet not \
             paused).",
            shared.refused,
            shared.predicted_refused,
            shared.predicted_refused_without_pause.unwrap_or_default()
        ));
    }
    lines
}
