"""Package discovery; every other piece of metadata lives in pyproject.toml.

A file's path is its import path under one of two source roots: ``client/`` holds the
``recordkeeper`` library and ``service/`` the ``recordkeeper_service`` FastAPI service.  The one
mapped folder is ``migrations/`` (the Alembic environment), shipped as
``recordkeeper_service.migrations``.  New packages are found, never listed by hand.
"""

from __future__ import annotations

import os
import sysconfig

from setuptools import Extension, find_namespace_packages, find_packages, setup

SOURCE_ROOTS = ("client", "service")
MAPPED = {"recordkeeper_service.migrations": "migrations"}


def discover() -> tuple[list[str], dict[str, str]]:
    """Every package under the source roots and the mapped folders, with its directory."""
    package_dir: dict[str, str] = {}
    for root in SOURCE_ROOTS:
        # data folders (the web UI, the API docs' assets) too: setuptools warns about data in a
        # folder that is not a listed package
        for name in find_namespace_packages(root, exclude=["*__pycache__*"]):
            if all(part.isidentifier() for part in name.split(".")):
                package_dir[name] = f"{root}/{name.replace('.', '/')}"
    for package, folder in MAPPED.items():
        package_dir[package] = folder
        for sub in find_packages(folder):
            package_dir[f"{package}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"
    return sorted(package_dir), package_dir


packages, package_dir = discover()


def openssl() -> dict[str, list]:
    """Build options for OpenSSL's libcrypto when its headers are installed: the per-record
    identities (sha256 per record, SHA-NI where the CPU has it) of the C fast paths.  Python
    itself links libcrypto for hashlib; without the headers those functions are left out and
    hashlib computes the identities."""
    roots = [sysconfig.get_config_var("INCLUDEDIR") or "/usr/include", "/usr/include"]
    roots += os.environ.get("C_INCLUDE_PATH", "").split(os.pathsep)
    if any(r and os.path.exists(os.path.join(r, "openssl", "sha.h")) for r in roots):
        return {"define_macros": [("RK_HAVE_OPENSSL", "1")], "libraries": ["crypto"]}
    return {}


setup(
    packages=packages,
    package_dir=package_dir,
    # Optional C fast paths for deframing/CRC checks and schema inference. Without a compiler the
    # install still succeeds and the pure-Python code is used.
    ext_modules=[
        Extension(
            "recordkeeper._speedups",
            sources=["client/recordkeeper/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
            **openssl(),
        )
    ],
)
