"""Body items and message items whose body is kept elsewhere (DynamoDB JSON)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hourglass.adapters import items
from hourglass.core import keys
from hourglass.core.body_placement import Placement
from hourglass.core.model import HttpTarget, Message, Status
from hourglass.core.schedule import SweepKeys

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MESSAGE = Message(id="ab12", queue="orders", body={"k": "v"}, status=Status.PENDING, created_at=NOW, due_at=NOW)
KEYS = SweepKeys(pk="29491200#3", sk="1795168800000#ab12")


def test_an_inline_message_item_carries_its_body() -> None:
    item = items.message_to_item(MESSAGE, body=items.BodyRef(Placement.INLINE, 1))
    assert items.message_from_item(item).body == {"k": "v"} and items.body_ref_of(item) is None


def test_a_message_item_with_an_external_body_carries_only_where_it_is() -> None:
    item = items.message_to_item(MESSAGE, body=items.BodyRef(Placement.S3, 3))
    assert "body" not in item and items.body_ref_of(item) == items.BodyRef(Placement.S3, 3)


def test_a_message_read_from_such_an_item_has_no_body_yet() -> None:
    item = items.message_to_item(MESSAGE, body=items.BodyRef(Placement.ITEM, 1))
    assert items.message_from_item(item) == replace(MESSAGE, body=None)


def test_a_body_item_round_trips() -> None:
    body = {"text": "héllo", "n": [1, 2, 3]}
    item = items.body_to_item("orders", "ab12", 2, body, expire_at=NOW + timedelta(days=8))
    assert items.body_from_item(item) == body


def test_each_body_version_has_its_own_key() -> None:
    assert items.body_key("orders", "ab12", 1) != items.body_key("orders", "ab12", 2)


def test_body_keys_are_in_the_queue_partition_and_not_message_keys() -> None:
    key = items.body_key("orders", "ab12", 1)
    assert key["pk"]["S"] == "orders" and key["sk"]["S"].startswith(keys.BODY_PREFIX)
    assert not key["sk"]["S"].startswith(keys.MESSAGE_PREFIX)


def test_a_body_item_has_a_ttl() -> None:
    item = items.body_to_item("orders", "ab12", 1, "x", expire_at=NOW)
    assert item["expire_at"] == {"N": str(int(NOW.timestamp()))}


def test_a_hundred_byte_body_is_placed_inline() -> None:
    assert items.place_body(replace(MESSAGE, body="x" * 98), KEYS).placement is Placement.INLINE


def test_a_four_kilobyte_body_is_placed_in_a_body_item() -> None:
    assert items.place_body(replace(MESSAGE, body="x" * 4094), KEYS).placement is Placement.ITEM


def test_a_sixty_four_kilobyte_body_is_placed_in_s3() -> None:
    assert items.place_body(replace(MESSAGE, body="x" * 65534), KEYS).placement is Placement.S3


def test_a_large_target_moves_a_small_body_out_of_the_item() -> None:
    target = HttpTarget(url="https://example.com/" + "p" * 400, headers={"X-A": "v" * 400})
    big = replace(MESSAGE, body="x" * 98, target=target)
    assert items.place_body(big, KEYS).placement is Placement.ITEM


def test_the_placed_ref_has_the_message_version() -> None:
    assert items.place_body(replace(MESSAGE, version=4)).version == 4


def test_item_size_counts_names_and_values() -> None:
    item = {"pk": {"S": "q"}, "n": {"N": "12345"}, "flag": {"BOOL": True}}
    assert items.item_size(item) == (2 + 1) + (1 + 4) + (4 + 1)


def test_the_body_size_is_its_encoded_json() -> None:
    assert items.body_size("é") == len('"é"'.encode())


def test_a_body_items_expiry_reads_back() -> None:
    item = items.body_to_item("orders", "ab12", 1, "x", expire_at=NOW + timedelta(days=8))
    assert items.body_item_expiry(item) == NOW + timedelta(days=8)


def test_a_new_message_with_a_small_body_is_one_item() -> None:
    write = items.new_message_write(MESSAGE, KEYS, retention=timedelta(days=7))
    ref, written = write.body.ref, write.items
    assert ref.placement is Placement.INLINE and [w["sk"]["S"] for w in written] == ["m#ab12"]


def test_a_new_message_with_a_mid_sized_body_is_two_items_naming_each_other() -> None:
    message = replace(MESSAGE, body="x" * 4094)
    write = items.new_message_write(message, KEYS, retention=timedelta(days=7))
    ref, (item, body) = write.body.ref, write.items
    assert items.body_ref_of(item) == ref and body["sk"] == items.body_key("orders", "ab12", ref.version)["sk"]
    assert items.body_from_item(body) == message.body and "body" not in item


def test_a_new_body_item_lives_until_a_day_after_retention_from_the_due_time() -> None:
    _, body = items.new_message_write(replace(MESSAGE, body="x" * 4094), KEYS, retention=timedelta(days=7)).items
    assert items.body_item_expiry(body) == NOW + timedelta(days=8)


def test_a_new_message_with_a_large_body_writes_only_its_item() -> None:
    write = items.new_message_write(replace(MESSAGE, body="x" * 65534), KEYS, retention=timedelta(days=7))
    ref, written = write.body.ref, write.items
    assert ref.placement is Placement.S3 and len(written) == 1 and "body" not in written[0]
