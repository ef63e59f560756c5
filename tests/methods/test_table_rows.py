"""Being registered and being a row of the method tables are two things (issue 50): a method
asks for a row in its own class (``table_row``); one that does not runs by name everywhere and
leaves the tables, the notebooks' default rows and their cell counts as they were. A method
without a label or a colour of its own is shown by its registry name in a colour its name picks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import torch

from stamplib import methods
from stamplib.experiments import plans, registry
from stamplib.methods.base import _REGISTRY, TTAMethod, TTAOutput, register
from stamplib.report import palette
from stamplib.report.paper import method_label


@dataclass(frozen=True)
class _Config:
    lr: float = 1e-3


class _Toy(TTAMethod):
    config_cls = _Config
    fallback_config = _Config()

    def step(self, x: torch.Tensor) -> TTAOutput:
        logits = self.model(x)
        return TTAOutput(torch.softmax(logits, dim=1), -logits.max(dim=1).values)


@pytest.fixture
def add() -> Iterator:
    names: list[str] = []

    def register_as(name: str, base: type = _Toy, **attributes: object) -> str:
        register(name)(type(name, (base,), attributes))
        names.append(name)
        return name

    yield register_as
    for name in names:
        _REGISTRY.pop(name, None)


def test_the_rows_are_the_papers_ten_then_the_methods_that_ask_for_one() -> None:
    assert methods.TABLE_ORDER[:len(methods.PAPER_ORDER)] == methods.PAPER_ORDER
    newer = methods.TABLE_ORDER[len(methods.PAPER_ORDER):]
    assert newer and all(methods.method_class(m).__dict__.get("table_row") for m in newer)
    rows = [methods.method_class(m).table_row for m in newer]
    assert rows == sorted(rows)
    asking = {m for m in methods.available() if methods.method_class(m).__dict__.get("table_row") is not None}
    assert asking == set(newer)
    assert methods.table_order() == methods.TABLE_ORDER


def test_a_registered_method_without_a_row_changes_no_table(add) -> None:
    before = {nb: len(registry.plan(nb, profile="smoke").specs)
              for nb in ("02_table1_cifar_outlier_aware", "05_table4_closed_set")}
    name = add("toy_without_row")
    assert name in methods.available() and methods.table_order() == methods.TABLE_ORDER
    assert {nb: len(registry.plan(nb, profile="smoke").specs) for nb in before} == before
    # ... and runs by name where asked for
    chosen = registry.plan(plans.TABLE1, profile="smoke", methods=f"tent,{name}")
    assert {c.spec.method for c in chosen.cells} == {"tent", name}


def test_a_method_that_asks_for_a_row_comes_after_the_others_in_its_order(add) -> None:
    later, earlier = add("toy_row_31", table_row=31), add("toy_row_30", table_row=30)
    assert methods.table_order() == (*methods.TABLE_ORDER, earlier, later)
    add("toy_subclass", methods.method_class(later))  # a subclass asks for no row by inheriting one
    assert methods.table_order() == (*methods.TABLE_ORDER, earlier, later)


@pytest.mark.parametrize("row", [30, 5, True, "11"])
def test_a_row_taken_among_the_papers_or_twice_is_one_error_naming_the_method(add, row) -> None:
    add("toy_first", table_row=30)
    add("toy_second", table_row=row)
    with pytest.raises(ValueError, match="toy_second"):
        methods.table_order()


def test_a_new_method_needs_no_label_and_gets_a_colour_by_its_name() -> None:
    assert method_label("toy_method") == "toy_method" and method_label("bn_stats") == "BN Stats"
    colour = palette.method_colour("toy_method")
    assert colour in palette.SPARE_COLOURS and palette.method_colour("toy_method") == colour
    assert palette.method_colours(["stamp", "toy_method"]) == {"stamp": palette.STAMP, "toy_method": colour}
    # two new methods whose names pick the same spare still differ within one figure
    same = [n for n in (f"toy_{i}" for i in range(40)) if palette.method_colour(n) == colour][:2]
    shown = palette.method_colours(["toy_method", *same])
    assert len(same) == 2 and len(set(shown.values())) == 3 and shown["toy_method"] == colour
