"""`simulate --plot`: each user's share over time, one panel per configuration, with matplotlib
(the optional `plot` extra: pip install 'job[plot]')."""

from __future__ import annotations

from pathlib import Path

from job.core.errors import BadInput
from job.core.simulate.metrics import Windows

FORMATS = (".png", ".svg")
# Users drawn on their own, the most served first; the others are summed as one band.
USERS_DRAWN = 8
INSTALL = "pip install 'job[plot]'"


def check(path: str) -> None:
    """Refuses, before any simulation, a file matplotlib will not write or a missing matplotlib."""
    if Path(path).suffix.lower() not in FORMATS:
        raise BadInput(f"--plot: {path}: the file must end in .png or .svg")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BadInput(f"--plot needs matplotlib, which is not installed: {INSTALL}") from None


def shares(path: str, configurations: list[tuple[str, Windows]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(len(configurations), 1, figsize=(10, 3 * len(configurations)), sharex=True,
                                   squeeze=False)
    # One order and so one colour per user in every panel: the most served over all of them first.
    served_in_all: dict[str, float] = {}
    for _, windows in configurations:
        for user, values in windows.received.items():
            served_in_all[user] = served_in_all.get(user, 0.0) + sum(values)
    served = sorted(served_in_all, key=lambda user: (-served_in_all[user], user))
    for (name, windows), ax in zip(configurations, axes[:, 0], strict=True):
        # A step per window, closed at the end of the last one.
        origin = windows.starts[0]
        end = windows.starts[-1] + windows.lengths[-1]
        hours = [(start - origin) / 3600 for start in windows.starts] + [(end - origin) / 3600]
        empty = [0.0] * len(windows.starts)
        bands = [windows.received.get(user, empty) + windows.received.get(user, empty)[-1:] for user in served[:USERS_DRAWN]]
        labels = served[:USERS_DRAWN]
        if len(served) > USERS_DRAWN:
            rest = (windows.received.get(user, empty) for user in served[USERS_DRAWN:])
            others = [sum(values) for values in zip(empty, *rest, strict=True)]
            bands.append(others + others[-1:])
            labels.append(f"{len(served) - USERS_DRAWN} others")
        if bands:
            ax.stackplot(hours, bands, labels=labels, step="post")
        ax.set_title(name)
        ax.set_ylabel("dominant share")
        ax.legend(loc="upper right", fontsize="small", ncol=2)
    axes[-1, 0].set_xlabel("hours from the first submission")
    figure.tight_layout()
    try:
        figure.savefig(path)
    except OSError as exc:
        raise BadInput(f"--plot: cannot write {path}: {exc.strerror or exc}") from None
    finally:
        pyplot.close(figure)
