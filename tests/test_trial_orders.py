"""The trials' orders: permutations, reproducible from their seed, and balanced against the
after-effect of the implementation timed before."""
import pytest

from rooflab.trial_orders import balanced_orders, follows, repeats, shuffled_orders

IMPLS = [f"impl{i}" for i in range(11)]     # the softmax sweep's count


@pytest.mark.parametrize("n, trials", [(0, 6), (1, 6), (2, 6), (3, 1), (5, 6), (11, 6), (13, 9)])
def test_every_trial_is_a_permutation(n, trials):
    impls = IMPLS[:n] if n <= 11 else [f"k{i}" for i in range(n)]
    orders = balanced_orders(impls, trials, "s")
    assert len(orders) == trials
    assert all(sorted(order) == sorted(impls) for order in orders)


def test_the_seed_fixes_the_orders_and_another_seed_changes_them():
    assert balanced_orders(IMPLS, 6, "a") == balanced_orders(IMPLS, 6, "a")
    assert balanced_orders(IMPLS, 6, "a") != balanced_orders(IMPLS, 6, "b")
    assert len({tuple(o) for o in balanced_orders(IMPLS, 6, "a")}) == 6


@pytest.mark.parametrize("seed", [f"0|{{'rows': {r}, 'cols': 1024}}|float32|0" for r in (1, 7, 4096, 16384)])
def test_no_implementation_follows_the_same_one_twice_in_six_trials_of_eleven(seed):
    """Across trial boundaries too: a trial's first implementation follows the last one before it."""
    orders = balanced_orders(IMPLS, 6, seed)
    sequence = [impl for order in orders for impl in order]
    assert max(n for (_, _, d), n in follows(sequence).items() if d == 1) == 1
    assert repeats(orders)[0] == 0


def test_balanced_orders_repeat_predecessors_far_less_than_shuffles():
    for n in (4, 6, 8, 11):
        impls = IMPLS[:n]
        balanced = [repeats(balanced_orders(impls, 6, f"s{s}")) for s in range(20)]
        shuffled = [repeats(shuffled_orders(impls, 6, f"s{s}")) for s in range(20)]
        assert sum(b[0] for b in balanced) < 0.8 * sum(s[0] for s in shuffled), n
        assert max(b[0] for b in balanced) <= min(s[0] for s in shuffled) + 1, n


def test_follows_counts_each_distance():
    counts = follows(["a", "b", "a", "b"])
    assert counts == {("b", "a", 1): 2, ("a", "b", 1): 1, ("a", "a", 2): 1, ("b", "b", 2): 1}
    assert repeats([["a", "b"], ["a", "b"]]) == (1, 0)        # b after a twice; nothing twice two back
    assert repeats([["a", "b", "c"], ["a", "b", "c"]]) == (2, 1)
