//! Fieldless enums with stable snake_case names, declared once for the store, the API and the
//! evidence.

/// Declares a fieldless enum with its stable wire names, `ALL`, `as_str`, `Display`, `FromStr`,
/// serde, and its OpenAPI schema (a string with the names as its `enum`), so that the names live
/// in exactly one place.
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::domain::names::UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => {
                        Err($crate::domain::names::UnknownName { what: stringify!($name), name: other.to_owned() })
                    }
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::domain::names::names_schema(&[$($text),+])
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

pub(crate) use named_enum;

/// A string that is one of `names`.
pub fn names_schema(names: &[&str]) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(names.iter().copied()))
        .into()
}

/// A stored name that no variant carries: a corrupted row or a newer schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{name}`")]
pub struct UnknownName {
    pub what: &'static str,
    pub name: String,
}
