//! The K-quants' scale fitting, as GGML's reference `k_quants.c` (and candle's port of
//! it) computes it, operation for operation: the same floats give the same scales.

/// Rounds to the nearest integer, halves away from zero.
pub(super) fn nearest_int(v: f32) -> i32 {
    v.round() as i32
}

/// The scale of a symmetric quantization of `x` into `-nmax..nmax` (`ls` gets each
/// value's level plus `nmax`), refined by weighted least squares (`rmse_type` 1: weights
/// `x^2`; GGML's `make_qx_quants` without an importance matrix).
pub(super) fn make_qx_quants(nmax: i32, x: &[f32], ls: &mut [i8], rmse_type: i32) -> f32 {
    let n = x.len();
    let (mut max, mut amax) = (0f32, 0f32);
    for &x in x {
        if x.abs() > amax {
            amax = x.abs();
            max = x;
        }
    }
    if amax == 0. {
        ls[..n].fill(0);
        return 0.;
    }
    let level = |iscale: f32, x: f32| nearest_int(iscale * x).clamp(-nmax, nmax - 1);
    let iscale = -(nmax as f32) / max;
    if rmse_type == 0 {
        for i in 0..n {
            ls[i] = (nmax + level(iscale, x[i])) as i8;
        }
        return 1.0 / iscale;
    }
    let weight = |x: f32| if rmse_type % 2 == 1 { x * x } else { 1.0 };
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for i in 0..n {
        let l = level(iscale, x[i]);
        ls[i] = (l + nmax) as i8;
        let (w, l) = (weight(x[i]), l as f32);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    let mut scale = sumlx / suml2;
    let mut best = scale * sumlx;
    for _ in 0..3 {
        let iscale = 1.0 / scale;
        let (mut slx, mut sl2, mut changed) = (0f32, 0f32, false);
        for i in 0..n {
            let l = level(iscale, x[i]);
            if l + nmax != ls[i] as i32 {
                changed = true;
            }
            let (w, l) = (weight(x[i]), l as f32);
            slx += w * x[i] * l;
            sl2 += w * l * l;
        }
        if !changed || sl2 == 0.0 || slx * slx <= best * sl2 {
            break;
        }
        for i in 0..n {
            ls[i] = (nmax + level(iscale, x[i])) as i8;
        }
        (sumlx, suml2) = (slx, sl2);
        scale = sumlx / suml2;
        best = scale * sumlx;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = weight(x[i]);
            let l = ls[i] as i32 - nmax;
            let mut slx = sumlx - w * x[i] * l as f32;
            if slx > 0. {
                let mut sl2 = suml2 - w * l as f32 * l as f32;
                let new_l = nearest_int(x[i] * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != l {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0. && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        ls[i] = (nmax + new_l) as i8;
                        (sumlx, suml2) = (slx, sl2);
                        scale = sumlx / suml2;
                        best = scale * sumlx;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    if rmse_type < 3 {
        return scale;
    }
    for is in (-4..4).filter(|&is| is != 0) {
        let iscale = -(nmax as f32 + 0.1f32 * is as f32) / max;
        let (mut sumlx, mut suml2) = (0f32, 0f32);
        for i in 0..n {
            let (w, l) = (weight(x[i]), level(iscale, x[i]) as f32);
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if suml2 > 0. && sumlx * sumlx > best * suml2 {
            for i in 0..n {
                ls[i] = (nmax + level(iscale, x[i])) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `(scale, min)` of an asymmetric quantization of `x` into `0..=nmax`, refined over
/// `ntry` rounds (GGML's `make_qkx1_quants`).
pub(super) fn make_qkx1_quants(nmax: i32, ntry: usize, x: &[f32]) -> (f32, f32) {
    let n = x.len();
    let mut l = vec![0u8; n];
    let min = *x.iter().min_by(|a, b| a.total_cmp(b)).unwrap_or(&x[0]);
    let max = *x.iter().max_by(|a, b| a.total_cmp(b)).unwrap_or(&x[0]);
    if max == min {
        return (0.0, 0.0);
    }
    let mut min = min.min(0.);
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    for _ in 0..ntry {
        let mut sumlx = 0.0;
        let mut suml2 = 0;
        let mut did_change = false;
        for (i, value) in x.iter().enumerate() {
            let li = nearest_int(iscale * (value - min)).clamp(0, nmax);
            if li as u8 != l[i] {
                l[i] = li as u8;
                did_change = true;
            }
            sumlx += (value - min) * li as f32;
            suml2 += li * li;
        }
        scale = sumlx / suml2 as f32;
        let sum: f32 = x.iter().zip(&l).map(|(xi, &li)| xi - scale * li as f32).sum();
        min = sum / n as f32;
        if min > 0.0 {
            min = 0.0;
        }
        iscale = 1.0 / scale;
        if !did_change {
            break;
        }
    }
    (scale, -min)
}

/// The scale of a symmetric quantization of `x` into `-nmax..nmax`, refined by weighted
/// least squares with `do_rmse` (GGML's `make_q3_quants`; the levels are not kept).
pub(super) fn make_q3_quants(x: &[f32], nmax: i32, do_rmse: bool) -> f32 {
    let n = x.len();
    let mut l = vec![0i8; n];
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &xi in x {
        if xi.abs() > amax {
            amax = xi.abs();
            max = xi;
        }
    }
    if amax == 0.0 {
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    if !do_rmse {
        return 1.0 / iscale;
    }
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let li = ((iscale * x[i]).round() as i32).clamp(-nmax, nmax - 1);
        l[i] = li as i8;
        let w = x[i] * x[i];
        sumlx += w * x[i] * li as f32;
        suml2 += w * (li * li) as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = x[i] * x[i];
            let mut slx = sumlx - w * x[i] * l[i] as f32;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * (l[i] as i32 * l[i] as i32) as f32;
                let new_l = ((x[i] * sl2 / slx).round() as i32).clamp(-nmax, nmax - 1);
                if new_l != l[i] as i32 {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * (new_l * new_l) as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l as i8;
                        (sumlx, suml2) = (slx, sl2);
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    sumlx / suml2
}
