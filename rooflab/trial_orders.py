"""The order in which a case's implementations are timed, trial after trial.

A kernel's time in a trial depends on the kernel timed just before it, not on its place: on an
H100 at softmax 16384x1024 fp32 the two implementations timed right after seed_multipass (four
launches and a zero fill, 161 us a call) ran at 1.054x and 1.056x their own medians, the third at
1.023x, the in-trial copy among them (probes/trial_order.py, 60 trials; place moved medians by
0.999-1.002x). Fresh shuffles let one implementation follow the same one in up to three of six
trials, and a row pools its trials' calls, so that after-effect could move a row by 5%.

`balanced_orders` builds each trial place by place from a seeded shuffle, taking next the
implementation least often seen right after the last one (then two places after the one before
it) in the trials so far, and keeps the least repeating of `candidates` such orders. The trials
are one sequence: a trial's first implementation follows the last one of the trial before. With
eleven implementations and six trials no implementation follows the same one twice.
"""
from __future__ import annotations

import random

DISTANCES = (1, 2)     # after-effects counted: right after, and one implementation in between


def follows(sequence: list) -> dict:
    """{(implementation, the one `distance` places before it, distance): times} over one sequence."""
    seen: dict = {}
    for distance in DISTANCES:
        for i in range(distance, len(sequence)):
            key = (sequence[i], sequence[i - distance], distance)
            seen[key] = seen.get(key, 0) + 1
    return seen


def repeats(orders: list[list]) -> tuple[int, ...]:
    """How many times, per distance, an implementation follows one it followed before (trials as one sequence)."""
    counts = follows([impl for order in orders for impl in order])
    return tuple(sum(n - 1 for (_, _, d), n in counts.items() if d == distance) for distance in DISTANCES)


def _added(order: list, tail: list, seen: dict) -> tuple[int, ...]:
    """Repeats `order` adds, per distance, after a sequence ending in `tail` with counts `seen`."""
    full = tail + order
    return tuple(sum(seen.get((full[i], full[i - d], d), 0) for i in range(max(len(tail), d), len(full)))
                 for d in DISTANCES)


def _build(impls: list, tail: list, seen: dict, rng: random.Random) -> list:
    """One order, each next implementation the least repeated after what precedes it (`tail`:
    the end of the trial before)."""
    left = list(impls)
    rng.shuffle(left)
    order: list = []
    while left:
        before = (tail + order)[-2:]

        def cost(impl):
            return tuple(seen.get((impl, before[-d], d), 0) if len(before) >= d else 0 for d in DISTANCES)
        nxt = min(left, key=cost)          # ties go to the shuffle's order
        left.remove(nxt)
        order.append(nxt)
    return order


def balanced_orders(impls, trials: int, seed: str, candidates: int = 16) -> list[list]:
    """`trials` orders of `impls` (each a permutation), seeded by `seed`, with the fewest
    repeated predecessors (`repeats`) that the greedy choice among `candidates` finds."""
    impls = list(impls)
    sequence: list = []
    orders: list[list] = []
    for trial in range(trials):
        rng = random.Random(f"{seed}|{trial}")
        seen, tail = follows(sequence), sequence[-2:]
        options = [_build(impls, tail, seen, rng) for _ in range(candidates)]
        orders.append(min(options, key=lambda order: _added(order, tail, seen)))
        sequence += orders[-1]
    return orders


def shuffled_orders(impls, trials: int, seed: str) -> list[list]:
    """A fresh seeded shuffle a trial: the orders the sweep used before balanced_orders, kept to
    compare against (probes/trial_order.py ORDER=shuffled)."""
    orders = []
    for trial in range(trials):
        order = list(impls)
        random.Random(f"{seed}|{trial}").shuffle(order)
        orders.append(order)
    return orders
