//! The soak's side-by-side verdict (`soak --beside`): what the purge cost the purging gateway,
//! read against a baseline that ran at the same moment.

use std::time::Duration;

use super::percentile;

/// What the summary reads of a row: its answer and reply times (sorted), the commands purged so far.
pub struct Minute {
    pub answers: Vec<Duration>,
    pub replies: Vec<Duration>,
    pub purged: u64,
}

/// Beside its baseline, the purging gateway's webhook answer and reply p50 and p99 over the
/// baseline's, before its first purge (how far apart the two sides are anyway) and once it purges,
/// and the slowing the purge costs (the second over the first), read two ways: the median over the
/// intervals of each interval's ratio, and the ratio of all the intervals' times pooled (one
/// interval's p99 is its few slowest; the pooled p99 is that of every reply of the period).
pub fn summary(pairs: &[(Minute, Minute)]) {
    let (before, during): (Vec<_>, Vec<_>) = pairs.iter().partition(|(purging, _)| purging.purged == 0);
    println!("\n| purging over baseline | before the purge | with it | slowed by |");
    println!("| --- | --- | --- | --- |");
    type Times = fn(&Minute) -> &[Duration];
    let answers: Times = |m| &m.answers;
    let replies: Times = |m| &m.replies;
    for (name, times) in [("webhook answer", answers), ("reply", replies)] {
        for q in [0.5, 0.99] {
            for (way, ratio) in [("median of the intervals", by_interval as Ratio), ("pooled", pooled)] {
                let (without, with) = (ratio(&before, times, q), ratio(&during, times, q));
                let slowed = (with / without - 1.0) * 100.0;
                let verdict = if slowed <= 10.0 { "met" } else { "NOT met" };
                println!(
                    "| {name} p{:.0}, {way} | {without:.3} ({} intervals) | {with:.3} ({} intervals) | \
                     {slowed:+.1}% (goal <= 10%: {verdict}) |",
                    q * 100.0,
                    before.len(),
                    during.len()
                );
            }
        }
    }
}

/// The purging side's `q` over the baseline's, from the intervals' times `times` picks.
type Ratio = fn(&[&(Minute, Minute)], fn(&Minute) -> &[Duration], f64) -> f64;

fn by_interval(pairs: &[&(Minute, Minute)], times: fn(&Minute) -> &[Duration], q: f64) -> f64 {
    let at = |m: &Minute| percentile(times(m), q).as_secs_f64();
    let mut ratios: Vec<f64> = pairs.iter().map(|(purging, baseline)| at(purging) / at(baseline)).collect();
    ratios.retain(|r| r.is_finite());
    ratios.sort_by(f64::total_cmp);
    ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN)
}

fn pooled(pairs: &[&(Minute, Minute)], times: fn(&Minute) -> &[Duration], q: f64) -> f64 {
    let at = |side: fn(&(Minute, Minute)) -> &Minute| {
        let mut all: Vec<Duration> = pairs.iter().flat_map(|pair| times(side(pair)).iter().copied()).collect();
        all.sort();
        percentile(&all, q).as_secs_f64()
    };
    at(|pair| &pair.0) / at(|pair| &pair.1)
}
