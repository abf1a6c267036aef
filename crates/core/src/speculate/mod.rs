//! Speculative decoding's pure parts (SERVING.md, speculation): drafting from a
//! sequence's own history ([`ngram`]), verifying a draft exactly ([`verify`]), and the
//! per-sequence draft length that follows measured acceptance ([`adapt`]). No clock, no
//! randomness of its own, no IO: the caller feeds tokens, probabilities and uniform
//! numbers.

pub mod adapt;
pub mod ngram;
pub mod verify;
