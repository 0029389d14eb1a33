//! The demo's shop (`builtin:shop`, the shipped `orders` executor): an executor like any other —
//! the gateway hands it commands and asks it for previews through the executor contract, and
//! nothing of it is in the gateway's path — that answers as a small shop would. It knows a handful
//! of orders with their totals, states and refunds so far (kept in memory: a restart opens the
//! shop afresh), does each command's work once per idempotency key, previews refunds ("Order 1234
//! — paid 400.00 on 20 Nov, already refunded 0.00; refunding 25.00 leaves 375.00"), refuses at the
//! preview a refund larger than what is left or of an order it does not have, and refuses an
//! execution confirmed on a preview the order has moved away from (`stale_preview`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::domain::command::CommandEnvelope;
use crate::domain::delivery::CallOutcome;
use crate::domain::preview::{BoundPreview, Preview, PreviewAnswer, PreviewRefusal, STALE_PREVIEW};

/// One order: what was paid, when, where it is, and what was refunded so far (in cents).
#[derive(Debug, Clone)]
struct Order {
    total: i64,
    paid_on: &'static str,
    state: &'static str,
    refunded: i64,
}

#[derive(Debug, Default)]
struct Books {
    orders: BTreeMap<String, Order>,
    /// What each idempotency key's work answered: a key seen again answers the same.
    done: HashMap<String, CallOutcome>,
}

#[derive(Debug)]
pub struct Shop {
    books: Mutex<Books>,
}

impl Default for Shop {
    fn default() -> Self {
        let order = |total, paid_on, state, refunded| Order { total, paid_on, state, refunded };
        let orders = [
            ("1234", order(40_000, "20 Nov", "delivered on 22 Nov", 0)),
            ("4410", order(12_990, "24 Nov", "shipped on 25 Nov, arriving on 29 Nov", 0)),
            ("5120", order(4_500, "12 Nov", "returned, and refunded in full", 4_500)),
            ("7788", order(150_000, "26 Nov", "being packed", 0)),
        ];
        let orders = orders.into_iter().map(|(id, order)| (id.to_owned(), order)).collect();
        Self { books: Mutex::new(Books { orders, done: HashMap::new() }) }
    }
}

/// What a command asks of the shop, read from its envelope.
enum Asked<'a> {
    Status(&'a str),
    Refund(&'a str, i64),
    TakeBack(&'a str, i64),
    CloseAccount(&'a str),
    Other,
}

fn asked(envelope: &CommandEnvelope) -> Asked<'_> {
    let arg = |name: &str| envelope.args.get(name).and_then(Value::as_str).unwrap_or_default();
    let order = arg("order_id");
    match (envelope.intent.entity.as_str(), envelope.intent.action.as_str()) {
        ("order", "status") => Asked::Status(order),
        ("order", "refund") => cents(arg("amount")).map_or(Asked::Other, |amount| Asked::Refund(order, amount)),
        ("order", "reverse_refund") => {
            cents(arg("amount")).map_or(Asked::Other, |amount| Asked::TakeBack(order, amount))
        }
        ("account", "close") => Asked::CloseAccount(arg("account_id")),
        _ => Asked::Other,
    }
}

impl Shop {
    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What the command would do, or why it cannot be done.
    pub fn preview(&self, envelope: &CommandEnvelope) -> PreviewAnswer {
        match preview_in(&self.books().orders, &asked(envelope)) {
            Ok(preview) => PreviewAnswer::Shown(preview),
            Err(refusal) => PreviewAnswer::Refused(refusal),
        }
    }

    /// Does the command's work once per idempotency key, on the preview it was confirmed on.
    pub fn call(&self, envelope: &CommandEnvelope, confirmed: Option<&BoundPreview>) -> CallOutcome {
        let mut books = self.books();
        if let Some(answered) = books.done.get(envelope.idempotency_key.as_str()) {
            return answered.clone();
        }
        let asked = asked(envelope);
        let now = preview_in(&books.orders, &asked).ok().map(|preview| preview.digest());
        if let Some(confirmed) = confirmed
            && now.as_deref() != Some(confirmed.digest.as_str())
        {
            let message = "the order changed since it was previewed";
            return failed(STALE_PREVIEW, message);
        }
        let outcome = work(&mut books.orders, &asked);
        books.done.insert(envelope.idempotency_key.as_str().to_owned(), outcome.clone());
        outcome
    }
}

fn preview_in(orders: &BTreeMap<String, Order>, asked: &Asked<'_>) -> Result<Preview, PreviewRefusal> {
    let refused = |code: &str, message: String| PreviewRefusal { code: code.to_owned(), message };
    let find = |id: &str| orders.get(id).ok_or_else(|| refused("unknown_order", format!("there is no order {id}")));
    let (id, order, summary, left) = match *asked {
        Asked::Refund(id, amount) => {
            let order = find(id)?;
            let left = order.total - order.refunded - amount;
            if left < 0 {
                let can = money(order.total - order.refunded);
                return Err(refused("refund_exceeds_balance", format!("order {id} has {can} left to refund")));
            }
            let (paid, refunded, refunding) = (money(order.total), money(order.refunded), money(amount));
            let summary = format!(
                "Order {id} — paid {paid} on {}, already refunded {refunded}; refunding {refunding} leaves {}",
                order.paid_on,
                money(left)
            );
            (id, order, summary, left)
        }
        Asked::TakeBack(id, amount) => {
            let order = find(id)?;
            if amount > order.refunded {
                let message = format!("order {id} has only {} refunded", money(order.refunded));
                return Err(refused("more_than_refunded", message));
            }
            let left = order.total - order.refunded + amount;
            let summary = format!(
                "Order {id} — refunded {}; taking back {} leaves {} paid",
                money(order.refunded),
                money(amount),
                money(left)
            );
            (id, order, summary, left)
        }
        _ => return Err(refused("nothing_to_preview", "the shop previews refunds only".into())),
    };
    let fields = [
        ("order", id.to_owned()),
        ("total", money(order.total)),
        ("refunded", money(order.refunded)),
        ("left", money(left)),
    ];
    Ok(Preview { summary, fields: fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect() })
}

fn work(orders: &mut BTreeMap<String, Order>, asked: &Asked<'_>) -> CallOutcome {
    let unknown = |id: &str| failed("unknown_order", &format!("there is no order {id}"));
    match *asked {
        Asked::Status(id) => match orders.get(id) {
            Some(order) => done(json!({"order": id, "state": order.state, "total": money(order.total),
                "refunded": money(order.refunded)})),
            None => unknown(id),
        },
        Asked::Refund(id, amount) | Asked::TakeBack(id, amount) => {
            let Some(order) = orders.get_mut(id) else { return unknown(id) };
            let refund = matches!(asked, Asked::Refund(..));
            let after = if refund { order.refunded + amount } else { order.refunded - amount };
            if after > order.total || after < 0 {
                return failed("refund_exceeds_balance", &format!("order {id} cannot have {} refunded", money(after)));
            }
            order.refunded = after;
            done(json!({"order": id, "refunded": money(order.refunded), "left": money(order.total - order.refunded)}))
        }
        Asked::CloseAccount(account) => done(json!({"account": account, "state": "closed"})),
        Asked::Other => failed("unknown_action", "the shop does not do that"),
    }
}

fn done(result: Value) -> CallOutcome {
    CallOutcome::Executed { succeeded: true, detail: result }
}

fn failed(code: &str, message: &str) -> CallOutcome {
    CallOutcome::Executed { succeeded: false, detail: json!({"code": code, "message": message}) }
}

/// `25`, `25.5`, `25.00` in cents; none for anything else (the registry's rules keep amounts to
/// two decimals).
fn cents(amount: &str) -> Option<i64> {
    let (whole, fraction) = amount.split_once('.').unwrap_or((amount, ""));
    if fraction.len() > 2 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let fraction: i64 = format!("{fraction:0<2}").parse().ok()?;
    Some(whole.parse::<i64>().ok()?.checked_mul(100)? + fraction)
}

fn money(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents.rem_euclid(100))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refund(order: &str, amount: &str) -> CommandEnvelope {
        let request = crate::domain::command::demo::refund("demo", order, amount, "wamid.SHOP").expect("a request");
        CommandEnvelope::canonicalize(request, time::OffsetDateTime::now_utc())
    }

    #[test]
    fn a_refund_is_previewed_done_once_and_refused_past_what_is_left() {
        let shop = Shop::default();
        let first = refund("1234", "25");
        let PreviewAnswer::Shown(preview) = shop.preview(&first) else { panic!("a preview") };
        assert_eq!(
            preview.summary,
            "Order 1234 — paid 400.00 on 20 Nov, already refunded 0.00; refunding 25.00 leaves 375.00"
        );
        let bound = BoundPreview::from(preview);
        assert!(matches!(shop.call(&first, Some(&bound)), CallOutcome::Executed { succeeded: true, .. }));
        assert!(matches!(shop.call(&first, Some(&bound)), CallOutcome::Executed { succeeded: true, .. }), "once");
        let PreviewAnswer::Shown(after) = shop.preview(&refund("1234", "10")) else { panic!("a preview") };
        assert!(after.summary.contains("already refunded 25.00; refunding 10.00 leaves 365.00"), "{}", after.summary);
        let too_much = shop.preview(&refund("1234", "376"));
        assert!(matches!(too_much, PreviewAnswer::Refused(r) if r.message == "order 1234 has 375.00 left to refund"));
        assert!(matches!(shop.preview(&refund("9999", "1")), PreviewAnswer::Refused(r) if r.code == "unknown_order"));
    }

    #[test]
    fn an_execution_on_a_preview_the_order_moved_away_from_is_stale() {
        let shop = Shop::default();
        let PreviewAnswer::Shown(old) = shop.preview(&refund("4410", "10")) else { panic!("a preview") };
        let other = refund("4410", "20");
        assert!(matches!(shop.call(&other, None), CallOutcome::Executed { succeeded: true, .. }));
        let stale = shop.call(&refund("4410", "10"), Some(&BoundPreview::from(old)));
        assert!(matches!(stale, CallOutcome::Executed { succeeded: false, detail } if detail["code"] == STALE_PREVIEW));
    }

    #[test]
    fn amounts_are_read_in_cents() {
        assert_eq!(cents("25"), Some(2500));
        assert_eq!(cents("25.5"), Some(2550));
        assert_eq!(cents("0.05"), Some(5));
        assert_eq!(cents("1.234"), None);
        assert_eq!(money(12_990), "129.90");
    }
}
