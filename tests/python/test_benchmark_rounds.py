"""The many-tables benchmark changes the tables its rounds say they change.

Its 5-of-50 figure is the median of three warm rounds of the long-lived driver, each of another
5 tables (benchmarks/many_tables.py, LONG_LIVED_ROUNDS). A round that changed fewer tables, or the
same ones as the round before, would pass for a faster driver: with the first chooser a phase
whose offset lay past the last table of a small folder changed none, and its 0.02-second no-op
run entered the median.
"""

from __future__ import annotations

import itertools

import pytest

from benchmarks.many_tables import LONG_LIVED_ROUNDS, PHASES, WARM_PHASES, chosen_tables


def test_fifty_tables_every_phase_changes_five_others() -> None:
    sets = {phase: [name for name, _ in chosen_tables(50, 5, phase)] for phase in PHASES}
    assert all(len(names) == 5 for names in sets.values()), sets
    for (a, first), (b, second) in itertools.combinations(sets.items(), 2):
        assert not set(first) & set(second), (a, b, first, second)
    # Spread over the six shapes (the suffix letter), not five tables of one kind.
    assert all(len({name[-1] for name in names}) >= 3 for names in sets.values()), sets


@pytest.mark.parametrize(("count", "changed"), [(5, 5), (20, 5), (12, 5), (3, 5), (50, 1)])
def test_no_phase_changes_fewer_tables_than_asked(count: int, changed: int) -> None:
    for phase in PHASES:
        names = [name for name, _ in chosen_tables(count, changed, phase)]
        assert len(names) == len(set(names)) == min(changed, count), (phase, names)


def test_the_driver_rounds_use_known_phases() -> None:
    phases = [phase for _, phase in LONG_LIVED_ROUNDS if phase not in (None, "1k-events")]
    assert set(phases) <= set(PHASES)
    warm = [phase for _, phase in LONG_LIVED_ROUNDS if phase in WARM_PHASES]
    assert warm == list(WARM_PHASES), LONG_LIVED_ROUNDS
    # Three warm rounds of different tables: the median is of three different changes.
    tables = [frozenset(name for name, _ in chosen_tables(50, 5, phase)) for phase in warm]
    assert len(set(tables)) == 3 and not tables[0] & tables[1] & tables[2]
