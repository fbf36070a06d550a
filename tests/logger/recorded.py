"""What the logger tests compare between two runs of one job: its records, less their times."""

from collections import Counter

from sleuth.recordio import read_parquet


def record_keys(folder) -> Counter:
    """Every record of a records folder as (comm, rank, seq, op, peer, nbytes, iteration), counted."""
    records = read_parquet(folder)
    columns = [records.decoded("comm").tolist()] + [
        records[c].tolist() for c in ("rank", "seq", "op", "peer", "nbytes", "iteration")
    ]
    return Counter(zip(*columns))
