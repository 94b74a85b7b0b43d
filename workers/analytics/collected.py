"""A small run's result tables and saved state fetched in a few Spark jobs and written by the driver.

Why: a Spark run costs per job and stage, not per row. Each ``DataFrame.write`` is a job of its own
with planning, scheduling and the Parquet committer's job setup, task commits and job commit, and a
small run wrote 13 tables and 4 or 8 saved-state parts that way. Here several frames are packed into
one query, each into a column of its own (the frames are unioned; each row fills only its frame's
column) and fetched in one Arrow fetch; the driver splits the Arrow table back into frames, and
``job`` writes each cluster's rows with pyarrow, typed and laid out as the Python engine writes them
(``small.state.write_table``), which ``load``, the next run and the tests read as they read Spark's.
Only for small runs: a full recompute's tables (millions of leader-count rows) do not belong on the
driver, and writing them from the executors measured no slower there (docs/analytics.md).

Packing asks the server nothing: against a Spark Connect server, ``frame.columns`` and
``toArrow()``'s own ``frame.schema`` are each a round trip in which the server analyses the frame's
whole plan, and these plans are the job's deepest. The nine Spark test modules made 264 of them
(0.7-0.9 s of client wait each, on a loaded server). The star inside ``struct`` is expanded by the
server within the one query, and the result's schema comes with its rows (``fetch_arrow``).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema


def collect(frames: Mapping[str, DataFrame]) -> dict[str, pa.Table]:
    """Every frame's rows (with its own column types), fetched in one Spark job."""
    names = list(frames)
    packed: DataFrame | None = None
    for index, frame in enumerate(frames.values()):
        # A one-element array, not the struct itself: other frames' rows hold a null array, which
        # has no child values, where a null struct would hold nulls in fields Spark declares
        # non-nullable (and the Arrow conversion refuses them).
        one = frame.select(F.array(F.struct("*")).alias(f"_{index}"))
        packed = one if packed is None else packed.unionByName(one, allowMissingColumns=True)
    if packed is None:
        return {}
    fetched = fetch_arrow(packed)
    tables = {}
    for index, name in enumerate(names):
        rows = pc.list_flatten(fetched.column(f"_{index}")).combine_chunks()
        tables[name] = pa.Table.from_struct_array(rows)
    return tables


def fetch_arrow(frame: DataFrame) -> pa.Table:
    """``frame.toArrow()``, typed as Spark types it, without the round trip for the schema first.

    A Connect frame's result arrives with its Spark schema; pyspark's ``toArrow`` asks the server
    for the same schema beforehand (an analysis of the whole plan). A classic frame, or a pyspark
    whose Connect frame lacks ``_to_table``, takes ``toArrow`` itself."""
    to_table = getattr(frame, "_to_table", None)
    if to_table is None:
        return frame.toArrow()
    table, schema = to_table()
    if schema is None:  # no schema sent with the rows: ask for it, as toArrow would have
        schema = frame.schema
    return table.cast(to_arrow_schema(schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC"))
