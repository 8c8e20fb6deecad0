//! A new signal's id (a UUIDv7) and time (RFC 3339 with microseconds),
//! written from one read of the clock, without formatting machinery or
//! allocation: this is on every signal's path.
//!
//! # The id
//!
//! A UUIDv7 as RFC 9562 lays it out: the Unix time in milliseconds (48
//! bits), the version `0111`, `rand_a` (12 bits), the variant `10`, `rand_b`
//! (62 bits). Ids are unique and strictly increasing in the whole process:
//! an id made after another (on any thread, when the first one's making
//! happened before, e.g. it was sent over a channel) sorts after it, as
//! numbers and as text.
//!
//! * **Sub-millisecond clock precision plus a counter** (RFC 9562 §6.2,
//!   method 3 with method 1's increment). The time is kept in units of
//!   1/65 536 ms (about 15 ns): the 48 bits of milliseconds, then 16 bits of
//!   fraction, which fill `rand_a` and the first 4 bits of `rand_b`. One
//!   process-wide 64-bit value holds the last id's time; a new id takes
//!   `max(now, last + 1)` with one compare-and-swap. Ids made within one
//!   unit (or while the clock stands still or steps back) count up from the
//!   last one: the id's time runs ahead of the clock by a few units until
//!   the clock catches up, which RFC 9562 allows ("counter rollover
//!   handling": increment the timestamp ahead of the actual time) and which
//!   keeps the order. Why not a counter per thread: it would order one
//!   thread's ids but not ids made on two threads within one millisecond,
//!   which `uuid::Uuid::now_v7` (used before) orders; one uncontended
//!   compare-and-swap costs about what a thread-local counter does.
//! * **58 random bits** (the rest of `rand_b`) from a generator per thread
//!   (wyrand: a 64-bit state stepped by an odd constant and mixed by one
//!   128-bit multiplication), seeded once per thread from the operating
//!   system's random source (through std's `RandomState`, whose SipHash
//!   keys come from it). They keep ids of different processes and nodes
//!   apart (a collision needs the same 15 ns unit and the same 58 bits).
//!   They are not meant to be unguessable: RFC 9562 §8 warns against
//!   using UUIDs as security capabilities, and the runtime never does.
//!
//! `uuid::Uuid::now_v7` did the same job through a process-wide mutex, a
//! 128-bit draw from a ChaCha generator per id plus a 64-bit one per
//! millisecond, and its own clock read beside the time's.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{SecondsFormat, Utc};

use super::text::Text;

/// The time of the last id made in the process, in units of 1/65 536 ms
/// since the Unix epoch (see the module docs).
static LAST: AtomicU64 = AtomicU64::new(0);

/// A new signal's id and time, from one read of the clock.
pub(crate) fn id_and_time() -> (Text<36>, Text<27>) {
    let now = since_epoch();
    (id_at(now), time_at(now))
}

/// A new UUIDv7 as its 36 characters.
pub(crate) fn new_id() -> Text<36> {
    id_at(since_epoch())
}

/// The current UTC time in RFC 3339 with microseconds, e.g.
/// `2026-01-02T03:04:05.123456Z`.
pub(crate) fn now_rfc3339() -> Text<27> {
    time_at(since_epoch())
}

/// The wall clock since the Unix epoch (zero before it: the ids stay
/// ordered all the same, see [`next_tick`]).
fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

fn id_at(now: Duration) -> Text<36> {
    Text::Inline(hyphenated(uuid_bits(next_tick(tick(now)), random_bits())))
}

/// `now` in units of 1/65 536 ms: the milliseconds (at most 48 bits: the
/// year 10889) in the top 48 bits, the fraction of the millisecond in the
/// low 16.
fn tick(now: Duration) -> u64 {
    const MAX_MS: u64 = (1 << 48) - 1;
    let ms = now
        .as_secs()
        .saturating_mul(1000)
        .saturating_add(u64::from(now.subsec_millis()))
        .min(MAX_MS);
    let fraction = u64::from(now.subsec_nanos() % 1_000_000) * 65_536 / 1_000_000;
    (ms << 16) | fraction
}

/// The tick of a new id: `now`, or one past the last id's when that is not
/// below `now`, so every id of the process is above every id made before
/// it.
fn next_tick(now: u64) -> u64 {
    // Relaxed is enough: every compare-and-swap on `LAST` reads the latest
    // value in its modification order, so ticks are unique and increase
    // in that order, and an id made after another one (happens-before)
    // sees that one's tick or a later one.
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        // `last + 1` overflows only past the year 10889 (48-bit ms).
        let next = now.max(last.wrapping_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// 64 bits from this thread's generator (see the module docs).
fn random_bits() -> u64 {
    thread_local! {
        /// wyrand's state; 0 until seeded.
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    // The state has no destructor, so it is never gone; were it gone, the
    // id would still be unique (its tick is), only not random.
    STATE
        .try_with(|state| {
            let mut s = state.get();
            if s == 0 {
                s = seed();
            }
            s = s.wrapping_add(0xa076_1d64_78bd_642f);
            state.set(s);
            let t = u128::from(s) * u128::from(s ^ 0xe703_7ed1_a0b4_28db);
            (t >> 64) as u64 ^ t as u64
        })
        .unwrap_or(0)
}

/// 64 bits derived from the operating system's random source: std's
/// `RandomState` draws its SipHash keys from it (once per thread, then
/// counts them up), and a keyed SipHash of nothing is unpredictable
/// without the keys.
fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        | 1
}

/// The 128 bits of a UUIDv7 at `tick` with `random` bits.
fn uuid_bits(tick: u64, random: u64) -> u128 {
    let ms = u128::from(tick >> 16);
    let rand_a = u128::from((tick >> 4) & 0xfff);
    let counter = u128::from(tick & 0xf);
    (ms << 80)
        | (0x7 << 76)
        | (rand_a << 64)
        | (0b10 << 62)
        | (counter << 58)
        | u128::from(random >> 6)
}

/// `bits` as a lowercase hyphenated UUID: `8-4-4-4-12` hex digits.
fn hyphenated(bits: u128) -> [u8; 36] {
    let mut out = [0; 36];
    uuid::Uuid::from_u128(bits)
        .hyphenated()
        .encode_lower(&mut out);
    out
}

fn time_at(now: Duration) -> Text<27> {
    rfc3339_micros_cached(now.as_secs(), now.subsec_micros()).map_or_else(
        || Text::from(Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true)),
        Text::Inline,
    )
}

/// [`rfc3339_micros`], with the part up to the seconds kept per thread
/// for the last second seen: signals made within one second (all of them,
/// under load) only write their microseconds. Built from whole chunks
/// (byte-by-byte writes into the array made the compiler copy it one byte
/// at a time).
fn rfc3339_micros_cached(secs: u64, micros: u32) -> Option<[u8; 27]> {
    let prefix = second_prefix(secs)?;
    let mut out = [0; 27];
    out[..20].copy_from_slice(&prefix);
    out[20..26].copy_from_slice(&six_digits(micros));
    out[26] = b'Z';
    Some(out)
}

/// `YYYY-MM-DDTHH:MM:SS.` of `secs`, kept per thread for the last second
/// seen.
fn second_prefix(secs: u64) -> Option<[u8; 20]> {
    thread_local! {
        static SECOND: Cell<(u64, [u8; 20])> = const { Cell::new((u64::MAX, [0; 20])) };
    }
    if let Ok((last, prefix)) = SECOND.try_with(Cell::get)
        && last == secs
    {
        return Some(prefix);
    }
    let full = rfc3339_micros(secs, 0)?;
    let mut prefix = [0; 20];
    prefix.copy_from_slice(&full[..20]);
    let _ = SECOND.try_with(|c| c.set((secs, prefix)));
    Some(prefix)
}

/// `v` (below 1 000 000) as six decimal digits.
fn six_digits(v: u32) -> [u8; 6] {
    let three = |x: u32| {
        [
            b'0' + (x / 100 % 10) as u8,
            b'0' + (x / 10 % 10) as u8,
            b'0' + (x % 10) as u8,
        ]
    };
    let (hi, lo) = (three(v / 1000), three(v % 1000));
    [hi[0], hi[1], hi[2], lo[0], lo[1], lo[2]]
}

/// `secs` (since the Unix epoch) and `micros` written as
/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, the way chrono writes them with
/// `SecondsFormat::Micros` (hand-written: chrono's formatter costs ~250 ns
/// per signal); `None` past the year 9999.
fn rfc3339_micros(secs: u64, micros: u32) -> Option<[u8; 27]> {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (hour, min, sec) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = i64::try_from(days).ok()? + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(0..=9999).contains(&year) {
        return None;
    }
    let mut out = [0u8; 27];
    let mut put = |at: usize, value: u64, width: usize| {
        let mut v = value;
        for i in (0..width).rev() {
            out[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, year as u64, 4);
    put(5, month as u64, 2);
    put(8, day as u64, 2);
    put(11, hour, 2);
    put(14, min, 2);
    put(17, sec, 2);
    put(20, u64::from(micros), 6);
    for (at, c) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (26, b'Z'),
    ] {
        out[at] = c;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    #[test]
    fn rfc3339_micros_matches_chrono() {
        for (secs, micros) in [
            (0u64, 0u32),
            (951_782_400, 1),           // 2000-02-29
            (1_709_164_799, 999_999),   // 2024-02-28T23:59:59
            (1_709_251_199, 123_456),   // 2024-02-29T23:59:59
            (4_102_444_800, 500_000),   // 2100-01-01
            (253_402_300_799, 999_999), // 9999-12-31T23:59:59
        ] {
            let chrono = DateTime::<Utc>::from_timestamp(secs as i64, micros * 1000)
                .unwrap()
                .to_rfc3339_opts(SecondsFormat::Micros, true);
            assert_eq!(
                rfc3339_micros(secs, micros).map(|b| String::from_utf8(b.to_vec()).unwrap()),
                Some(chrono)
            );
        }
        assert_eq!(rfc3339_micros(253_402_300_800, 0), None);
        // The per-thread copy of the last second gives the same text,
        // whichever second came before.
        for (secs, micros) in [
            (1_709_251_199u64, 123_456u32),
            (1_709_251_199, 7),
            (1_709_251_200, 999_999),
            (1_709_251_199, 0),
            (0, 1),
        ] {
            assert_eq!(
                rfc3339_micros_cached(secs, micros),
                rfc3339_micros(secs, micros)
            );
        }
        assert_eq!(rfc3339_micros_cached(253_402_300_800, 0), None);
        // Every day of four centuries around now.
        for day in 0..146_097u64 {
            let secs = 946_684_800 + day * 86_400 + 3_723;
            let chrono = DateTime::<Utc>::from_timestamp(secs as i64, 7_000)
                .unwrap()
                .to_rfc3339_opts(SecondsFormat::Micros, true);
            assert_eq!(
                rfc3339_micros(secs, 7).map(|b| String::from_utf8(b.to_vec()).unwrap()),
                Some(chrono)
            );
        }
    }

    #[test]
    fn the_layout_is_rfc_9562_version_7() {
        let at = Duration::new(1_709_251_199, 123_456_789);
        let t = tick(at);
        assert_eq!(t >> 16, 1_709_251_199_123);
        // 0.456789 ms in 1/65 536 ms.
        assert_eq!(t & 0xffff, 456_789 * 65_536 / 1_000_000);
        let bits = uuid_bits(t, u64::MAX);
        let id = uuid::Uuid::from_u128(bits);
        assert_eq!(id.get_version_num(), 7);
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        let (secs, nanos) = id.get_timestamp().unwrap().to_unix();
        assert_eq!((secs, nanos / 1_000_000), (1_709_251_199, 123));
        // The fraction sits in rand_a and the first 4 bits of rand_b; the
        // random bits fill the remaining 58.
        assert_eq!((bits >> 64) & 0xfff, u128::from((t >> 4) & 0xfff));
        assert_eq!((bits >> 58) & 0xf, u128::from(t & 0xf));
        assert_eq!(bits & ((1 << 58) - 1), (1 << 58) - 1);
        assert_eq!(uuid_bits(t, 0) & ((1 << 58) - 1), 0);
        // A later tick is a larger UUID whatever the random bits.
        assert!(uuid_bits(t + 1, 0) > uuid_bits(t, u64::MAX));
        // The millisecond field stops at 48 bits.
        assert_eq!(tick(Duration::MAX) >> 16, (1 << 48) - 1);
    }

    #[test]
    fn ticks_never_repeat_or_go_back() {
        // A tick a little ahead of the clock is taken as is; the same tick
        // again, or an earlier one (a clock standing still or stepping
        // back), counts up from the last (other tests may make ids
        // meanwhile: only the order is fixed).
        let ahead = tick(since_epoch()) + (1 << 20);
        assert_eq!(next_tick(ahead), ahead);
        let again = next_tick(ahead);
        let back = next_tick(1);
        assert!(ahead < again && again < back, "{ahead} {again} {back}");
    }

    #[test]
    fn random_bits_differ() {
        let draws: std::collections::HashSet<u64> = (0..1000).map(|_| random_bits()).collect();
        assert_eq!(draws.len(), 1000);
    }
}
