"""A view per collection over the hub's `records` table: one typed column per field of the
collection's JSON Schema (exporter/project/schemas/), so a hub operator queries `species` as a
table. The columns follow the schemas; a field a record lacks is NULL."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from exporter.contract.wire import COLLECTIONS

LEFT_OUT = ("id", "collection", "body", "content_hash")  # id leads; body is in `json`
SQL_TYPES = {"integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN"}


@cache
def fields(collection: str) -> tuple[tuple[str, str], ...]:
    """(field, SQL type) of each column of the collection's view after node_id and id."""
    schemas = resources.files("exporter.project") / "schemas"
    text = (schemas / f"{collection}.schema.json").read_text(
        "utf-8")
    properties: dict[str, Any] = json.loads(text)["properties"]
    columns = []
    for name, spec in properties.items():
        if name in LEFT_OUT:
            continue
        kind = spec.get("type", "string")
        columns.append((name, "VARCHAR[]" if kind == "array" else SQL_TYPES.get(kind,
                                                                                "VARCHAR")))
    return tuple(columns)


def _column(name: str, sql_type: str) -> str:
    path = "'" + name.replace("'", "''") + "'"
    quoted = '"' + name.replace('"', '""') + '"'
    if sql_type == "VARCHAR":
        return f"json->>{path} AS {quoted}"
    if sql_type == "VARCHAR[]":
        return f"TRY_CAST(json->{path} AS VARCHAR[]) AS {quoted}"
    return f"TRY_CAST(json->>{path} AS {sql_type}) AS {quoted}"


def view_sql(collection: str) -> str:
    columns = ", ".join(["node_id", "id", *(_column(n, t) for n, t in fields(collection))])
    return (f'CREATE OR REPLACE VIEW "{collection}" AS SELECT {columns} FROM records '
            f"WHERE collection = '{collection}'")


def all_views() -> list[str]:
    return [view_sql(collection) for collection in COLLECTIONS]
