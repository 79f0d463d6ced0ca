//! What every drop-in shares with the burn layer it mirrors: the conversion from burn's
//! layer, the constructor from burn's config, and burn's layer back.

/// `From<burn's layer>`, `new(&config, device)` and `as_burn()` for a drop-in whose fields
/// are burn's, in burn's order: a `value` field is moved from burn's layer and cloned back, a
/// `layer` field (a nested drop-in) converts with `into()` and back with `as_burn()`.
///
/// ```ignore
/// mirrors_burn!(Linear, burn::nn::Linear, burn::nn::LinearConfig {
///     weight: value,
///     bias: value,
/// });
/// ```
macro_rules! mirrors_burn {
    ($ours:ident, $burn:path, $config:path { $($field:ident: $how:ident),+ $(,)? }) => {
        impl From<$burn> for $ours {
            fn from(layer: $burn) -> Self {
                Self {
                    $($field: $crate::layers::mirror::mirrors_burn!(@from $how layer.$field)),+
                }
            }
        }

        impl $ours {
            /// The layer `config` describes, initialised as burn initialises it.
            pub fn new(config: &$config, device: &burn::tensor::Device) -> Self {
                config.init(device).into()
            }

            /// burn's layer with these parameters and settings.
            pub fn as_burn(&self) -> $burn {
                type Burn = $burn;
                Burn {
                    $($field: $crate::layers::mirror::mirrors_burn!(@back $how self.$field)),+
                }
            }
        }
    };
    (@from value $value:expr) => {
        $value
    };
    (@from layer $value:expr) => {
        $value.into()
    };
    (@back value $value:expr) => {
        ::core::clone::Clone::clone(&$value)
    };
    (@back layer $value:expr) => {
        $value.as_burn()
    };
}

pub(crate) use mirrors_burn;
