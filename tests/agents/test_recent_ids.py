"""An agent's recent message ids: what was added is found until it is pushed out."""

from __future__ import annotations

import pytest

from claybot.agents.recent_ids import RecentIds


def test_ids_are_found_until_the_ring_overwrites_the_oldest() -> None:
    ids = RecentIds(3)
    for message_id in ("a", "b", "c"):
        ids.add(message_id)
    assert all(message_id in ids for message_id in ("a", "b", "c"))
    assert "d" not in ids
    ids.add("b")  # seen again: nothing moves
    ids.add("d")  # takes the oldest slot
    assert "a" not in ids
    assert all(message_id in ids for message_id in ("b", "c", "d"))
    ids.add("e")
    assert "b" not in ids
    assert all(message_id in ids for message_id in ("c", "d", "e"))


def test_a_discarded_id_is_not_found_and_others_stay() -> None:
    ids = RecentIds(10)
    for n in range(10):
        ids.add(f"m{n}")
    ids.discard("m4")
    ids.discard("never added")
    assert "m4" not in ids
    assert [f"m{n}" in ids for n in range(10)] == [n != 4 for n in range(10)]
    assert 4 not in ids  # only strings are ids


def test_thousands_of_ids_are_told_apart() -> None:
    ids = RecentIds(4096)
    for n in range(4096):
        ids.add(f"message-{n}")
    assert all(f"message-{n}" in ids for n in range(4096))
    assert not any(f"other-{n}" in ids for n in range(4096))


def test_a_filled_ring_keeps_the_newest_and_overwrites_the_oldest_first() -> None:
    ids = RecentIds(3)
    ids.fill(["a", "b", "c", "d"])  # history's ids, oldest first: "a" is beyond the window
    assert "a" not in ids
    assert all(message_id in ids for message_id in ("b", "c", "d"))
    assert not ids.add("c")  # a retried post is still told apart
    assert ids.add("e")  # takes the oldest slot, "b"'s
    assert "b" not in ids
    assert all(message_id in ids for message_id in ("c", "d", "e"))


def test_a_ring_that_is_not_full_after_a_fill_grows_as_before() -> None:
    ids = RecentIds(4)
    ids.fill(["a", "b"])
    assert ids.add("c") and ids.add("d") and ids.add("e")
    assert "a" not in ids
    assert all(message_id in ids for message_id in ("b", "c", "d", "e"))


def test_only_an_empty_ring_is_filled() -> None:
    ids = RecentIds(4)
    ids.add("a")
    with pytest.raises(ValueError, match="empty ring"):
        ids.fill(["b"])
