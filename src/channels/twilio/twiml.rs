//! The TwiML answer to a messaging webhook: `<Response/>`, or one `<Message>` per reply. Pure.

/// The answer carrying `messages`, in order.
pub fn response(messages: &[String]) -> String {
    let mut xml = String::from(r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    if messages.is_empty() {
        xml.push_str("<Response/>");
        return xml;
    }
    xml.push_str("<Response>");
    for message in messages {
        xml.push_str("<Message>");
        escape_into(&mut xml, message);
        xml.push_str("</Message>");
    }
    xml.push_str("</Response>");
    xml
}

/// XML text: the five special characters escaped, and characters XML 1.0 cannot carry dropped.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_reply_is_an_empty_response_and_replies_are_escaped_messages() {
        assert_eq!(response(&[]), r#"<?xml version="1.0" encoding="UTF-8"?><Response/>"#);
        let xml = response(&["Refund <1234> & \"more\"\nReply YES 12".into(), "second".into()]);
        assert_eq!(
            xml,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Message>Refund &lt;1234&gt; &amp; \
             &quot;more&quot;\nReply YES 12</Message><Message>second</Message></Response>"
        );
        assert!(!response(&["a\u{0}b".into()]).contains('\u{0}'));
    }
}
