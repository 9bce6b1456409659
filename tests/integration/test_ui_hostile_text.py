"""Hostile text on the version page, in Chromium (Debian's, via Playwright): sample records and
provenance written by a hostile client over a real socket are shown as text, run nothing.

The sample's feature names and values, a bytes record, the provenance note, params, command
and producer branch carry markup (``<script>``, ``<img onerror>``, ``<svg onload>``) and
``javascript:`` URLs; feature names that are Object.prototype's (``toString``,
``constructor``, ``__proto__``) are columns like any other, and a record without them shows
"—" there (the page read them through the prototype: a function, or ``{}``).
"""

from __future__ import annotations

import json
import shlex
import urllib.request
from typing import Any

from tests.integration._browser import browser, chromium_path, expect, page
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path", "page"]  # fixtures used by the test below

SHA = "a" * 64
MARKUP = (
    '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
    '<svg onload="window.__pwned=3"></svg><a href="javascript:window.__pwned=4">x</a>'
)


def _api(service: LiveService, method: str, path: str, body: Any) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{service.url}/api/v1{path}",
        data=json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.loads(response.read()))


def _hostile_version(service: LiveService) -> str:
    provenance = {
        "note": MARKUP,
        "params": {MARKUP: MARKUP},
        "command": [MARKUP, "javascript:window.__pwned=5"],
        "producer": {"vcs": "git", "commit": "b" * 40, "branch": MARKUP, "dirty": False},
        "sources": [{"uri": "javascript:window.__pwned=6"}, {"uri": f"s3://raw/{MARKUP}"}],
    }
    staged = _api(service, "POST", "/datasets/coco/versions", {"provenance": provenance})
    name = staged["name"]
    shard = {
        "split": "train",
        "index": 0,
        "count": 1,
        "uri": f"{service.storage_root.rstrip('/')}/raw/a.tfrecord",
        "compression": "none",
        "size": 10,
        "sha256": SHA,
        "crc32c": "0" * 8,
        "records_sha256": SHA,
        "record_count": 2,
    }
    _api(service, "POST", f"/versions/{name}/shards", {"shards": [shard]})
    name = _api(service, "POST", f"/versions/{name}/commit", {})["name"]
    sample = {
        "splits": [
            {
                "split": "train",
                "records": [
                    {
                        "index": 0,
                        "size": 5,
                        "kind": "example",
                        "features": {
                            MARKUP: [MARKUP],
                            "toString": ["t"],
                            "constructor": ["c"],
                            "__proto__": ["p"],
                        },
                    },
                    {"index": 1, "size": 5, "kind": "example", "features": {"label": [1]}},
                    {"index": 2, "size": 5, "kind": "bytes", "features": MARKUP},
                ],
            }
        ]
    }
    _api(service, "PUT", f"/versions/{name}/sample", sample)
    return str(name)


def test_hostile_sample_and_provenance_are_text(live_service: LiveService, page: Any) -> None:
    name = _hostile_version(live_service)
    page.goto(f"{live_service.url}/#/versions/{name}")
    table = page.get_by_test_id("sample-train")
    expect(table.locator("tbody tr")).to_have_count(3)
    expect(table.locator("thead")).to_contain_text(MARKUP)
    expect(table.locator("tbody tr").first).to_contain_text(MARKUP)
    expect(table.locator("tbody tr").nth(2)).to_contain_text(MARKUP)
    expect(page.locator("main")).to_contain_text("javascript:window.__pwned=6")
    headers = table.locator("thead th").all_inner_texts()
    row = table.locator("tbody tr").nth(1).locator("td").all_inner_texts()
    cells = dict(zip(headers, row, strict=True))
    # The second record has none of these features: its cells say so.
    assert [cells["toString"], cells["constructor"], cells["__proto__"]] == ["—"] * 3
    first = dict(
        zip(headers, table.locator("tbody tr").first.locator("td").all_inner_texts(), strict=True)
    )
    assert [first["toString"], first["constructor"], first["__proto__"]] == ["t", "c", "p"]
    # The command line reads as a shell would take it (as `recordkeeper show` prints it): the
    # arguments with spaces and quotes are quoted, not run together with spaces.
    with urllib.request.urlopen(f"{live_service.url}/api/v1/versions/{name}", timeout=30) as r:
        stored = json.loads(r.read())["provenance"]["command"]
    assert len(stored) == 2
    expect(page.get_by_test_id("provenance-command")).to_have_text(shlex.join(stored))
    # Nothing ran and nothing was parsed as markup: no element the text describes exists.
    assert page.evaluate("window.__pwned") is None
    for tag in ("main script", "main img", "main svg", "main a[href^='javascript:']"):
        assert page.locator(tag).count() == 0, tag
