"""``python -m recordkeeper_service serve|db|token …``: the service commands on their own."""

from __future__ import annotations

import typer

from recordkeeper_service.cli import register

app = typer.Typer(help="recordkeeper registry service", no_args_is_help=True)
register(app)

if __name__ == "__main__":
    app()
