"""Reference for mixed_precision.msh: Adam on an f16 MLP with f32 master weights and
dynamic loss scaling, computed in float64. A step overflows in f16 when the largest
backward value (the loss's cotangent, the hidden cotangents, the weight gradients) times
the scale reaches f16's largest finite value, 65504; the data are chosen so that no step's
decision is within 10% of that threshold (asserted), so f16 rounding cannot flip one.
The program splits the hidden dim (Megatron), not the batch: every f16 value of the
backward pass is then computed whole on one device on every mesh (a batch split would
round each device's partial weight gradient to f16 before the sum, and overflow at
another scale than one device does)."""
import numpy as np
from e2e_lib import F32

F16_MAX = 65504.0


def inputs():
    rng = np.random.default_rng(12)
    x = rng.normal(size=(32, 16))
    y = rng.normal(size=(32, 8))
    w1 = rng.normal(size=(16, 32)) * 0.3
    w2 = rng.normal(size=(32, 8)) * 0.3
    return {"x.npy": x.astype(np.float32), "y.npy": y.astype(np.float32),
            "w1.npy": w1.astype(np.float32), "w2.npy": w2.astype(np.float32)}


def expected(inp):
    x, y, w1, w2 = (inp[k].astype(np.float64) for k in ("x.npy", "y.npy", "w1.npy", "w2.npy"))
    m1, v1, m2, v2 = (np.zeros_like(w) for w in (w1, w1, w2, w2))
    b1t = b2t = 1.0
    scale, good, lines = 2.0 ** 20, 0, []
    for step in range(12):
        a = x @ w1
        t = np.tanh(a)
        d = t @ w2 - y
        loss = (d * d).mean()
        dout = 2 * d / d.size
        g2 = t.T @ dout
        dh = dout @ w2.T
        g1 = x.T @ (dh * (1 - t * t))
        peak = max(abs(v).max() for v in (dout, g2, dh, g1)) * scale
        assert abs(peak / F16_MAX - 1) > 0.1, "step %d: %g is too close to f16's limit" % (step, peak)
        ok = peak < F16_MAX
        lines.append(["step", step, "loss", F32(loss, rtol=2e-2), "scale", scale, "finite", "true" if ok else "false"])
        if ok:
            b1t, b2t = b1t * 0.9, b2t * 0.999
            new = []
            for w, g, m, v in ((w1, g1, m1, v1), (w2, g2, m2, v2)):
                m[:] = 0.9 * m + 0.1 * g
                v[:] = 0.999 * v + 0.001 * g * g
                new.append(w - 0.01 * (m / (1 - b1t)) / (np.sqrt(v / (1 - b2t)) + 1e-8))
            w1, w2 = new
            good += 1
            if good == 3:
                scale, good = scale * 2, 0
        else:
            scale, good = scale * 0.5, 0
    # f16 gradients: Adam's normalised steps agree to about f16's precision.
    return {"w1_out.npy": F32(w1, rtol=0, atol=3e-3), "w2_out.npy": F32(w2, rtol=0, atol=3e-3), "stdout": lines}
