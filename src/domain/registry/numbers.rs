//! Numbers as a tenant's locale writes them, and money with its currency.
//!
//! `25,00` and `1.000,50` are amounts in Portuguese; `2,500.00` is 2500 in English. A form only one
//! convention can mean is read whatever the locale (`1.000,50` has one reading); a form that could
//! mean two things (`2,500` in English: 2500, or 2.5 as Portuguese writes it) is asked back, never
//! guessed. Digits other than ASCII's are read only where the locale lists them
//! (`[language.ar] digits`). A currency symbol or code beside an amount (`$25`, `25€`, `R$25`,
//! `25 USD`) is kept so that it can be checked against the tenant's currency.

/// How a locale writes numbers: its decimal mark and, if any, its own ten digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumberStyle {
    pub decimal_mark: char,
    /// The locale's digits for 0 to 9, read as ASCII's (Arabic-Indic, Devanagari, ...).
    pub digits: Option<[char; 10]>,
}

impl Default for NumberStyle {
    fn default() -> Self {
        Self { decimal_mark: '.', digits: None }
    }
}

/// What one token says as a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NumberRead {
    /// ASCII, `-`, digits and at most one `.`: ready for `canonical_decimal`.
    Number(String),
    /// Two conventions read it differently: the locale's reading first.
    TwoReadings(String, String),
    NotANumber,
}

/// A currency this gateway can name: its ISO 4217 code, the symbols people write for it and the
/// digits of its minor unit. The common ones only (a tenant names one of them); an unknown symbol
/// is not money.
pub struct Currency {
    pub code: &'static str,
    pub symbols: &'static [&'static str],
    pub minor_units: u32,
}

/// ISO 4217's minor units for the currencies a tenant may declare.
pub const CURRENCIES: &[Currency] = &[
    Currency { code: "USD", symbols: &["$", "US$"], minor_units: 2 },
    Currency { code: "EUR", symbols: &["€"], minor_units: 2 },
    Currency { code: "GBP", symbols: &["£"], minor_units: 2 },
    Currency { code: "BRL", symbols: &["R$"], minor_units: 2 },
    Currency { code: "CAD", symbols: &["$", "CA$", "C$"], minor_units: 2 },
    Currency { code: "AUD", symbols: &["$", "A$", "AU$"], minor_units: 2 },
    Currency { code: "MXN", symbols: &["$", "MX$"], minor_units: 2 },
    Currency { code: "CHF", symbols: &[], minor_units: 2 },
    Currency { code: "INR", symbols: &["₹"], minor_units: 2 },
    Currency { code: "JPY", symbols: &["¥", "円"], minor_units: 0 },
    Currency { code: "CNY", symbols: &["¥", "元"], minor_units: 2 },
    Currency { code: "KWD", symbols: &[], minor_units: 3 },
    Currency { code: "ZAR", symbols: &[], minor_units: 2 },
];

impl Currency {
    pub fn by_code(code: &str) -> Option<&'static Currency> {
        CURRENCIES.iter().find(|c| c.code.eq_ignore_ascii_case(code))
    }

    /// Whether `mark` (a symbol or a code as written) names this currency.
    pub fn is_named_by(&self, mark: &str) -> bool {
        self.code.eq_ignore_ascii_case(mark) || self.symbols.contains(&mark)
    }
}

/// Whether `word` alone is a currency symbol or code (`$`, `USD`, `eur`).
pub fn is_currency_mark(word: &str) -> bool {
    CURRENCIES.iter().any(|c| c.is_named_by(word))
}

/// An amount as written: the number (with its sign) and the currency mark beside it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenMoney<'t> {
    pub number: String,
    pub mark: Option<&'t str>,
}

/// Splits `$25`, `25€`, `R$25,50`, `USD25`, `-$25` into the number and its mark; a token with no
/// mark is all number. `None` when what is beside the number is no currency.
pub fn split_money(token: &str) -> Option<WrittenMoney<'_>> {
    let (sign, unsigned) = match token.strip_prefix(['-', '−']) {
        Some(rest) => ("-", rest),
        None => ("", token),
    };
    let start = unsigned.find(|c: char| c.is_numeric() || matches!(c, '+' | '.' | ','))?;
    let last = unsigned.rfind(char::is_numeric)?;
    let end = last + unsigned[last..].chars().next().map_or(1, char::len_utf8);
    let (before, number, after) = (&unsigned[..start], &unsigned[start..end], &unsigned[end..]);
    let mark = match (before.is_empty(), after.is_empty()) {
        (true, true) => None,
        (false, true) => Some(before),
        (true, false) => Some(after),
        (false, false) => return None,
    };
    match mark {
        Some(mark) if !is_currency_mark(mark) => None,
        _ => Some(WrittenMoney { number: format!("{sign}{number}"), mark }),
    }
}

impl NumberStyle {
    /// A locale's style: `decimal_mark` from its `[language.*]` words, else `.`.
    pub fn new(decimal_mark: Option<char>, digits: Option<&str>) -> Self {
        let digits = digits.and_then(|d| d.chars().collect::<Vec<_>>().try_into().ok());
        Self { decimal_mark: decimal_mark.unwrap_or('.'), digits }
    }

    /// What `token` is as a number written in this style.
    pub fn read(&self, token: &str) -> NumberRead {
        let mut ascii = String::with_capacity(token.len());
        for c in token.chars() {
            match self.digits.and_then(|d| d.iter().position(|x| *x == c)) {
                Some(digit) => ascii.push(char::from(b'0' + digit as u8)),
                None if c == '−' => ascii.push('-'),
                None if c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | ',') => ascii.push(c),
                None => return NumberRead::NotANumber,
            }
        }
        let (sign, body) = match ascii.strip_prefix(['-', '+']) {
            Some(rest) => (&ascii[..1], rest),
            None => ("", ascii.as_str()),
        };
        let sign = if sign == "+" { "" } else { sign };
        let with = |whole: &str, fraction: Option<&str>| match fraction {
            Some(f) => format!("{sign}{whole}.{f}"),
            None => format!("{sign}{whole}"),
        };
        let marks: Vec<(usize, char)> = body.char_indices().filter(|(_, c)| matches!(c, '.' | ',')).collect();
        match marks.as_slice() {
            [] => NumberRead::Number(with(body, None)),
            [(at, mark)] => self.one_mark(body, *at, *mark, with),
            [.., (last_at, last)] => {
                // Several marks: the last is the decimal mark when it differs from the others,
                // which group thousands; all alike, they all group.
                let groups_with = marks[0].1;
                if marks[..marks.len() - 1].iter().any(|(_, m)| *m != groups_with) {
                    return NumberRead::NotANumber;
                }
                if *last == groups_with {
                    grouped(body, groups_with).map_or(NumberRead::NotANumber, |w| NumberRead::Number(with(&w, None)))
                } else {
                    let whole = grouped(&body[..*last_at], groups_with);
                    match whole {
                        Some(w) => NumberRead::Number(with(&w, Some(&body[last_at + 1..]))),
                        None => NumberRead::NotANumber,
                    }
                }
            }
        }
    }

    /// `25.00`, `25,00`, `2,500`: one mark, which decimals or groups.
    fn one_mark(&self, body: &str, at: usize, mark: char, with: impl Fn(&str, Option<&str>) -> String) -> NumberRead {
        let (whole, fraction) = (&body[..at], &body[at + 1..]);
        let as_decimal = with(whole, Some(fraction));
        let could_group = fraction.len() == 3 && (1..=3).contains(&whole.len()) && !whole.starts_with('0');
        if !could_group || mark == self.decimal_mark {
            return NumberRead::Number(as_decimal);
        }
        NumberRead::TwoReadings(with(&format!("{whole}{fraction}"), None), as_decimal)
    }
}

/// `1,000,000` without its marks, when every group after the first has three digits.
fn grouped(body: &str, mark: char) -> Option<String> {
    let mut groups = body.split(mark);
    let first = groups.next()?;
    if first.is_empty() || first.len() > 3 {
        return None;
    }
    let mut whole = first.to_owned();
    for group in groups {
        if group.len() != 3 {
            return None;
        }
        whole.push_str(group);
    }
    Some(whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn en() -> NumberStyle {
        NumberStyle::default()
    }

    fn pt() -> NumberStyle {
        NumberStyle::new(Some(','), None)
    }

    fn number(n: &str) -> NumberRead {
        NumberRead::Number(n.to_owned())
    }

    #[test]
    fn each_locale_reads_its_own_marks_and_asks_back_what_has_two_readings() {
        assert_eq!(pt().read("25,00"), number("25.00"));
        assert_eq!(pt().read("1.000,50"), number("1000.50"));
        assert_eq!(pt().read("25.00"), number("25.00"), "two digits after a point: a decimal");
        assert_eq!(pt().read("2.500"), NumberRead::TwoReadings("2500".into(), "2.500".into()));
        assert_eq!(pt().read("25,999"), number("25.999"), "the locale's decimal mark");
        assert_eq!(en().read("2,500.00"), number("2500.00"));
        assert_eq!(en().read("1,000,000"), number("1000000"));
        assert_eq!(en().read("2,500"), NumberRead::TwoReadings("2500".into(), "2.500".into()));
        assert_eq!(en().read("25.999"), number("25.999"));
        assert_eq!(en().read("25,00"), number("25.00"), "only a decimal mark has two digits after it");
        assert_eq!(en().read("-25"), number("-25"));
        assert_eq!(en().read("−25"), number("-25"), "a minus sign is a minus");
        assert_eq!(en().read("1,00,000"), NumberRead::NotANumber);
        assert_eq!(en().read("1.000.000,5,0"), NumberRead::NotANumber);
        assert_eq!(en().read("٢٥"), NumberRead::NotANumber, "Arabic-Indic digits only where the locale says");
        let arabic = NumberStyle::new(Some('.'), Some("٠١٢٣٤٥٦٧٨٩"));
        assert_eq!(arabic.read("٢٥"), number("25"));
    }

    #[test]
    fn money_marks_are_split_off_and_must_be_currencies() {
        let split = |t| split_money(t).map(|m| (m.number, m.mark));
        let money = |n: &str, m| Some((n.to_owned(), m));
        assert_eq!(split("$25"), money("25", Some("$")));
        assert_eq!(split("25€"), money("25", Some("€")));
        assert_eq!(split("R$25,50"), money("25,50", Some("R$")));
        assert_eq!(split("USD25"), money("25", Some("USD")));
        assert_eq!(split("25"), money("25", None));
        assert_eq!(split("-$25"), money("-25", Some("$")), "the sign is kept, so the rule refuses it");
        assert_eq!(split("25kg"), None);
        assert_eq!(split("$"), None);
        assert!(Currency::by_code("usd").is_some_and(|c| c.is_named_by("$") && !c.is_named_by("€")));
    }
}
