"""An agent's recent message ids: what was added is found until it is pushed out."""

from __future__ import annotations

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
