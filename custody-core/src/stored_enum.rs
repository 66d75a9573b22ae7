//! `stored_enum!`: one declaration for the enums whose values are stored and serialized as
//! fixed strings (statuses, purposes, kinds): the enum, `ALL`, `as_str`, `parse`, `Display`,
//! serde both ways through those strings, and, for a lifecycle, its legal moves
//! (`can_move_to`) from a table. A value that has shipped never changes its string.

macro_rules! stored_enum {
    (@count) => { 0usize };
    (@count $head:ident $($rest:ident)*) => { 1usize + stored_enum!(@count $($rest)*) };

    (
        $(#[$meta:meta])*
        $name:ident {
            $($(#[$vmeta:meta])* $variant:ident => $s:literal),+ $(,)?
        }
        $(moves { $($from:ident => $to:ident),+ $(,)? })?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [$name; stored_enum!(@count $($variant)+)] = [$($name::$variant),+];

            /// The stored and serialized value; never change one that has shipped.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $s),+
                }
            }

            /// The value stored as `s`, if any.
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.into_iter().find(|v| v.as_str() == s)
            }

            $(
                /// The only legal moves of this lifecycle; anything else is a bug the caller
                /// must not persist.
                pub fn can_move_to(self, next: $name) -> bool {
                    matches!((self, next), $(($name::$from, $name::$to))|+)
                }
            )?
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                $name::parse(&s).ok_or_else(|| {
                    <D::Error as ::serde::de::Error>::unknown_variant(&s, &[$($s),+])
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    stored_enum! {
        /// A lifecycle for the test.
        Light {
            Green => "green",
            /// Documented variant.
            Amber => "amber",
            Red => "red",
        }
        moves {
            Green => Amber,
            Amber => Red,
            Red => Green,
        }
    }

    #[test]
    fn strings_round_trip_and_only_the_table_moves() {
        assert_eq!(Light::ALL, [Light::Green, Light::Amber, Light::Red]);
        for l in Light::ALL {
            assert_eq!(Light::parse(l.as_str()), Some(l));
            assert_eq!(l.to_string(), l.as_str());
            let json = serde_json::to_string(&l).unwrap();
            assert_eq!(json, format!("\"{}\"", l.as_str()));
            assert_eq!(serde_json::from_str::<Light>(&json).unwrap(), l);
        }
        assert_eq!(Light::parse("blue"), None);
        let err = serde_json::from_str::<Light>("\"blue\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("blue") && err.contains("amber"), "{err}");
        assert!(Light::Green.can_move_to(Light::Amber));
        assert!(!Light::Green.can_move_to(Light::Red));
        assert!(!Light::Amber.can_move_to(Light::Amber));
    }
}
