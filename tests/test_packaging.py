"""The built wheel holds every subpackage, the migrations, and works outside the source tree.

setup.py discovers the packages under the two source roots (``client/``, ``service/``) and maps
``migrations/`` into ``recordkeeper_service.migrations``; this builds the real wheel, installs it
into a clean virtualenv and imports every package found in the source tree from there.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = {"client": "", "service": "", "migrations": "recordkeeper_service.migrations"}


def source_packages() -> list[str]:
    """Every directory with an ``__init__.py`` under the mapped source folders, as a module."""
    found = []
    for folder, package in SOURCE_DIRS.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT / folder)
            found.append(".".join(part for part in [package, *rel.parts] if part))
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
    )
    (built,) = out.glob("recordkeeper-*.whl")
    return built


@pytest.fixture(scope="module")
def clean_python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with only the wheel installed; dependencies come from this venv's
    site-packages through a plain path entry, which does not activate the editable install."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_every_source_package_is_in_the_wheel(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    in_wheel = {n.rsplit("/", 1)[0].replace("/", ".") for n in names if n.endswith("__init__.py")}
    missing = sorted(set(source_packages()) - in_wheel)
    assert not missing, f"packages left out of the wheel (see setup.py): {missing}"
    assert any(
        n.startswith("recordkeeper_service/migrations/versions/") and n.endswith(".py")
        for n in names
    ), "no migration revisions in the wheel"
    assert "recordkeeper_service/migrations/script.py.mako" in names
    assert "recordkeeper/py.typed" in names
    # /docs and /redoc work offline: their assets and licences ship in the wheel.
    assets = ROOT / "service" / "recordkeeper_service" / "static" / "api-docs"
    for asset in sorted(p.name for p in assets.iterdir()):
        assert f"recordkeeper_service/static/api-docs/{asset}" in names, asset


def test_the_web_ui_is_in_the_wheel(wheel: Path, clean_python: Path) -> None:
    """Every file of the UI folder the browser needs ships as package data, with the vendored
    library's licence; the installed service finds them (docs/ui.md)."""
    names = set(zipfile.ZipFile(wheel).namelist())
    ui = ROOT / "service" / "recordkeeper_service" / "ui"
    wanted = {
        "recordkeeper_service/" + str(path.relative_to(ui.parent))
        for path in ui.rglob("*")
        if path.suffix in (".html", ".js", ".css") or path.name == "LICENSE.txt"
    }
    assert "recordkeeper_service/ui/vendor/cytoscape/LICENSE.txt" in wanted
    assert not wanted - names, f"UI files left out of the wheel: {sorted(wanted - names)}"
    code = (
        "from recordkeeper_service.routes.ui import _assets\n"
        "assets = _assets()\n"
        "assert 'index.html' in assets and 'vendor/cytoscape/cytoscape.esm.min.js' in assets\n"
    )
    result = subprocess.run([clean_python, "-c", code], capture_output=True, text=True, cwd="/")
    assert result.returncode == 0, result.stderr


def test_every_subpackage_imports_from_the_installed_wheel(clean_python: Path) -> None:
    packages = source_packages()
    code = (
        "import importlib, sys\n"
        f"for name in {packages!r}:\n"
        "    module = importlib.import_module(name)\n"
        "    assert '/site-packages/recordkeeper' in module.__file__, module.__file__\n"
        "import recordkeeper\n"
        "print(len(recordkeeper.__all__))\n"
    )
    result = subprocess.run([clean_python, "-c", code], capture_output=True, text=True, cwd="/")
    assert result.returncode == 0, result.stderr


def test_base_import_does_not_load_tensorflow(clean_python: Path) -> None:
    code = "import recordkeeper, sys; assert 'tensorflow' not in sys.modules, 'tensorflow loaded'"
    result = subprocess.run([clean_python, "-c", code], capture_output=True, text=True, cwd="/")
    assert result.returncode == 0, result.stderr


def test_installed_cli_migrates_a_new_database(clean_python: Path, tmp_path: Path) -> None:
    cli = clean_python.parent / "recordkeeper"
    env = {
        "RECORDKEEPER_DATABASE_URL": f"sqlite:///{tmp_path / 'registry.db'}",
        "PATH": str(clean_python.parent),
        "HOME": str(tmp_path),
    }
    result = subprocess.run(
        [cli, "db", "upgrade"], capture_output=True, text=True, env=env, cwd="/"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "registry.db").exists()
