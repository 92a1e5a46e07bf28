"""User text as dse shows it in a terminal or a picture: names are cut to one line. A spec's
name may be long (a megabyte of it took minutes to lay out as glyphs in pareto.png's title and
in rich's highlighter); the files that record the study keep it whole."""

SHOWN_NAME_CHARS = 80


def short(name: str) -> str:
    """`name`, or its first SHOWN_NAME_CHARS - 1 characters and an ellipsis."""
    return name if len(name) <= SHOWN_NAME_CHARS else name[: SHOWN_NAME_CHARS - 1] + "…"
