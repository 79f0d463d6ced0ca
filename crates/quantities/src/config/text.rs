//! Settings written as text (`"linear(16)"`, `"diag_h"`): serde reads them through `FromStr`.

use std::fmt::Display;
use std::str::FromStr;

/// Deserialises a string and parses it with `T::from_str`, the parse error becoming serde's.
/// Every setting type that has a text form deserialises through this one function.
pub(crate) fn parse_text<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    let text = <String as serde::Deserialize>::deserialize(deserializer)?;
    text.parse().map_err(serde::de::Error::custom)
}
