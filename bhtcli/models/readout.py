"""From the two models' scores to the (c, delta) form every divergence is computed from
(docs/maths.md §7.1).

Model A answers i with probability proportional to f_A(s_i), s = A x + bias_a (likewise B).
With u = phi_A(s_A), v = phi_B(s_B) (phi = log f, see links.py) the divergences need only

    c = (u + v) / 2,    delta = u - v            (divergences.py, Tilt)

The scores enter through m = ((A+B)/2) x and D = (A-B) x (one product with the stacked
matrix, softmax.py): s_A = m + D/2 + bias_a, s_B = m - D/2 + bias_b. delta is computed so that
nearly equal models do not cancel: from D directly for exp links, from D and a divided
difference for equal poly or taylor links, from D and C sinh(D/C)/(cosh cosh) for equal
softcap links, and as psi_A(s_A) - psi_B(s_B) + (s_A - s_B) for
mixed links (psi = phi - s, links.py).
"""
from __future__ import annotations

from bhtcli.errors import parameter_name

from dataclasses import dataclass

import numpy as np

from bhtcli.models.links import EXP, LOG_FLOOR, Link, taylor_difference, log_taylor


@dataclass(frozen=True)
class Readout:
    """A link and an optional bias (length n) for each model. Default: plain softmax."""

    link_a: Link = EXP
    link_b: Link = EXP
    bias_a: np.ndarray | None = None
    bias_b: np.ndarray | None = None

    @property
    def exp_links(self) -> bool:
        """Both links exp: c and delta are affine in x (rows may be centred)."""
        return self.link_a.is_exp and self.link_b.is_exp

    @property
    def plain(self) -> bool:
        """Plain softmax vs softmax, no bias."""
        return self.exp_links and self.bias_a is None and self.bias_b is None

    @property
    def description(self) -> dict:
        return {"link_a": self.link_a.name, "link_b": self.link_b.name,
                "bias_a": self.bias_a is not None, "bias_b": self.bias_b is not None}

    def bias_offsets(self, n: int):
        """(mean of the biases, their difference) as (n,) vectors."""
        ba = np.zeros(n) if self.bias_a is None else np.asarray(self.bias_a, dtype=np.float64)
        bb = np.zeros(n) if self.bias_b is None else np.asarray(self.bias_b, dtype=np.float64)
        return 0.5 * (ba + bb), ba - bb

    # --- forward and backward --------------------------------------------------------------
    def forward(self, m: np.ndarray, D: np.ndarray):
        """(c, delta, jac) from m = ((A+B)/2) x and D = (A-B) x, (n,) or (n, k).

        jac = (phi_A'(s_A), phi_B'(s_B)) for :meth:`backward` (None for exp links).
        """
        m = np.asarray(m, dtype=np.float64)
        D = np.asarray(D, dtype=np.float64)
        mb, db = self.bias_offsets(m.shape[0])
        if m.ndim == 2:
            mb, db = mb[:, None], db[:, None]
        if self.bias_a is not None or self.bias_b is not None:
            m, D = m + mb, D + db
        if self.exp_links:
            return m, D, None
        sa, sb = m + 0.5 * D, m - 0.5 * D
        a, b = floored(self.link_a, sa), floored(self.link_b, sb)
        return 0.5 * (a[0] + b[0]), self.difference(sa, sb, D, a, b), (a[1], b[1])

    def difference(self, sa, sb, D, a, b):
        """delta = u - v from the scores sa, sb (biases added) and D = sa - sb, where a and b
        are the models' :func:`floored` (u, phi', floored mask): without cancellation where
        the links allow it (:meth:`_difference`), u - v where either is floored or the close
        form is not finite. Exp links: D itself."""
        if self.exp_links:
            return D
        delta = self._difference(sa, sb, D)
        rough = a[2] | b[2] | ~np.isfinite(delta)
        return np.where(rough, a[0] - b[0], delta)

    @staticmethod
    def backward(w_c: np.ndarray, w_g: np.ndarray, jac):
        """Gradient weights on (m, D) from those on (c, delta): grad = C^T w_m + G^T w_D."""
        if jac is None:
            return w_c, w_g
        ja, jb = jac
        gu = ja * (0.5 * w_c + w_g)
        gv = jb * (0.5 * w_c - w_g)
        return gu + gv, 0.5 * (gu - gv)

    def _difference(self, sa, sb, ds):
        """phi_A(sa) - phi_B(sb), accurate when sa ~ sb."""
        la, lb = self.link_a, self.link_b
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if la == lb and la.kind == "poly":
                r = ds / sb
                one_plus = np.abs(1.0 + r)
                return la.degree * np.where(r > -0.5, np.log1p(r), np.log(one_plus))
            if la == lb and la.kind == "taylor":
                K = la.degree
                ok = (np.abs(sa) <= 700.0) & (np.abs(sb) <= 700.0)
                sa_, sb_, ds_ = (np.where(ok, z, 0.0) for z in (sa, sb, ds))
                ratio = taylor_difference(sa_, sb_, ds_, K) * np.exp(-log_taylor(sb_, K))
                return _where_ok(ok, np.log1p(ratio), lambda: la.log_weight(sa) - lb.log_weight(sb))
            if la == lb and la.kind == "softcap":
                # C (tanh a - tanh b) = C sinh(a - b) / (cosh a cosh b), a = sa/C, b = sb/C
                C = la.cap
                a, b = sa / C, sb / C
                ok = (np.abs(a) <= 300.0) & (np.abs(b) <= 300.0)
                a_, b_ = np.where(ok, a, 0.0), np.where(ok, b, 0.0)
                close = C * np.sinh(np.where(ok, ds, 0.0) / C) / (np.cosh(a_) * np.cosh(b_))
                return _where_ok(ok, close, lambda: la.log_weight(sa) - lb.log_weight(sb))
            return la.psi(sa) - lb.psi(sb) + ds

    def log_weights(self, s: np.ndarray, model: str = "A") -> np.ndarray:
        """Floored log-weights of one model from its raw scores A x (bias added here)."""
        link, bias = (self.link_a, self.bias_a) if model == "A" else (self.link_b, self.bias_b)
        s = np.asarray(s, dtype=np.float64)
        if bias is not None:
            s = s + (bias if s.ndim == 1 else bias[:, None])
        return floored(link, s)[0]


def _where_ok(ok: np.ndarray, close: np.ndarray, fallback) -> np.ndarray:
    """close where ok, else fallback() (computed only when some entry is not ok: the links'
    plain difference, two more link evaluations per entry)."""
    return close if ok.all() else np.where(ok, close, fallback())


def make_readout(n: int, link_a="exp", link_b="exp", bias_a=None, bias_b=None) -> Readout:
    """Parse links ("exp", "poly:K", "taylor:K", "softcap:C") and load biases (paths or arrays, length n)."""
    from bhtcli.io.load import load_vector
    from bhtcli.models.links import parse_link
    la, lb = parse_link(link_a, f"{parameter_name('link_a')}"), parse_link(link_b, f"{parameter_name('link_b')}")
    va = None if bias_a is None else load_vector(bias_a, n, f"{parameter_name('bias_a')}")
    vb = None if bias_b is None else load_vector(bias_b, n, f"{parameter_name('bias_b')}")
    return Readout(la, lb, va, vb)


def floored(link: Link, s: np.ndarray):
    """(phi(s) floored at max - LOG_FLOOR per column, phi'(s) (0 where floored), floored mask).
    A column whose weights are all 0 (poly at s = 0) becomes uniform: phi = 0."""
    u = raw = link.log_weight(s)
    if link.is_exp:
        return u, np.ones_like(u), np.zeros(u.shape, dtype=bool)
    top = np.max(u, axis=0)
    dead = ~np.isfinite(top)                     # every weight is 0 in this column
    top = np.where(dead, 0.0, top)
    floor = top - LOG_FLOOR
    low = u < floor
    u = np.where(low, floor, u)
    if np.any(dead):
        u = np.where(dead, 0.0, u)
        low = low & ~dead
    jac = np.where(low, 0.0, link.dlog_weight(s, raw))
    return u, jac, low | (dead & np.ones_like(low))
