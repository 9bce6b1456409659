"""Sample records over a real socket and on the version page (Debian Chromium via Playwright).

The service runs under uvicorn on a loopback port (SQLite); the data is written and published
through the Python client, which sends each version's sample; the version page shows it as
"Sample records", and a version without one says how to record it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

import recordkeeper as rk
from tests.client._records import example_bytes, write_tfrecord
from tests.integration._browser import browser, chromium_path, expect, page, shot
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path", "page"]  # fixtures used by the tests below


def _write(service: LiveService) -> tuple[str, str]:
    with service.client() as client:
        with client.writer("coco", shard_size="1kB") as w:
            for i in range(12):
                features = {"label": [i], "caption": [b"a cat on mat %d" % i], "box": [0.25, 0.5]}
                w.write(example_bytes(features), split="train")
            w.write(example_bytes({"label": [99], "caption": [b"held out"]}), split="test")
        with client.writer("quiet", sample_records=0) as q:
            q.write(example_bytes({"label": [1]}))
    return w.version.name, q.version.name


def test_samples_over_a_socket(live_service: LiveService, data_dir: Path) -> None:
    """Writer, publish and attach-later, each stored and answered over HTTP; a bad document
    gets its stable code from the real server."""
    written, quiet = _write(live_service)
    write_tfrecord(data_dir / "train.tfrecord", [example_bytes({"n": [i]}) for i in range(9)])
    with live_service.client() as client:
        published = client.publish(rk.Dataset.from_directory(data_dir, name="raw"), progress=False)
        sample = client.sample(published.name)
        assert sample is not None and sample["source"] == "publish"
        assert [r["features"] for r in sample["splits"][0]["records"]] == [
            {"n": [0]},
            {"n": [1]},
            {"n": [2]},
        ]
        assert client.sample(quiet) is None
        assert client.record_sample(quiet)["source"] == "attach"
        with pytest.raises(rk.InvalidSample):
            client.registry.http.api(
                "PUT",
                f"/versions/{written}/sample",
                json={"splits": [{"split": "x", "records": []}]},
            )
    raw = httpx.get(f"{live_service.url}/api/v1/versions/{written}/sample")
    assert raw.status_code == 200
    train = next(s for s in raw.json()["splits"] if s["split"] == "train")
    assert train["records"][0]["features"]["caption"] == ["a cat on mat 0"]


def test_version_page_shows_the_decoded_sample(live_service: LiveService, page: Any) -> None:
    written, quiet = _write(live_service)
    page.goto(f"{live_service.url}/#/versions/{written}")
    sample = page.get_by_test_id("sample")
    expect(page.get_by_test_id("sample-note")).to_contain_text("Recorded by the publisher")
    train = page.get_by_test_id("sample-train")
    expect(train.locator("tbody tr")).to_have_count(3)
    expect(train.locator("thead")).to_contain_text("caption")
    expect(train.locator("tbody tr").first).to_contain_text("a cat on mat 0")
    expect(train.locator("tbody tr").nth(2)).to_contain_text("[0.25, 0.5]")  # as head shows
    expect(page.get_by_test_id("sample-test")).to_contain_text("held out")
    sample.scroll_into_view_if_needed()
    shot(page, "version-sample")
    page.goto(f"{live_service.url}/#/versions/{quiet}")
    none = page.get_by_test_id("sample-none")
    expect(none).to_contain_text(f"recordkeeper head {quiet} --record-sample")


def test_a_long_value_list_wraps_in_its_cell(live_service: LiveService, page: Any) -> None:
    """An MNIST-like record (784 floats, then its label): the sample's ``image`` cell was one
    unbreakable line (``[0.8506242036819458,0.6369...]``) that pushed ``label`` out of view."""
    image = [0.1 * (j % 10) for j in range(784)]
    with live_service.client() as client, client.writer("pixels") as w:
        for i in range(3):
            w.write(example_bytes({"image": image, "label": [i]}))
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_service.url}/#/versions/{w.version.name}")
    train = page.get_by_test_id("sample-train")
    expect(train.locator("tbody tr")).to_have_count(3)
    first = train.locator("tbody tr").first
    expect(first).to_contain_text("[0, 0.1, 0.2, 0.3")  # float32, short
    expect(first).to_contain_text("0.8, 0.9, …]")  # the sample keeps 50 values
    # the shards section's heading: "1 shards, 3 records" before
    expect(page.get_by_text("Split train: 1 shard, 3 records", exact=False)).to_be_visible()
    label = train.locator("thead th").last
    expect(label).to_have_text("label")
    box = label.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 1280, box  # on the page, not scrolled to
    train.scroll_into_view_if_needed()
    shot(page, "version-sample-long-values")


def test_records_that_are_not_examples_say_so_instead_of_an_empty_schema(
    live_service: LiveService, page: Any
) -> None:
    """Opaque records showed the schema as a table with its header alone, which reads as a
    page that did not finish loading."""
    with live_service.client() as client, client.writer("blobs") as w:
        w.write(b"record 0", split="train")
    page.goto(f"{live_service.url}/#/versions/{w.version.name}")
    expect(page.get_by_test_id("schema-none")).to_contain_text(
        "opaque records, inferred from 1 record: no features (the records are not "
        "tf.train.Example protos"
    )
    expect(page.get_by_test_id("schema")).to_have_count(0)
