//! `${VAR}` and `${VAR:-default}` in configuration strings.
//!
//! Applied to string values after TOML parsing, so that a secret containing a quote or a newline
//! cannot change the file's structure. `$${` writes a literal `${`.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpolationError {
    #[error("${{{0}}} is not set and has no default (write ${{{0}:-default}})")]
    Unset(String),
    #[error("unterminated ${{ in `{0}`")]
    Unterminated(String),
    #[error("`{0}` is not a valid variable name")]
    BadName(String),
}

/// Expands every `${...}` in `text`, looking variables up with `lookup`.
pub fn interpolate(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, InterpolationError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let end = after.find('}').ok_or_else(|| InterpolationError::Unterminated(text.to_owned()))?;
            let expr = &after[..end];
            let (name, default) = match expr.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (expr, None),
            };
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                return Err(InterpolationError::BadName(name.to_owned()));
            }
            // An empty variable counts as unset, as in the shell's `:-`.
            match (lookup(name).filter(|v| !v.is_empty()), default) {
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => return Err(InterpolationError::Unset(name.to_owned())),
            }
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("db.local".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_set_variables_and_defaults() {
        assert_eq!(interpolate("pg://${HOST}/x", &env).as_deref(), Ok("pg://db.local/x"));
        assert_eq!(interpolate("${PORT:-8080}", &env).as_deref(), Ok("8080"));
        assert_eq!(interpolate("${HOST:-other}", &env).as_deref(), Ok("db.local"));
        assert_eq!(interpolate("${EMPTY:-fallback}", &env).as_deref(), Ok("fallback"));
        assert_eq!(interpolate("${X:-}", &env).as_deref(), Ok(""));
        assert_eq!(interpolate("${X:-a:-b}", &env).as_deref(), Ok("a:-b"));
    }

    #[test]
    fn leaves_other_dollars_and_honours_the_escape() {
        assert_eq!(interpolate("cost $5", &env).as_deref(), Ok("cost $5"));
        assert_eq!(interpolate("$${HOST}", &env).as_deref(), Ok("${HOST}"));
        assert_eq!(interpolate("end$", &env).as_deref(), Ok("end$"));
    }

    #[test]
    fn reports_unset_unterminated_and_bad_names() {
        assert_eq!(interpolate("${NOPE}", &env), Err(InterpolationError::Unset("NOPE".into())));
        assert!(matches!(interpolate("${HOST", &env), Err(InterpolationError::Unterminated(_))));
        assert!(matches!(interpolate("${A-B}", &env), Err(InterpolationError::BadName(_))));
        assert!(matches!(interpolate("${1X}", &env), Err(InterpolationError::BadName(_))));
    }
}
