"""The operation table: data in, a gate that refuses what must never be sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from pmsgate.integrations.kross.errors import OutOfScopeOperation, UnknownOperation
from pmsgate.integrations.kross.operations import (
    InvalidOperationTable,
    OperationKind,
    load_operations,
)

SPEC_OPERATIONS = {
    "auth/get-token": OperationKind.WRITE,
    "calendar/get-availability": OperationKind.READ,
    "reservations/get-list": OperationKind.READ,
    "get-check-in-instructions": OperationKind.READ,
    "get-house-manual": OperationKind.READ,
    "get-contract": OperationKind.READ,
    "reservations/save": OperationKind.WRITE,
    "reservations/add-payment": OperationKind.WRITE,
    "check-in-guest": OperationKind.WRITE,
    "save-guest-pictures": OperationKind.WRITE,
}


def test_table_holds_exactly_the_ten_operations_of_the_spec_with_their_kinds() -> None:
    table = load_operations()
    assert {op.name: op.kind for op in table} == SPEC_OPERATIONS


def test_every_operation_lives_at_its_spec_path_by_default() -> None:
    table = load_operations()
    assert all(op.path == op.name for op in table)


def test_reads_are_replay_safe_and_writes_are_not_except_the_token_request() -> None:
    table = load_operations()
    for op in table:
        expected = op.kind is OperationKind.READ or op.name == "auth/get-token"
        assert op.replay_safe is expected, op.name


@pytest.mark.parametrize("name", ["calendar/get-calendar", "reservations/change-channel"])
def test_operations_the_spec_says_do_not_exist_are_unknown(name: str) -> None:
    with pytest.raises(UnknownOperation) as caught:
        load_operations().resolve(name)
    assert caught.value.code == "pms_unknown_operation"


@pytest.mark.parametrize(
    "name",
    ["channel/save-cm", "channel/get-tariffs", "messaging/send", "users/create", "users/set-role"],
)
def test_out_of_scope_families_are_refused_with_their_own_code(name: str) -> None:
    with pytest.raises(OutOfScopeOperation) as caught:
        load_operations().resolve(name)
    assert caught.value.code == "pms_out_of_scope_operation"
    assert caught.value.operation == name


@pytest.mark.parametrize(
    "name", ["apiv5", "apiv5/reservations/get-list", "v5/reservations/get-list", "/apiv5"]
)
def test_version_prefixed_and_apiv5_names_are_refused(name: str) -> None:
    with pytest.raises(UnknownOperation):
        load_operations().resolve(name)


def test_a_name_nobody_knows_is_unknown() -> None:
    with pytest.raises(UnknownOperation):
        load_operations().resolve("reservations/delete")


def test_an_override_moves_an_operation_to_another_path() -> None:
    table = load_operations({"get-check-in-instructions": "reservations/get-check-in-instructions"})
    op = table.resolve("get-check-in-instructions")
    assert op.path == "reservations/get-check-in-instructions"
    assert op.kind is OperationKind.READ


def test_an_override_for_an_unknown_operation_is_a_configuration_error() -> None:
    with pytest.raises(InvalidOperationTable) as caught:
        load_operations({"get-houze-manual": "reservations/get-house-manual"})
    assert caught.value.code == "invalid_kross_paths"


@pytest.mark.parametrize(
    "path",
    [
        "/v5/get-house-manual",
        "v5/get-house-manual",
        "apiv5/get-house-manual",
        "Reservations/Get-House-Manual",
        "reservations//get-house-manual",
        "../get-house-manual",
        "get-house-manual?x=1",
        "",
    ],
)
def test_an_override_with_a_malformed_or_version_prefixed_path_is_refused(path: str) -> None:
    with pytest.raises(InvalidOperationTable):
        load_operations({"get-house-manual": path})


@pytest.mark.parametrize("path", ["channel/save-cm", "messaging/send", "calendar/get-calendar"])
def test_an_override_cannot_point_an_operation_at_a_refused_path(path: str) -> None:
    with pytest.raises(InvalidOperationTable):
        load_operations({"get-house-manual": path})


def test_two_operations_cannot_share_one_path() -> None:
    with pytest.raises(InvalidOperationTable):
        load_operations({"get-house-manual": "get-contract"})


def test_a_malformed_table_file_is_a_configuration_error(tmp_path: Path) -> None:
    source = tmp_path / "operations.yaml"
    source.write_text("operations:\n  x:\n    path: x\n    kind: sometimes\n")
    with pytest.raises(InvalidOperationTable):
        load_operations(source=source)


def test_the_table_yaml_ships_inside_the_package() -> None:
    from importlib import resources

    assert resources.files("pmsgate.integrations.kross").joinpath("operations.yaml").is_file()
