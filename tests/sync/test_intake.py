"""The sync engine's one seam toward agents and importers: the `Intake` functions it is given.

The engine imports neither (pyproject.toml's contracts); what they have waiting
goes in because the program passes it (app.syncing). These tests run real
syncs between real git repositories.
"""

from __future__ import annotations

from typing import Any

from fleet import Fleet, fleet  # noqa: F401

from anamnesis.app import sync_store
from anamnesis.app.syncing import INTAKE, take_in_captured, take_in_mirrored
from anamnesis.base.paths import Store
from anamnesis.store import create_note


def test_what_an_intake_writes_goes_into_the_same_sync_and_is_reported(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    order: list[str] = []

    def first(store: Store) -> list[dict[str, Any]]:
        order.append("first")
        note = create_note(store, type="semantic", title="Brought in first", body="from the intake\n")
        return [{"source": "test", "note": note.path}]

    def second(store: Store) -> list[dict[str, Any]]:
        order.append("second")
        return []

    result = a.sync(intake=(first, second))
    assert order == ["first", "second"]
    assert [item["source"] for item in result.imported] == ["test"]
    assert result.exit_code == 0 and result.sent >= 1
    b.sync()
    assert "Brought in first" in "".join(b.files().values())  # pushed by the sync that took it in


def test_the_engine_alone_takes_nothing_in_and_the_program_wires_capture_then_mirrors(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    result = a.sync()
    assert result.imported == []
    assert (take_in_captured, take_in_mirrored) == INTAKE  # queued session notes before mirrored sources
    assert sync_store(a.store).exit_code == 0
