//! Random THROTTLE.TAKE argument vectors from the seeded generator: numbers that are more or
//! less numbers, option names right and wrong, keys from the pool or made up, and calls
//! broken on purpose.

use throttle_bucket::{MAX_CAPACITY, MAX_WAIT_MS};
use throttle_e2e::Rng;

use super::pool::POOL;

/// Something that looks more or less like a number.
pub fn junk_number(rng: &mut Rng) -> Vec<u8> {
    const FIXED: &[&str] = &[
        "0",
        "-0",
        "+0",
        "00",
        "0000000000000000000000000000001",
        "-1",
        "+1",
        "1000000000000000",
        "1000000000000001",
        "315360000000",
        "315360000001",
        "315360000",
        "315360001",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "340282366920938463463374607431768211456",
        "0.000001",
        "0.0000009",
        "0.0000010",
        "1000000000",
        "1000000000.0",
        "1000000000.000000000000000001",
        "35791394.1",
        "0.",
        ".5",
        ".",
        "-.5",
        "1..2",
        "1.2.3",
        "1,5",
        "1_000",
        "0x10",
        "0b101",
        "1e3",
        "1E3",
        "1e-3",
        "2.5e+2",
        "1e400",
        "1e-400",
        "nan",
        "NaN",
        "-nan",
        "inf",
        "-inf",
        "+inf",
        "Infinity",
        "infinity",
        " 8",
        "8 ",
        "\t8",
        "8\n",
        "8\r\n",
        "8\x009",
        "\u{663}",   // ARABIC-INDIC DIGIT THREE
        "\u{ff18}",  // FULLWIDTH DIGIT EIGHT
        "\u{2212}5", // MINUS SIGN
        "\u{be}",    // VULGAR FRACTION THREE QUARTERS
        "",
    ];
    match rng.below(8) {
        0 => rng.pick(FIXED).as_bytes().to_vec(),
        1 => {
            let len = rng.range(1, 45) as usize;
            rng.digits(len).into_bytes()
        }
        2 => {
            let (whole, fraction) = (rng.below(25) as usize, rng.range(0, 60) as usize);
            format!("{}.{}", rng.digits(whole), rng.digits(fraction)).into_bytes()
        }
        3 => {
            let sign = rng.pick(&["-", "+", "--", "+-"]);
            let rest = junk_number(rng);
            [sign.as_bytes(), &rest].concat()
        }
        4 => {
            let (mantissa, exponent) = (rng.some_digits(1, 5), rng.below(400));
            let sign = rng.pick(&["", "-", "+"]);
            let e = rng.pick(&["e", "E"]);
            format!("{mantissa}{e}{sign}{exponent}").into_bytes()
        }
        5 => {
            let len = rng.below(17) as usize;
            rng.bytes(len)
        }
        6 => {
            // A good number with one byte changed.
            let mut text = good_number(rng).into_bytes();
            if !text.is_empty() {
                let at = rng.below(text.len() as u64) as usize;
                text[at] = rng.next_u64() as u8;
            }
            text
        }
        _ => good_number(rng).into_bytes(),
    }
}

/// A number in some argument's range.
fn good_number(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => rng.below(21).to_string(),
        1 => rng.range(1, 1_000_000).to_string(),
        2 => MAX_CAPACITY.to_string(),
        3 => MAX_WAIT_MS.to_string(),
        4 => rng
            .pick(&["0.5", "0.001", "9", "200", "0.000001", "1000000000"])
            .to_string(),
        _ => format!("{}.{}", rng.below(1000), rng.some_digits(1, 6)),
    }
}

/// A capacity: mostly small, now and then the largest or a 10-year fill.
fn capacity(rng: &mut Rng) -> Vec<u8> {
    let text = match rng.below(8) {
        0 => MAX_CAPACITY.to_string(),
        1 => "315360000".to_owned(),
        2 => rng.range(1, 1_000_000_000).to_string(),
        _ => rng.range(1, 30).to_string(),
    };
    text.into_bytes()
}

/// A rate: whole, decimal, or one of the edges.
fn rate(rng: &mut Rng) -> Vec<u8> {
    let text = match rng.below(8) {
        0 => rng
            .pick(&[
                "0.000001",
                "1000000000",
                "35791394.1",
                "0.999999",
                "1000000",
            ])
            .to_string(),
        1 => format!("0.{}", rng.some_digits(1, 6)),
        2 => format!("{}.{}", rng.range(1, 1000), rng.some_digits(1, 6)),
        _ => rng.range(1, 1000).to_string(),
    };
    text.into_bytes()
}

/// A TOKENS value around the capacity: 0, all, one less, one more, or a few.
fn tokens(rng: &mut Rng, capacity: &[u8]) -> Vec<u8> {
    let cap: u64 = std::str::from_utf8(capacity)
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(8);
    let n = match rng.below(6) {
        0 => 0,
        1 => cap,
        2 => cap.saturating_sub(1),
        3 => cap.saturating_add(1),
        _ => rng.below(cap.min(5) + 1),
    };
    n.to_string().into_bytes()
}

/// A MAXWAIT value: 0, the largest, one past it, or any.
fn max_wait(rng: &mut Rng) -> Vec<u8> {
    let ms = match rng.below(6) {
        0 => 0,
        1 => MAX_WAIT_MS,
        2 => MAX_WAIT_MS + 1,
        3 => rng.below(100),
        _ => rng.below(10_000_000),
    };
    ms.to_string().into_bytes()
}

/// An option name: right, in another case, close, unknown, or bytes.
fn option_name(rng: &mut Rng) -> Vec<u8> {
    const NAMES: &[&str] = &[
        "TOKENS",
        "tokens",
        "Tokens",
        "MAXWAIT",
        "maxwait",
        "MaxWait",
        "TOKEN",
        "TOKENSS",
        "MAXWAITS",
        "WAIT",
        "NX",
        "PX",
        "KEEPTTL",
        "",
        " TOKENS",
        "TOKENS ",
        "TOKENS\x00",
        "tokens\u{130}",
        "MAX WAIT",
        "-TOKENS",
    ];
    match rng.below(10) {
        0 => {
            let len = rng.range(1, 10) as usize;
            rng.bytes(len)
        }
        1 => [b"\xff".as_slice(), b"MAXWAIT"].concat(),
        _ => rng.pick(NAMES).as_bytes().to_vec(),
    }
}

/// Any argument at all.
fn atom(rng: &mut Rng) -> Vec<u8> {
    match rng.below(10) {
        0..=3 => junk_number(rng),
        4..=5 => option_name(rng),
        6 => {
            let len = rng.below(40) as usize;
            rng.bytes(len)
        }
        7 if rng.one_in(50) => {
            // Now and then a big one: 64 KiB to 512 KiB of digits or bytes.
            let len = rng.range(64 << 10, 512 << 10) as usize;
            if rng.one_in(2) {
                rng.digits(len).into_bytes()
            } else {
                rng.bytes(len)
            }
        }
        _ => good_number(rng).into_bytes(),
    }
}

/// A key the fuzzer names: from the pool (its index), or made up (always starts with `fz`).
fn key(rng: &mut Rng) -> (Vec<u8>, Option<usize>) {
    if rng.below(4) != 0 {
        let index = rng.below(POOL.len() as u64) as usize;
        return (POOL[index].to_vec(), Some(index));
    }
    let tail = match rng.below(4) {
        0 => rng.below(1000).to_string().into_bytes(),
        1 => {
            let len = rng.below(24) as usize;
            rng.bytes(len)
        }
        2 => {
            let len = rng.range(1, 4096) as usize;
            rng.bytes(len)
        }
        _ => Vec::new(),
    };
    ([b"fz".as_slice(), &tail].concat(), None)
}

/// One random call: the arguments after the command name, and the pool key it names.
pub fn argv(rng: &mut Rng) -> (Vec<Vec<u8>>, Option<usize>) {
    let (key, pool) = key(rng);
    let mut args = match rng.below(10) {
        // Anything, 0 to 12 arguments; the first is a key.
        0 | 1 => {
            let n = rng.below(13) as usize;
            let mut args: Vec<Vec<u8>> = (0..n).map(|_| atom(rng)).collect();
            if let Some(first) = args.first_mut() {
                *first = key.clone();
            }
            return (args, pool.filter(|_| n > 0));
        }
        // Numbers that may be anything, in the right places.
        2 | 3 => {
            let mut args = vec![key, junk_number(rng), junk_number(rng)];
            for _ in 0..rng.below(3) {
                args.push(option_name(rng));
                args.push(junk_number(rng));
            }
            args
        }
        // A well-formed call: most are valid.
        _ => {
            let cap = capacity(rng);
            let mut args = vec![key, cap.clone(), rate(rng)];
            let mut options = Vec::new();
            if rng.one_in(2) {
                options.push(vec![option_name_of(rng, "TOKENS"), tokens(rng, &cap)]);
            }
            if rng.one_in(2) {
                options.push(vec![option_name_of(rng, "MAXWAIT"), max_wait(rng)]);
            }
            if rng.one_in(2) {
                options.reverse();
            }
            args.extend(options.into_iter().flatten());
            args
        }
    };
    // Now and then, break it.
    if rng.one_in(4) {
        mutate(rng, &mut args);
    }
    args.truncate(12);
    (args, pool)
}

/// `name` as written, or in another case.
fn option_name_of(rng: &mut Rng, name: &str) -> Vec<u8> {
    match rng.below(3) {
        0 => name.to_ascii_lowercase().into_bytes(),
        1 => name
            .bytes()
            .enumerate()
            .map(|(i, b)| {
                if i % 2 == 0 {
                    b
                } else {
                    b.to_ascii_lowercase()
                }
            })
            .collect(),
        _ => name.as_bytes().to_vec(),
    }
}

/// Wrong orders, repeats, missing values, extra and unknown arguments.
fn mutate(rng: &mut Rng, args: &mut Vec<Vec<u8>>) {
    let n = args.len();
    match rng.below(8) {
        0 if n > 2 => {
            // Shuffle everything after the key.
            for i in (2..n).rev() {
                let j = 1 + rng.below(i as u64) as usize;
                args.swap(i, j);
            }
        }
        1 if n > 2 => {
            let (i, j) = (1 + rng.below(n as u64 - 1), 1 + rng.below(n as u64 - 1));
            args.swap(i as usize, j as usize);
        }
        2 if n > 1 => {
            args.remove(1 + rng.below(n as u64 - 1) as usize);
        }
        3 => {
            // Repeat an option, maybe in another case.
            let name = rng.pick(&["TOKENS", "MAXWAIT"]);
            args.push(option_name_of(rng, name));
            args.push(rng.below(5).to_string().into_bytes());
        }
        4 => {
            // An option without its value.
            let name = rng.pick(&["TOKENS", "MAXWAIT"]);
            args.push(option_name_of(rng, name));
        }
        5 => {
            for _ in 0..rng.range(1, 4) {
                args.push(atom(rng));
            }
        }
        6 => {
            let at = 1 + rng.below(n as u64) as usize;
            args.insert(at.min(n), atom(rng));
        }
        _ => {
            let keep = rng.below(n as u64 + 1) as usize;
            args.truncate(keep.max(1));
        }
    }
}
