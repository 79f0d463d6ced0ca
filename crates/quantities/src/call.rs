//! Cockpit's call syntax, `name(a, key=value, f(b, c))`, as its logs and configs write
//! schedules and bin adaptations: read here once for every place that takes it.

/// One call: its name and its arguments in order, each by position or by keyword.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call<'a> {
    /// The name before `(`, trimmed.
    pub(crate) name: &'a str,
    /// The top-level arguments (a nested call is one argument).
    pub(crate) args: Vec<Arg<'a>>,
}

/// One argument of a [`Call`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Arg<'a> {
    /// `key` of `key=value`; `None` for a positional argument.
    pub(crate) key: Option<&'a str>,
    /// The value's text, trimmed.
    pub(crate) value: &'a str,
}

/// Why a text is not a call, or its arguments do not fit a signature (the caller words the
/// error for its setting).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallError {
    /// No `(`.
    NotACall,
    /// No closing `)`.
    Unclosed,
    /// A keyword the signature does not have.
    UnknownKeyword(String),
    /// A parameter given twice (by keyword after its position, or twice by keyword).
    Twice(&'static str),
    /// More positional arguments than parameters.
    TooMany,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotACall => write!(f, "expected a call such as `name(…)`"),
            Self::Unclosed => write!(f, "missing `)`"),
            Self::UnknownKeyword(key) => {
                write!(f, "unknown argument `{}`", crate::error::excerpt(key))
            }
            Self::Twice(key) => write!(f, "`{key}` is given twice"),
            Self::TooMany => write!(f, "too many arguments"),
        }
    }
}

impl<'a> Call<'a> {
    /// Parses `name(…)`: the name, and the arguments split at their top-level commas
    /// (brackets and parentheses nest); `key=value` where the text before `=` holds no `(`.
    pub(crate) fn parse(text: &'a str) -> Result<Self, CallError> {
        let (name, rest) = text.trim().split_once('(').ok_or(CallError::NotACall)?;
        let inner = rest
            .trim_end()
            .strip_suffix(')')
            .ok_or(CallError::Unclosed)?;
        let args = top_level(inner)
            .into_iter()
            .map(|arg| match arg.split_once('=') {
                Some((key, value)) if !key.contains('(') => Arg {
                    key: Some(key.trim()),
                    value: value.trim(),
                },
                _ => Arg {
                    key: None,
                    value: arg,
                },
            })
            .collect();
        Ok(Self {
            name: name.trim(),
            args,
        })
    }

    /// The arguments bound to the parameters of `signature`, as Python binds them: by
    /// position, then by keyword; `None` for a parameter not given.
    pub(crate) fn bind(
        &self,
        signature: &[&'static str],
    ) -> Result<Vec<Option<&'a str>>, CallError> {
        let mut bound: Vec<Option<&'a str>> = vec![None; signature.len()];
        for (position, arg) in self.args.iter().enumerate() {
            let slot = match arg.key {
                Some(key) => signature
                    .iter()
                    .position(|k| *k == key)
                    .ok_or_else(|| CallError::UnknownKeyword(key.to_string()))?,
                None => position,
            };
            let entry = bound.get_mut(slot).ok_or(CallError::TooMany)?;
            if entry.is_some() {
                return Err(CallError::Twice(signature[slot]));
            }
            *entry = Some(arg.value);
        }
        Ok(bound)
    }
}

/// Splits `a, f(b, c), [d, e]` at its top-level commas, trimmed, empty parts dropped.
fn top_level(text: &str) -> Vec<&str> {
    let (mut depth, mut start, mut parts) = (0i32, 0, Vec::new());
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts.retain(|a| !a.is_empty());
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_split_at_top_level_commas_and_bind_like_python() {
        let call = Call::parse(" GradAbsMax(linear(2, offset=1), padding = 0.1 ,) ").unwrap();
        assert_eq!(call.name, "GradAbsMax");
        assert_eq!(
            call.args,
            [
                Arg {
                    key: None,
                    value: "linear(2, offset=1)"
                },
                Arg {
                    key: Some("padding"),
                    value: "0.1"
                },
            ]
        );
        let signature = ["track_schedule", "padding", "min_size"];
        assert_eq!(
            call.bind(&signature).unwrap(),
            [Some("linear(2, offset=1)"), Some("0.1"), None]
        );
        let bind = |text: &'static str| Call::parse(text).unwrap().bind(&signature);
        assert_eq!(
            bind("f(1, track_schedule=2)"),
            Err(CallError::Twice("track_schedule"))
        );
        assert_eq!(bind("f(1, 2, 3, 4)"), Err(CallError::TooMany));
        assert_eq!(
            bind("f(size=1)"),
            Err(CallError::UnknownKeyword("size".into()))
        );
        assert_eq!(Call::parse("linear"), Err(CallError::NotACall));
        assert_eq!(Call::parse("linear(1"), Err(CallError::Unclosed));
        assert!(Call::parse("f()").unwrap().args.is_empty());
    }
}
