"""The launch counter of benchmarks/learner.py (the learner's launch goal is read from it)."""

from __future__ import annotations

import torch
from conftest import load_benchmark


def _bench():
    return load_benchmark("learner")


def test_count_launches_counts_kernels_not_views_allocations_or_wrappers():
    bench = _bench()
    w, b = torch.randn(4, 3), torch.randn(4)

    def update(x):
        y = torch.nn.functional.linear(x, w, b)  # linear -> t (view) + addmm: 1 kernel
        y = y.view(-1).unsqueeze(0).to(torch.float32)  # views and a no-op conversion: none
        z = torch.cat([y, y], 0)  # allocates inside: still 1
        return z.softmax(-1).sum()  # 2

    assert bench.count_launches(update, torch.randn(5, 3)) == 4
    assert bench.count_ops(update, torch.randn(5, 3))[1] >= 4


def test_count_launches_sees_the_kernels_of_compiled_code():
    import torch._inductor.config as inductor_config

    bench = _bench()
    # restored after: inductor_config.patch, not monkeypatch, whose undo (pytest 9.2) deletes
    # the option from torch's config proxy, so that every later compile fails on it
    with inductor_config.patch({"cpp.enable_kernel_profile": False}):
        bench._trace_compiled_kernels()

        def body(x):
            return (torch.sigmoid(x) * x + 1.0).tanh().sum(-1)

        compiled = torch.compile(body, dynamic=False)
        x = torch.randn(8, 16)
        torch.testing.assert_close(compiled(x), body(x))
        eager, fused = bench.count_launches(body, x), bench.count_launches(compiled, x)
        assert eager == 5  # sigmoid, mul, add, tanh, sum
        assert 1 <= fused < eager  # the compiler's fused kernel(s), each counted
