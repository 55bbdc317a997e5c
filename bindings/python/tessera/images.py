"""Image folders outside training: what a folder holds, and restart markers added to its JPEGs so
that ranks splitting an image along H each decode only their rows (docs/training.md, "Restart
markers")."""

from . import _tessera


def images_info(folder: str) -> dict:
    """Reads the header of every JPEG under ``folder`` (walked recursively) and returns
    ``{"folder", "jpegs", "jpegs_from_top", "progressive", "restart_rows_max", "pngs",
    "other_files", "bytes"}``: ``jpegs_from_top`` counts the JPEGs a rank must decode from the top
    to reach rows further down (no restart marker begins an MCU row), as ``tessera images info``."""
    return _tessera._images_info(str(folder))


def add_restarts(source: str, target: str, rows: int = 1, jobs: int = 0) -> dict:
    """Copies the image folder (or JPEG) ``source`` to ``target`` with a restart marker every
    ``rows`` MCU rows in every JPEG, losslessly (the same pixels, checked per file), every other file
    copied as it is; ``target`` may be ``source`` (in place). ``jobs``: files at once (0: one per
    core). Returns ``{"jpegs", "progressive", "copied", "bytes_in", "bytes_out", "seconds"}``, as
    ``tessera images add-restarts``. A bad file raises :class:`tessera.InvalidArgument` naming it."""
    return _tessera._add_restarts(str(source), str(target), int(rows), int(jobs))
