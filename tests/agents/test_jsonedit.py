"""Editing JSON text in place: the result parses to the new data, and only what changed changed."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from anamnesis.agents.jsonedit import edit


def _never(data: Any) -> str:
    raise AssertionError("the text was written out whole instead of being edited")


def _within(small: str, big: str) -> bool:
    """Whether `small` is `big` with some characters left out (every byte kept, in order)."""
    chars = iter(big)
    return all(char in chars for char in small)


def test_numbers_escapes_and_layout_outside_the_change_are_kept() -> None:
    text = '{\n  "n": 1e3, "f": 1.50, "u": "caf\\u00e9 \\/ \\ud83d",\n  "list": [ 1,2 ],\n  "o": {}\n}\n'
    new = json.loads(text)
    new["o"]["added"] = True
    out = edit(text, new, dump_whole=_never)
    assert out == text.replace('"o": {}', '"o": {\n    "added": true\n  }')


def test_added_members_go_first_so_no_existing_line_changes() -> None:
    text = '{\n    "a": 1,\n    "b": [\n        "x"\n    ]\n}\n'
    new = json.loads(text)
    new["z"] = {"k": [1]}
    new["b"].append("y")  # appended: needs a comma on the line before
    new["b"].insert(0, "w")  # in front: a line of its own
    out = edit(text, new, dump_whole=_never)
    assert out == (
        '{\n    "z": {\n        "k": [\n            1\n        ]\n    },\n    "a": 1,\n'
        '    "b": [\n        "w",\n        "x",\n        "y"\n    ]\n}\n'
    )


def test_compact_text_stays_compact_with_its_own_separators() -> None:
    text = '{"a":{"x":1,"y":2},"b":[]}'
    new = json.loads(text)
    new["a"]["new"] = {"k": "v"}
    new["b"].append(3)
    assert edit(text, new, dump_whole=_never) == '{"a":{"new":{"k":"v"},"x":1,"y":2},"b":[3]}'


def test_removed_members_take_their_lines_with_them() -> None:
    text = '{\n  "keep": 1,\n  "drop": {\n    "deep": [1, 2]\n  },\n  "also": [\n    {"a": 1},\n    {"b": 2}\n  ]\n}'
    new = json.loads(text)
    del new["drop"]
    new["also"].pop(0)
    assert edit(text, new, dump_whole=_never) == '{\n  "keep": 1,\n  "also": [\n    {"b": 2}\n  ]\n}'


def test_a_changed_value_is_replaced_where_it_stands() -> None:
    text = '{\n\t"cmd": "old",\t"n": 1E2\n}'
    new = json.loads(text)
    new["cmd"] = 'new "quoted" ü'
    assert edit(text, new, dump_whole=_never) == '{\n\t"cmd": "new \\"quoted\\" ü",\t"n": 1E2\n}'


def test_a_top_level_that_is_not_an_object_is_written_whole() -> None:
    assert edit("[1, 2]", {"a": 1}, dump_whole=lambda d: "WHOLE") == "WHOLE"
    assert edit("   ", {"a": 1}, dump_whole=lambda d: "WHOLE") == "WHOLE"


# -- random documents, styles and changes ------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "dé", "x y", 'quote"d', "back\\slash", "emoji 🧠", "tab\tbed"]


def _value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.45:
        return rng.choice([rng.randint(-5, 10**6), rng.random() * 100, True, False, None, rng.choice(WORDS)])
    if roll < 0.7:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {f"{rng.choice(WORDS)}{i}": _value(rng, depth + 1) for i in range(rng.randint(0, 4))}


def _render(rng: random.Random, data: Any) -> str:
    style = rng.choice(["indent2", "indent4", "tab", "compact", "spaced", "dumps"])
    if style == "indent2":
        return json.dumps(data, indent=2)
    if style == "indent4":
        return json.dumps(data, indent=4, ensure_ascii=False) + "\n"
    if style == "tab":
        return json.dumps(data, indent="\t") + "\n"
    if style == "compact":
        return json.dumps(data, separators=(",", ":"))
    if style == "spaced":
        return json.dumps(data, indent=3, separators=(" ,", " : "))
    return json.dumps(data)


def _containers(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if isinstance(data, (dict, list)) else []
    children = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in children:
        found += _containers(value, (*path, key))
    return found


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


def _mutate(rng: random.Random, data: dict[str, Any]) -> str:
    """Change `data` in place one way; returns the kind of change."""
    target = _get(data, rng.choice(_containers(data)))
    kind = rng.choice(["add", "remove", "change"])
    if kind == "add" or not target:
        if isinstance(target, dict):
            target[f"new-{rng.randint(0, 99)}-{len(target)}"] = _value(rng, 2)
        else:
            target.insert(rng.randint(0, len(target)), _value(rng, 2))
        return "add"
    key = rng.choice(list(target)) if isinstance(target, dict) else rng.randrange(len(target))
    if kind == "remove":
        del target[key]
        return "remove"
    target[key] = _value(rng, 3)
    return "change"


@pytest.mark.parametrize("seed", range(40))
def test_random_documents_and_changes(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        old = {f"k{i}": _value(rng, 1) for i in range(rng.randint(0, 5))}
        text = _render(rng, old)
        new = copy.deepcopy(old)
        kinds = {_mutate(rng, new) for _ in range(rng.randint(1, 3))}
        out = edit(text, new, dump_whole=_never)
        assert json.loads(out) == new, (text, out)
        if json.loads(text) == new:
            assert out == text
        elif kinds == {"add"}:
            assert _within(text, out), (text, out)  # every byte of the old text is kept
        elif kinds == {"remove"}:
            assert _within(out, text), (text, out)  # nothing is rewritten, only cut
