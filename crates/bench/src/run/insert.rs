//! `bench insert`: see `crate::insert`.
