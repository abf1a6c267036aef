//! Object header contract: fixed little-endian layout, total decoding, typed rejections.

use proptest::prelude::*;
use swactor::wire::reason::ObjectFailure;
use swactor::wire::{
    ActivationDType, HEADER_LEN, HeaderError, OBJECT_MAGIC, ObjectFlags, ObjectHeader, ObjectId,
    ObjectSpec, Sequence,
};

fn header(id: u64, seq: u64, extent: u64, flags: u32) -> ObjectHeader {
    ObjectHeader::new(ObjectId(id), Sequence(seq), extent, ObjectFlags(flags))
}

#[test]
fn header_encodes_to_the_documented_little_endian_layout() {
    let h = header(0x0102_0304_0506_0708, 9, 1024, ObjectFlags::PREFILL.0);
    let b = h.encode();
    assert_eq!(b.len(), HEADER_LEN);
    assert_eq!(&b[0..4], b"SWOB");
    assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), OBJECT_MAGIC);
    assert_eq!(u16::from_le_bytes([b[4], b[5]]), 1, "version");
    assert_eq!(u16::from_le_bytes([b[6], b[7]]), 40, "header_len");
    assert_eq!(&b[8..16], &0x0102_0304_0506_0708u64.to_le_bytes());
    assert_eq!(&b[16..24], &9u64.to_le_bytes());
    assert_eq!(&b[24..32], &1024u64.to_le_bytes());
    assert_eq!(&b[32..36], &1u32.to_le_bytes());
    assert_eq!(&b[36..40], &[0, 0, 0, 0], "reserved");
}

#[test]
fn each_corrupt_field_is_rejected_with_its_own_reason() {
    let good = header(1, 0, 4, 0).encode();
    let cases: [(usize, u8, ObjectFailure); 5] = [
        (0, b'X', ObjectFailure::BadMagic),
        (4, 2, ObjectFailure::UnsupportedVersion),
        (6, 41, ObjectFailure::BadHeaderLength),
        (36, 1, ObjectFailure::ReservedNonZero),
        (35, 0x80, ObjectFailure::UnknownFlags),
    ];
    for (at, byte, reason) in cases {
        let mut b = good;
        b[at] = byte;
        let err = ObjectHeader::decode(&b).expect_err("corrupt header must be rejected");
        assert_eq!(err.reason(), reason, "byte {at} set to {byte}");
    }
}

#[test]
fn validation_rejects_oversized_misaligned_empty_and_out_of_sequence_objects() {
    let spec = ObjectSpec::activations(4, 8, ActivationDType::F32); // rows of 32 bytes, max 128
    let expected = Sequence(3);
    let ok = header(1, 3, 64, 0);
    assert_eq!(ok.validate(&spec, expected), Ok(()));
    let reasons = [
        (header(1, 3, 160, 0), ObjectFailure::ExtentOverMax),
        (header(1, 3, 33, 0), ObjectFailure::ExtentMisaligned),
        (header(1, 3, 0, 0), ObjectFailure::EmptyObject),
        (header(1, 4, 32, 0), ObjectFailure::SequenceViolation),
        (header(1, 2, 32, 0), ObjectFailure::SequenceViolation),
    ];
    for (h, reason) in reasons {
        assert_eq!(h.validate(&spec, expected).map_err(|e| e.reason()), Err(reason), "{h:?}");
    }
    assert_eq!(
        header(1, 5, 32, 0).validate(&spec, expected),
        Err(HeaderError::SequenceViolation { expected, found: Sequence(5) })
    );
}

#[test]
fn token_specs_accept_whole_u32_ids_only() {
    let spec = ObjectSpec::token_ids(16);
    assert_eq!(header(1, 0, 64, 0).validate(&spec, Sequence(0)), Ok(()));
    assert_eq!(
        header(1, 0, 6, 0).validate(&spec, Sequence(0)).map_err(|e| e.reason()),
        Err(ObjectFailure::ExtentMisaligned)
    );
    assert_eq!(
        header(1, 0, 68, 0).validate(&spec, Sequence(0)).map_err(|e| e.reason()),
        Err(ObjectFailure::ExtentOverMax)
    );
}

proptest! {
    #[test]
    fn any_header_round_trips_through_its_encoding(
        id in any::<u64>(), seq in any::<u64>(), extent in any::<u64>(),
        flags in 0u32..=ObjectFlags::KNOWN.0,
    ) {
        let h = header(id, seq, extent, flags);
        prop_assert_eq!(ObjectHeader::decode(&h.encode()), Ok(h));
    }

    #[test]
    fn a_mutated_header_decodes_to_exactly_its_bytes_or_is_rejected_with_a_reason(
        id in any::<u64>(), seq in any::<u64>(), extent in any::<u64>(),
        flags in 0u32..=ObjectFlags::KNOWN.0,
        mutations in proptest::collection::vec((0usize..HEADER_LEN, any::<u8>()), 1..6),
    ) {
        let mut bytes = header(id, seq, extent, flags).encode();
        for (at, value) in mutations {
            bytes[at] = value;
        }
        match ObjectHeader::decode(&bytes) {
            // Decoding is lossless: the header re-encodes to the mutated bytes exactly.
            Ok(decoded) => prop_assert_eq!(decoded.encode(), bytes),
            Err(e) => {
                let reason = e.reason();
                prop_assert!(matches!(reason,
                    ObjectFailure::BadMagic | ObjectFailure::UnsupportedVersion
                    | ObjectFailure::BadHeaderLength | ObjectFailure::ReservedNonZero
                    | ObjectFailure::UnknownFlags), "decode gave {:?}", reason);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in proptest::array::uniform32(any::<u8>()), tail in any::<u64>()) {
        let mut all = [0u8; HEADER_LEN];
        all[..32].copy_from_slice(&bytes);
        all[32..].copy_from_slice(&tail.to_le_bytes());
        if let Ok(h) = ObjectHeader::decode(&all) {
            prop_assert_eq!(h.encode(), all);
        }
    }
}
