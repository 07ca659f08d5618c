"""The shape of job/'s classes (issue 36): no object that holds more than 20 attributes of state
for its methods to read back, and no two classes of one name, so that a reader finds a type by
its name alone. Read from the source with ast: a class's state is what its methods assign to
`self.NAME`; a record's declared fields (a row, a spec, a struct) are its columns, not state."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_STATE = 20
# Objects still over the limit, with their count today: one may shrink, never grow, and leaves this
# list once under the limit (issue 36): none today.
OVER: dict[str, int] = {}


def _classes(root: Path) -> list[tuple[str, ast.ClassDef]]:
    return [(str(path.relative_to(root)), node) for path in sorted((root / "job").rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(), str(path))) if isinstance(node, ast.ClassDef)]


def _state(cls: ast.ClassDef) -> set[str]:
    """The attributes its methods assign through `self`."""
    targets = []
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign):
            targets.extend(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets.append(node.target)
    return {t.attr for target in targets for t in ast.walk(target)
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


def _repeated_names(classes: list[tuple[str, ast.ClassDef]]) -> dict[str, list[str]]:
    where = defaultdict(list)
    for path, cls in classes:
        where[cls.name].append(path)
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def _over(classes: list[tuple[str, ast.ClassDef]]) -> dict[str, int]:
    return {f"{path}:{cls.name}": len(state) for path, cls in classes if len(state := _state(cls)) > MAX_STATE}


def test_no_two_classes_of_job_share_a_name():
    assert _repeated_names(_classes(ROOT)) == {}


def test_no_class_of_job_holds_more_than_20_attributes_of_state():
    over = {key.rpartition(":")[2]: count for key, count in _over(_classes(ROOT)).items()}
    grown = {name: count for name, count in over.items() if count > OVER.get(name, MAX_STATE)}
    assert grown == {}, f"over {MAX_STATE} attributes of state: {grown}"
    assert set(over) == set(OVER), f"now under the limit, take out of OVER: {set(OVER) - set(over)}"


def test_the_checks_catch_a_repeated_name_and_a_heavy_object(tmp_path):
    (tmp_path / "job" / "a").mkdir(parents=True)
    fields = "\n".join(f"        self.f{i} = {i}" for i in range(MAX_STATE + 1))
    (tmp_path / "job" / "a" / "one.py").write_text(f"class Heavy:\n    def __init__(self):\n{fields}\n")
    (tmp_path / "job" / "two.py").write_text("class Heavy:\n    x: int\n")
    classes = _classes(tmp_path)
    assert _repeated_names(classes) == {"Heavy": ["job/a/one.py", "job/two.py"]}
    assert _over(classes) == {"job/a/one.py:Heavy": MAX_STATE + 1}
