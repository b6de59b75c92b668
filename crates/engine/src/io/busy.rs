//! busy: how long page writes kept the device busy, whoever wrote them (the buffer pool's writers
//! and the doublewrite's auto compression read it; it lives here, below both).
//!
//! The page cleaner measures the device's page-write rate (pages per second while writes are
//! in flight) to bound its plans. Its own writing time is not that time: where committing
//! threads write for log room, or the LRU cleaner for free frames, while the cleaner sleeps,
//! their pages land in whatever cleaner window is open when they complete, and a 2 ms window
//! that saw one commit's 64-page batch complete read 32,000 pages/s on a device writing
//! 5,400. This clock runs while at least one batch of anyone's is being written, so pages
//! over its time is the rate of the device while it was busy.

use parking_lot::Mutex;
use std::time::Instant;

#[derive(Debug)]
struct State {
    in_flight: u32,
    /// When `in_flight` last went from 0 to 1.
    since: Instant,
    /// Seconds with at least one batch in flight, up to `since` while one is.
    busy_s: f64,
    pages: u64,
}

/// Time with page writes in flight, and the pages written (batches complete).
#[derive(Debug)]
pub struct BusyClock(Mutex<State>);

impl Default for BusyClock {
    fn default() -> Self {
        BusyClock(Mutex::new(State {
            in_flight: 0,
            since: Instant::now(),
            busy_s: 0.0,
            pages: 0,
        }))
    }
}

impl BusyClock {
    /// A batch starts writing.
    pub fn begin(&self, now: Instant) {
        let mut s = self.0.lock();
        if s.in_flight == 0 {
            s.since = now;
        }
        s.in_flight += 1;
    }

    /// A batch that began ended, having written `pages`.
    pub fn end(&self, pages: u64, now: Instant) {
        let mut s = self.0.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        s.pages += pages;
        if s.in_flight == 0 {
            s.busy_s += now.saturating_duration_since(s.since).as_secs_f64();
        }
    }

    /// (busy seconds, pages written) since the clock was made; the busy time includes the
    /// interval still open at `now`.
    pub fn read(&self, now: Instant) -> (f64, u64) {
        let s = self.0.lock();
        let open = if s.in_flight > 0 {
            now.saturating_duration_since(s.since).as_secs_f64()
        } else {
            0.0
        };
        (s.busy_s + open, s.pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn overlapping_batches_count_their_union_once() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let c = BusyClock::default();
        // two batches overlapping over [0, 30] ms, then an idle 70 ms, then one of 10 ms
        c.begin(t0);
        c.begin(t0 + ms(10));
        c.end(64, t0 + ms(20));
        assert_eq!(c.read(t0 + ms(25)).1, 64);
        assert!(
            (c.read(t0 + ms(25)).0 - 0.025).abs() < 1e-9,
            "the open interval counts"
        );
        c.end(64, t0 + ms(30));
        c.begin(t0 + ms(100));
        c.end(8, t0 + ms(110));
        let (busy, pages) = c.read(t0 + ms(500));
        assert!((busy - 0.040).abs() < 1e-9, "{busy}");
        assert_eq!(pages, 136);
    }
}
