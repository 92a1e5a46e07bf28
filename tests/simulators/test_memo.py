"""The memo tables' bound: the oldest entries go first, the newest stay in order."""

from simulators import _memo


def test_trim_keeps_the_newest_entries_in_insertion_order(monkeypatch):
    monkeypatch.setattr(_memo, "MEMO_ENTRIES", 3)
    table = {key: key * key for key in range(10)}
    table[2] = -1  # an update keeps its place: dicts order by first insertion
    _memo.trim(table)
    assert table == {7: 49, 8: 64, 9: 81}
    _memo.trim(table)  # at the bound: nothing to drop
    assert list(table) == [7, 8, 9]


def test_a_table_under_the_bound_is_left_alone(monkeypatch):
    monkeypatch.setattr(_memo, "MEMO_ENTRIES", 5)
    table = {"a": 1, "b": 2}
    _memo.trim(table)
    assert table == {"a": 1, "b": 2}


def test_interned_values_are_one_instance_per_value(monkeypatch):
    monkeypatch.setattr(_memo, "_INTERNED", {})
    first, second = (tuple([1, "a", 2.0]) for _ in range(2))  # equal, built apart
    assert first is not second
    assert _memo.interned(first) is first and _memo.interned(second) is first


def test_the_interned_table_stays_within_the_bound(monkeypatch):
    monkeypatch.setattr(_memo, "_INTERNED", {})
    monkeypatch.setattr(_memo, "MEMO_ENTRIES", 4)
    for value in range(10):
        assert _memo.interned(value) == value
    assert len(_memo._INTERNED) <= 5 and 9 in _memo._INTERNED
