"""``JsonObject``: a JSON document read field by field, every problem naming the field's path."""

from __future__ import annotations

import enum

import pytest

from sleuth.errors import ConfigError
from sleuth.json_fields import JsonObject, json_type


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


DOCUMENT = {"name": "n", "count": 3, "whole": 4.0, "ratio": 1, "colour": "red", "share": None,
            "items": [{"id": 1, "tags": [1, 2]}, {"id": "2", "tags": [3, "x"]}], "inner": {"depth": [1.5]}}


def test_fields_read_as_their_types_with_defaults_for_absent_keys() -> None:
    f = JsonObject(DOCUMENT)
    assert (f.text("name"), f.integer("count"), f.integer("whole"), f.number("ratio")) == ("n", 3, 4, 1.0)
    assert type(f.number("ratio")) is float and f.choice("colour", Colour) is Colour.RED
    assert f.number_or_null("share") is None and f.object_or_null("absent", None) is None
    assert (f.integer("absent", 7), f.integers("absent", ()), f.objects("absent", [])) == (7, (), [])
    assert f.objects("items")[0].integers("tags") == (1, 2)


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (lambda f: f.text("missing"), "missing: missing"),
        (lambda f: f.text("count"), "count: must be a string, got an integer 3"),
        (lambda f: f.integer("name"), "name: must be an integer, got a string 'n'"),
        (lambda f: f.number("share"), "share: must be a number, got null"),
        (lambda f: f.choice("name", Colour), "name: must be one of red, blue, got a string 'n'"),
        (lambda f: f.objects("items")[1].integer("id"), r"items\[1\].id: must be an integer, got a string '2'"),
        (lambda f: f.objects("items")[1].integers("tags"), r"items\[1\].tags\[1\]: must be an integer"),
        (lambda f: f.object("inner").integers("depth"), r"inner.depth\[0\]: must be an integer, got a number 1.5"),
        (lambda f: f.objects("inner"), "inner: must be an array, got an object"),
        (lambda f: f.object("items"), "items: must be an object, got an array"),
    ],
)
def test_each_problem_names_the_path_of_the_field(read, message) -> None:
    with pytest.raises(ConfigError, match=message):
        read(JsonObject(DOCUMENT))


def test_a_document_that_is_not_an_object_and_long_values_are_named_briefly() -> None:
    with pytest.raises(ConfigError, match="expected a JSON object, got an array"):
        JsonObject([1])
    with pytest.raises(ConfigError, match=r"must be an integer, got a string 'xxxx.*\.\.\.$"):
        JsonObject({"n": "x" * 500}).integer("n")
    assert [json_type(v) for v in (None, True, 1, 1.5, "", [], {})] == [
        "null", "a boolean", "an integer", "a number", "a string", "an array", "an object"]
