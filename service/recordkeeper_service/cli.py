"""Service commands of the ``recordkeeper`` console script.

``register(app)`` adds ``serve``, ``db upgrade|current`` and ``token create|list|revoke`` to the
main Typer app (``recordkeeper.cli``), which calls it when the ``server`` extra is installed.
Importing this module raises :class:`ImportError` without that extra; the heavy imports
(SQLAlchemy, uvicorn, FastAPI) happen only when a command runs.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Annotated, Any

import typer

from recordkeeper.core.endpoint import DEFAULT_HOST, DEFAULT_PORT

for _module in ("fastapi", "sqlalchemy", "alembic", "uvicorn", "pydantic_settings"):
    if importlib.util.find_spec(_module) is None:
        raise ImportError(
            f"the recordkeeper service needs {_module}: pip install 'recordkeeper[server]'"
        )

__all__ = ["register"]

db_app = typer.Typer(help="Registry database migrations.", no_args_is_help=True)
token_app = typer.Typer(
    help="API tokens (stored hashed; the secret is shown once).", no_args_is_help=True
)


JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def _echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _settings(**overrides: Any) -> Any:
    from pydantic import ValidationError

    from recordkeeper_service.settings import Settings

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors()
        )
        raise _fail(f"invalid configuration: {problems}") from None


def _database(settings: Any) -> Any:
    from recordkeeper_service.db import Database

    return Database(settings.effective_database_url, pool_size=1)


def serve(
    host: Annotated[
        str | None, typer.Option(help=f"Address to bind [default: {DEFAULT_HOST}].")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help=f"Port to bind [default: {DEFAULT_PORT}].")
    ] = None,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Worker processes.")] = 1,
    access_log: Annotated[bool, typer.Option(help="Log every request.")] = False,
    loop: Annotated[
        str, typer.Option(help="Event loop: auto, asyncio or uvloop (uvicorn's choice).")
    ] = "auto",
    http: Annotated[
        str, typer.Option(help="HTTP implementation: auto, h11 or httptools.")
    ] = "auto",
) -> None:
    """Run the registry service (RECORDKEEPER_* settings; see docs/configuration.md)."""
    from recordkeeper_service import server
    from recordkeeper_service.startup import StartupError

    if loop not in ("auto", "asyncio", "uvloop"):
        raise _fail(f"--loop must be auto, asyncio or uvloop, not {loop!r}")
    if http not in ("auto", "h11", "httptools"):
        raise _fail(f"--http must be auto, h11 or httptools, not {http!r}")
    settings = _settings(host=host, port=port)
    try:
        server.run(settings, workers=workers, access_log=access_log, loop=loop, http=http)
    except StartupError as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot listen on {settings.host}:{settings.port}: {exc}") from None


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
    as_json: JsonFlag = False,
) -> None:
    """Migrate the database named by RECORDKEEPER_DATABASE_URL to the newest schema."""
    from sqlalchemy.exc import SQLAlchemyError

    from recordkeeper_service import migrate
    from recordkeeper_service.settings import default_database_path

    settings = _settings()
    if settings.uses_embedded_database:
        default_database_path().parent.mkdir(parents=True, exist_ok=True)
    database = _database(settings)
    try:
        before = migrate.current_revision(database)
        status = migrate.upgrade(database, revision)
    except SQLAlchemyError as exc:
        raise _fail(f"migration failed: {str(exc).splitlines()[0]}") from None
    finally:
        database.dispose()
    url = database.url.render_as_string(hide_password=True)
    if as_json:
        _echo_json(
            {
                "database": url,
                "before": before,
                "current": status.current,
                "upgraded": before != status.current,
            }
        )
    elif before == status.current:
        typer.echo(f"{url} is already at {status.current}")
    else:
        typer.echo(f"{url} upgraded from {before or 'empty'} to {status.current}")


@db_app.command("current")
def db_current(as_json: JsonFlag = False) -> None:
    """Show the database's revision and whether it is at this release's head."""
    from sqlalchemy.exc import SQLAlchemyError

    from recordkeeper_service import migrate

    settings = _settings()
    database = _database(settings)
    try:
        status = migrate.status(database)
    except SQLAlchemyError as exc:
        raise _fail(f"cannot read the database: {str(exc).splitlines()[0]}") from None
    finally:
        database.dispose()
    url = database.url.render_as_string(hide_password=True)
    state = "at head" if status.at_head else "NOT at head: run `recordkeeper db upgrade`"
    if as_json:
        _echo_json(
            {
                "database": url,
                "current": status.current,
                "head": status.head,
                "at_head": status.at_head,
            }
        )
    else:
        typer.echo(
            f"{url}: revision {status.current or 'none (empty)'}; head {status.head}; {state}"
        )
    if not status.at_head:
        raise typer.Exit(1)


def _token_repository() -> Any:
    from recordkeeper_service import migrate
    from recordkeeper_service.repository.tokens import TokenRepository

    settings = _settings()
    database = _database(settings)
    try:
        migrate.check_at_head(database)
    except migrate.DatabaseNotAtHead as exc:
        database.dispose()
        raise _fail(str(exc)) from None
    return TokenRepository(database)


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Option(help="Who uses it (recorded as the actor), e.g. ci.")],
    scope: Annotated[str, typer.Option(help="read, write or admin.")] = "read",
    as_json: JsonFlag = False,
) -> None:
    """Create a token and print its secret (shown only now; with --json in the "secret" key)."""
    from recordkeeper.core.errors import RecordkeeperError

    tokens = _token_repository()
    try:
        record, secret = tokens.create(name, scope, actor="cli")
    except RecordkeeperError as exc:
        raise _fail(exc.detail) from None
    if as_json:
        _echo_json({**record.to_json(), "secret": secret})
        return
    typer.echo(
        f"created token {record.id} ({record.name}, scope {record.scope}); "
        "the secret is shown only once:",
        err=True,
    )
    typer.echo(secret)


@token_app.command("list")
def token_list(as_json: JsonFlag = False) -> None:
    """List tokens (never their secrets)."""
    tokens = _token_repository()
    page = tokens.list(limit=1000, offset=0)
    if as_json:
        _echo_json([t.to_json() for t in page.data])
        return
    for t in page.data:
        state = f"revoked {t.to_json()['revoked_at']}" if t.revoked_at else "active"
        used = t.to_json()["last_used_at"] or "never"
        typer.echo(f"{t.id:>5}  {t.name:<24} {t.scope:<6} {state:<32} last used {used}")


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[int, typer.Argument(help="The token's id.")], as_json: JsonFlag = False
) -> None:
    """Revoke a token (idempotent)."""
    from recordkeeper.core.errors import RecordkeeperError

    tokens = _token_repository()
    try:
        record = tokens.revoke(token_id, actor="cli")
    except RecordkeeperError as exc:
        raise _fail(exc.detail) from None
    if as_json:
        _echo_json(record.to_json())
        return
    typer.echo(f"revoked token {record.id} ({record.name})")


def register(app: typer.Typer) -> None:
    """Add the service commands to the main ``recordkeeper`` Typer app."""
    app.command("serve")(serve)
    app.add_typer(db_app, name="db")
    app.add_typer(token_app, name="token")
