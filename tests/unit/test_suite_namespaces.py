"""A check's namespace is made only once the check knows it goes on: pytest sets fixtures up in
the order of the arguments, so every fixture that can end a check (not-applicable, not-run)
comes before ``namespace``, and a check that decides in its body asks for the namespace there
(``own_namespace``). Measured on a sim: 30 empty namespaces made and deleted cost its API
server, etcd and controller manager 5.3 s of CPU (~0.18 s each); a default run made 46 for 9
checks that passed. This holds the suites to that order."""

from __future__ import annotations

import ast
from pathlib import Path

import conformance

SUITES = Path(conformance.__file__).parent / "suites"
# what may follow ``namespace``: fixtures that never end a check
AFTER_NAMESPACE = {"attachments"}


def _checks_and_fixtures() -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for path in sorted(SUITES.rglob("*.py")):
        for f in ast.walk(ast.parse(path.read_text())):
            if isinstance(f, ast.FunctionDef) and (
                    f.name.startswith("test_")
                    or any("fixture" in ast.unparse(d) for d in f.decorator_list)):
                found.append((f"{path.relative_to(SUITES)}::{f.name}", f))
    return found


def test_namespace_comes_after_every_fixture_that_can_end_a_check() -> None:
    late = {}
    for where, f in _checks_and_fixtures():
        names = [a.arg for a in f.args.args]
        if "namespace" in names:
            after = [a for a in names[names.index("namespace") + 1:] if a not in AFTER_NAMESPACE]
            if after:
                late[where] = after
    assert late == {}


def test_a_check_that_decides_in_its_body_asks_for_its_namespace_after() -> None:
    """No ``not_applicable``/``not_run`` in a check's body before the statement that first
    uses a ``namespace`` argument (ask with ``own_namespace`` after them instead)."""
    early = []
    for where, f in _checks_and_fixtures():
        if "namespace" not in [a.arg for a in f.args.args]:
            continue
        for statement in f.body:
            if "namespace" in {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}:
                break
            calls = {ast.unparse(n.func) for n in ast.walk(statement) if isinstance(n, ast.Call)}
            if calls & {"not_applicable", "not_run", "pytest.skip"}:
                early.append(where)
                break
    assert early == []
