"""RateLimiter: Reverb samples-per-insert semantics, validation, blocking with timeouts."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchrl_dreamer.collectors import RateLimiter, RateLimiterClosed, RateLimiterTimeout


class TestSemantics:
    def test_min_size_gate(self):
        rl = RateLimiter(1.0, min_size_to_sample=3, error_buffer=5.0)
        for _ in range(2):
            rl.insert()
            assert not rl.can_sample()
        rl.insert()
        assert rl.can_sample()

    def test_reverb_formulas(self):
        # spi=2, min_size=2, error 3 -> diff range [1, 7]
        rl = RateLimiter(2.0, 2, 3.0)
        assert (rl.min_diff, rl.max_diff) == (1.0, 7.0)
        rl.insert(2)  # size+n <= min_size: always allowed
        # 2*2 - 0 - n >= 1  <=> n <= 3
        assert rl.can_sample(3) and not rl.can_sample(4)
        rl.sample(3, timeout=0)
        assert not rl.can_sample(1)
        # insert 1 more: (3)*2 - 3 = 3 <= 7 ok; (2+3)*2 - 3 = 7 ok; (2+4)*2-3 = 9 > 7 blocked
        assert rl.can_insert(3) and not rl.can_insert(4)

    def test_tuple_error_buffer_used_as_is(self):
        rl = RateLimiter(0.5, 4, (-3.0, 10.0))
        assert (rl.min_diff, rl.max_diff) == (-3.0, 10.0)

    def test_queue_is_atropos_rule(self):
        """Pause (cannot insert) while queued > tolerance × batch."""
        rl = RateLimiter.queue(max_queued=6)
        rl.force_insert(7)
        assert rl.queued == 7 and not rl.can_insert(0)
        rl.sample(1, timeout=0)
        assert rl.queued == 6 and rl.can_insert(0)
        assert not rl.can_insert(1)

    @settings(max_examples=50, deadline=None)
    @given(
        spi=st.sampled_from([0.25, 0.5, 1.0, 2.0, 8.0]),
        min_size=st.integers(1, 20),
        eb=st.floats(2.0, 50.0),
        ops=st.lists(st.booleans(), min_size=1, max_size=200),
    )
    def test_invariant_under_random_ops(self, spi, min_size, eb, ops):
        """Whatever is allowed keeps samples within the diff range once past min_size."""
        eb = max(eb, 2 * max(1.0, spi))
        rl = RateLimiter(spi, min_size, eb)
        for do_insert in ops:
            if do_insert and rl.can_insert(1):
                rl.insert(1, timeout=0)
            elif not do_insert and rl.can_sample(1):
                rl.sample(1, timeout=0)
            if rl.samples > 0:
                assert rl.inserts * spi - rl.samples >= rl.min_diff
            if rl.size > min_size:
                assert rl.inserts * spi - rl.samples <= rl.max_diff
        # No deadlock: from any reachable state one side can always move.
        assert rl.can_insert(1) or rl.can_sample(1)


class TestValidation:
    def test_narrow_range(self):
        with pytest.raises(ValueError, match="narrower"):
            RateLimiter(4.0, 10, 3.0)  # range 6 < 2*4

    def test_guaranteed_deadlock(self):
        with pytest.raises(ValueError, match="deadlock"):
            RateLimiter(1.0, 2, (3.0, 10.0))

    def test_warns_when_needs_concurrency(self):
        with pytest.warns(UserWarning, match="concurrently"):
            RateLimiter(1.0, 10, (0.0, 5.0))

    @pytest.mark.parametrize(
        "args, match",
        [((0.0, 1, 2.0), "samples_per_insert"), ((1.0, 0, 2.0), "min_size_to_sample"),
         ((1.0, 1, -1.0), "error_buffer"), ((1.0, 1, (1.0,)), "error_buffer")],
    )
    def test_bad_args(self, args, match):
        with pytest.raises(ValueError, match=match):
            RateLimiter(*args)


class TestBlocking:
    def test_sample_times_out_when_starved(self):
        rl = RateLimiter(1.0, 2, 4.0)
        with pytest.raises(RateLimiterTimeout, match="sample"):
            rl.sample(1, timeout=0.05)
        assert rl.samples == 0

    def test_insert_times_out_when_learner_lags(self):
        rl = RateLimiter.queue(2)
        rl.insert(2, timeout=0)
        with pytest.raises(RateLimiterTimeout, match="insert"):
            rl.insert(1, timeout=0.05)

    def test_sample_unblocked_by_insert_from_other_thread(self):
        rl = RateLimiter(1.0, 1, 4.0)
        done = threading.Event()

        def learner():
            rl.sample(1, timeout=10)
            done.set()

        th = threading.Thread(target=learner)
        th.start()
        assert not done.wait(0.05)  # still starved
        rl.insert(1)
        th.join(10)
        assert done.is_set() and rl.samples == 1

    def test_close_wakes_waiters(self):
        rl = RateLimiter(1.0, 5, 6.0)
        errors = []

        def learner():
            try:
                rl.await_sample(1, timeout=10)
            except RateLimiterClosed as e:
                errors.append(e)

        th = threading.Thread(target=learner)
        th.start()
        rl.close()
        th.join(10)
        assert len(errors) == 1

    def test_two_threads_keep_ratio(self):
        """Producer and consumer at full speed: achieved ratio tracks spi within the buffer."""
        spi, n = 0.5, 2000
        rl = RateLimiter(spi, 10, 4.0)

        def producer():
            for _ in range(n):
                rl.insert(1, timeout=10)

        def consumer():
            for _ in range(int((n - 10) * spi) - 4):
                rl.sample(1, timeout=10)

        ts = [threading.Thread(target=producer), threading.Thread(target=consumer)]
        [t.start() for t in ts]
        [t.join(30) for t in ts]
        assert rl.inserts == n
        assert abs(rl.samples - (n - 10) * spi) <= 4 + 1

    def test_state_dict(self):
        rl = RateLimiter(2.0, 2, 4.0)
        rl.insert(3)
        rl.sample(2)
        sd = rl.state_dict()
        rl2 = RateLimiter(1.0, 1, 3.0)
        rl2.load_state_dict(sd)
        assert rl2.state_dict() == sd
        assert rl2.can_sample(1) == rl.can_sample(1)
