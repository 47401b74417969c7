"""The LSTMP of K stacked workers as one computation (emasr.nnet.workers.StackedWorkers).

K copies of emasr.nnet.models.LSTMP (nn.LSTM with proj_size, then a Linear) with their parameters
stacked along a new first dimension [K, ...]: each layer is one autograd Function whose every
matmul is a batched matmul over the K workers, so a time step is a handful of operations for all
K instead of one nn.LSTM step per worker. Its backward is written out: the recurrence goes back
step by step (two small matmuls a step, as the forward), and the weight gradients are each one
batched matmul over all of a minibatch's time steps afterwards, where nn.LSTM's autograd computes
two small weight-gradient matmuls a step and adds them up. The output layer runs on the chunk's
trained frames only (nn.LSTM's model runs it on the context frames too and drops them).

The same equations as nn.LSTM with projections (gates i, f, g, o; c = f c' + i g;
h = W_hr (o tanh c)), to float rounding: tests/test_lstmp.py compares outputs and gradients with
nn.LSTM's for one worker and for K.
"""
from __future__ import annotations

import torch
from torch.ops import aten

WEIGHTS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")


def swap_gates(w: torch.Tensor) -> torch.Tensor:
    """Gate rows (dim 1) i, f, g, o <-> i, f, o, g (its own inverse): nn.LSTM's order and the one
    computed here, where the three sigmoid gates sit side by side (one operation each way)."""
    i_f, g, o = w.tensor_split(torch.tensor([w.shape[1] // 2, 3 * w.shape[1] // 4]), dim=1)
    return torch.cat([i_f, o, g], dim=1)


class StackedLstmpLayer(torch.autograd.Function):
    """One LSTMP layer of K workers over a minibatch of chunks, from zero initial states:
    x [K, T, B, I] (each worker's chunks, time-major), nn.LSTM's w_ih [K, 4H, I],
    w_hh [K, 4H, P], b_ih and b_hh [K, 4H], w_hr [K, P, H] -> h [K, T, B, P]. Inside, a step's
    tensors are [K, B, ...] blocks of buffers [T, K, B, ...], contiguous, as a batched matmul
    needs to run as one (its output strided, it runs worker by worker)."""

    @staticmethod
    def forward(ctx, x, w_ih, w_hh, b_ih, b_hh, w_hr):
        k, steps, batch, _ = x.shape
        proj, hidden = w_hr.shape[1:]
        w_ih, w_hh, bias = swap_gates(w_ih), swap_gates(w_hh), swap_gates(b_ih + b_hh)
        # every step's input projection at once; each step adds its recurrence into acts[t]
        gx = torch.baddbmm(bias.unsqueeze(1), x.reshape(k, steps * batch, -1),
                           w_ih.transpose(1, 2)).view(k, steps, batch, -1)
        acts = x.new_empty(steps, k, batch, 4 * hidden)   # the gates, activated
        hs = x.new_zeros(steps + 1, k, batch, proj)       # hs[0]: the initial state
        cs = x.new_zeros(steps + 1, k, batch, hidden)
        tcs, rs = x.new_empty(steps, k, batch, hidden), x.new_empty(steps, k, batch, hidden)
        w_hh_t, w_hr_t = w_hh.transpose(1, 2), w_hr.transpose(1, 2)
        # every step's views made at once (a view made per step costs more than its operation)
        a_t, sig_t = acts.unbind(0), acts[..., :3 * hidden].unbind(0)
        i_t, f_t, o_t, g_t = (gate.unbind(0) for gate in acts.split(hidden, dim=-1))
        h_t, c_t, tc_t, r_t = hs.unbind(0), cs.unbind(0), tcs.unbind(0), rs.unbind(0)
        for t, projected in enumerate(gx.unbind(1)):
            torch.baddbmm(projected, h_t[t], w_hh_t, out=a_t[t])
            sig_t[t].sigmoid_()
            g_t[t].tanh_()
            torch.mul(f_t[t], c_t[t], out=c_t[t + 1]).addcmul_(i_t[t], g_t[t])
            torch.mul(o_t[t], torch.tanh(c_t[t + 1], out=tc_t[t]), out=r_t[t])
            torch.bmm(r_t[t], w_hr_t, out=h_t[t + 1])
        ctx.save_for_backward(x, w_ih, w_hh, w_hr, acts, hs, cs, tcs, rs)
        return hs[1:].transpose(0, 1)

    @staticmethod
    def backward(ctx, grad):
        x, w_ih, w_hh, w_hr, acts, hs, cs, tcs, rs = ctx.saved_tensors
        steps, k, batch, gates = acts.shape
        hidden = gates // 4
        dh = torch.empty_like(hs[1:])     # dL/dh of each step, the recurrence's share included
        dh[-1] = grad[:, -1]
        dpre = torch.empty_like(acts)     # dL/d(the gates' pre-activations)
        post = acts.new_empty(k, batch, gates)   # dL/d(the activated gates), of one step
        d_i, d_f, d_o, d_g = post.split(hidden, dim=-1)
        dc, dr = x.new_zeros(k, batch, hidden), x.new_empty(k, batch, hidden)
        sig_t, tc_t, c_t = acts[..., :3 * hidden].unbind(0), tcs.unbind(0), cs.unbind(0)
        i_t, f_t, o_t, g_t = (gate.unbind(0) for gate in acts.split(hidden, dim=-1))
        dh_t, grad_t, dpre_t = dh.unbind(0), grad.unbind(1), dpre.unbind(0)
        dsig_t, dg_t = dpre[..., :3 * hidden].unbind(0), dpre[..., 3 * hidden:].unbind(0)
        for t in range(steps - 1, -1, -1):
            torch.bmm(dh_t[t], w_hr, out=dr)
            torch.mul(dr, tc_t[t], out=d_o)
            dc.add_(aten.tanh_backward(dr.mul_(o_t[t]), tc_t[t]))
            torch.mul(dc, g_t[t], out=d_i)
            torch.mul(dc, c_t[t], out=d_f)
            torch.mul(dc, i_t[t], out=d_g)
            dc.mul_(f_t[t])
            aten.sigmoid_backward.grad_input(post[..., :3 * hidden], sig_t[t],
                                             grad_input=dsig_t[t])
            aten.tanh_backward.grad_input(d_g, g_t[t], grad_input=dg_t[t])
            if t > 0:   # h_{t-1}'s gradient: from the output above and through W_hh
                torch.baddbmm(grad_t[t - 1], dpre_t[t], w_hh, out=dh_t[t - 1])
        # the weight gradients over all steps at once, each worker's rows (t, b) together

        def rows(buffer):
            return buffer.transpose(0, 1).reshape(k, steps * batch, -1)

        flat = rows(dpre)
        dx = torch.bmm(flat, w_ih).view_as(x) if ctx.needs_input_grad[0] else None
        flat_t = flat.transpose(1, 2)
        dbias = swap_gates(flat.sum(1))
        return (dx, swap_gates(torch.bmm(flat_t, x.reshape(k, steps * batch, -1))),
                swap_gates(torch.bmm(flat_t, rows(hs[:-1]))), dbias, dbias.clone(),
                torch.bmm(rows(dh).transpose(1, 2), rows(rs)))


def forward(params: dict, x: torch.Tensor, layers: int, start: int, frames: int) -> torch.Tensor:
    """K LSTMPs (params: stacked [K, ...] tensors by emasr.nnet.models.LSTMP's parameter names)
    on chunks x [K, B, T, D] -> log-posteriors [K, frames * B, P] of time steps start ..
    start + frames - 1, time-major (labels: labels_of)."""
    h = x.transpose(1, 2)
    for n in range(layers):
        h = StackedLstmpLayer.apply(h, *(params[f"lstm.{name}_l{n}"] for name in WEIGHTS))
    k, _, batch, proj = h.shape
    trained = h[:, start:start + frames].reshape(k, frames * batch, proj)
    logits = torch.baddbmm(params["output.bias"].unsqueeze(1), trained,
                           params["output.weight"].transpose(1, 2))
    return torch.log_softmax(logits, dim=-1)


def labels_of(y: torch.Tensor) -> torch.Tensor:
    """Chunk labels [K, B, C] in forward's row order (time-major): [K, C * B]."""
    return y.transpose(1, 2).reshape(y.shape[0], -1)
