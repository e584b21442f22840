//! Fixed sets of words: an enum each of whose variants stands for one string. Every such set is
//! declared through [`words!`], so the list of its variants, the names written and the names read
//! back come from one row per variant and cannot drift apart.

/// Declares an enum whose variants each stand for one word, one row per variant (its docs and
/// attributes, its name, `=>`, its word), and gives it:
/// - `ALL`: every variant, in declaration order;
/// - `const fn as_str(self) -> &'static str`: its word;
/// - `fn parse(&str) -> Option<Self>`: the variant a word stands for, `None` for any other;
/// - `Display`, writing its word, where `impl Display;` follows the enum.
///
/// A set that also keeps what its words do not name ends in `else { Variant(Type) }`. It gets
/// `KNOWN` (the variants with a word), `known_str` (the word, or else what that variant holds)
/// and `parse_known` (a word's variant), from which it writes its own `as_str` and `parse`.
///
/// The enum's own attributes (derives, serde's) pass through as written.
///
/// ```ignore
/// gpulse_base::words! {
///     /// How a run ended.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum End {
///         /// It finished.
///         Done => "done",
///         Failed => "failed",
///     }
///     impl Display;
/// }
/// ```
#[macro_export]
macro_rules! words {
    (@Display $name:ident) => {
        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
    (
        $(#[$attr:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vattr:meta])* $variant:ident => $word:literal,)+
        } else {
            $(#[$oattr:meta])* $other:ident($ty:ty) $(,)?
        }
        $(impl $display:ident;)?
    ) => {
        $(#[$attr])*
        $vis enum $name {
            $($(#[$vattr])* $variant,)+
            $(#[$oattr])* $other($ty),
        }

        // A set need not use every face it is given.
        #[allow(dead_code)]
        impl $name {
            /// Every variant with a word of its own, in declaration order.
            $vis const KNOWN: [$name; [$($word),+].len()] = [$($name::$variant),+];

            /// Its word, or what the variant without one holds.
            $vis const fn known_str(&self) -> ::core::result::Result<&'static str, &$ty> {
                match self {
                    $($name::$variant => Ok($word),)+
                    $name::$other(held) => Err(held),
                }
            }

            /// The variant with a word of its own that `word` stands for; `None` for any other.
            $vis fn parse_known(word: &str) -> ::core::option::Option<Self> {
                match word {
                    $($word => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        $($crate::words!(@$display $name);)?
    };
    (
        $(#[$attr:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vattr:meta])* $variant:ident => $word:literal,)+
        }
        $(impl $display:ident;)?
    ) => {
        $(#[$attr])*
        $vis enum $name {
            $($(#[$vattr])* $variant,)+
        }

        // A set need not use every face it is given.
        #[allow(dead_code)]
        impl $name {
            /// Every variant, in declaration order.
            $vis const ALL: [$name; [$($word),+].len()] = [$($name::$variant),+];

            /// Its word.
            $vis const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }

            /// The variant `word` stands for; `None` for any other.
            $vis fn parse(word: &str) -> ::core::option::Option<Self> {
                match word {
                    $($word => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        $($crate::words!(@$display $name);)?
    };
}

#[cfg(test)]
mod tests {
    crate::words! {
        /// A closed set.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum End {
            /// It finished.
            Done => "done",
            Failed => "failed",
        }
        impl Display;
    }

    crate::words! {
        /// A set that keeps what it does not know.
        #[derive(Debug, Clone, PartialEq, Eq)]
        enum Said {
            Yes => "yes",
            No => "no",
        } else {
            Other(String),
        }
    }

    #[test]
    fn every_word_reads_back_as_its_variant() {
        assert_eq!(End::ALL, [End::Done, End::Failed]);
        for end in End::ALL {
            assert_eq!(End::parse(end.as_str()), Some(end));
            assert_eq!(end.to_string(), end.as_str());
        }
        assert_eq!((End::Done.as_str(), End::parse("done"), End::parse("Done")), ("done", Some(End::Done), None));
        assert_eq!(format!("{:>6}|", End::Done), "done|", "written as is, not padded");
    }

    #[test]
    fn an_open_set_hands_back_what_it_holds() {
        assert_eq!(Said::KNOWN, [Said::Yes, Said::No]);
        assert_eq!(Said::No.known_str(), Ok("no"));
        assert_eq!(Said::Other("maybe".into()).known_str(), Err(&"maybe".to_owned()));
        assert_eq!((Said::parse_known("yes"), Said::parse_known("maybe")), (Some(Said::Yes), None));
    }
}
