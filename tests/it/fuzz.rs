//! Every decoder of untrusted bytes decodes or refuses thousands of mutated inputs without
//! a panic or a hang (a short pass; `swactor util fuzz --iterations N` runs long ones).

use swactor::fuzz::{Target, run};

#[test]
fn every_decoder_decodes_or_refuses_mutated_inputs_without_panicking_or_hanging() {
    for target in Target::ALL {
        let r = run(target, 20261130, 3000);
        assert_eq!(r.inputs, 3000);
        assert!(r.decoded > 0 && r.rejected > 0, "{target:?}: {r:?}");
        assert!(r.clean(), "{target:?}: panics {:?}, slow inputs {:?}", r.panics, r.slow);
    }
}
