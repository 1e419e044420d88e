"""The result post-processing chain on real runs (outputs/processors.py): links in results downloaded into the
workspace and registered (§6.3 step 1), then artifacts registered, stray files collected, large results
offloaded; the download server is support.file_server (127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from support.cli import invoke
from support.local_http import serve
from support.outputs_probes import (
    HTML,
    JSON_BODY,
    MP3,
    PNG,
    URLS,
    echo_skill,
    files_in,
    listed,
    result_skill,
    sha,
    sid,
    url_skill,
)


def cd_url(server: str, disposition: str, name: str = "x") -> str:
    return f"{server}/cd/{name}?v={quote(disposition)}"


UNSAFE_DISPOSITIONS = [
    'attachment; filename="../../../etc/cron.d/evil.png"',
    'attachment; filename=".bashrc.png"',
    'attachment; filename="..\\\\..\\\\win.png"',
    'attachment; filename="/abs/path.png"',
    "attachment; filename*=UTF-8''..%2F..%2Fup.png",
    'attachment; filename="' + "n" * 400 + '.png"',
    'attachment; filename=".."',
]


class Counting(BaseHTTPRequestHandler):
    """Counts requests being answered at the same time."""

    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    active = 0
    peak = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.active += 1
            cls.peak = max(cls.peak, cls.active)
        try:
            time.sleep(0.4)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(PNG)))
            self.end_headers()
            self.wfile.write(PNG)
        finally:
            with cls.lock:
                cls.active -= 1


async def test_explicit_field_downloaded_registered_with_url(
    make_skill, yard_for, db_env, server, seen, allow_private, home
):
    url_skill(make_skill)
    target = f"{server}/img/cat.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "image_url": target}}, context={"session_id": "mat-2"})
    [item] = env["images"]
    path = Path(item["local_path"])
    assert path.read_bytes() == PNG and path.parent == home / "workspaces" / "mat-2"
    assert item["media"] == "image" and item["ref"] == "img_1"
    listed = json.loads((await asyncio.to_thread(invoke, "artifacts", "--session", "mat-2", "--json")).stdout)
    [row] = listed
    assert row["url"] == target and row["ref"] == "img_1" and row["type"] == "image"
    assert row["sha256"] == hashlib.sha256(PNG).hexdigest() and row["size"] == len(PNG) and row["skill"] == "urls"


async def test_ambiguous_fields_and_text_links_probed_pages_skipped(
    make_skill, yard_for, db_env, server, seen, allow_private
):
    url_skill(make_skill)
    result = {
        "ok": True,
        "url": f"{server}/page/index",
        "link": f"{server}/json/api",
        "href": f"{server}/lie/html-as-png",
        "src": f"{server}/lie/json-as-jpeg",
        "image": f"{server}/img/real.png",
        "summary": f"生成完成：{server}/img/from-text.png，请查收",
    }
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": "mat-3"})
    names = sorted(Path(i["local_path"]).name for i in env.get("images", []))
    assert names == ["from-text.png", "real.png"]
    assert "files" not in env and not env.get("warnings")
    for key in ("url", "link", "href", "src", "image", "summary"):
        assert env[key] == result[key]


async def test_at_most_eight_probed_links_per_result(make_skill, yard_for, db_env, server, seen, allow_private):
    url_skill(make_skill)
    text = " ".join(f"{server}/img/t{n}.png" for n in range(12))
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "text": text, "image_urls": [f"{server}/img/e{n}.png" for n in range(10)]}},
            context={"session_id": "mat-4"},
        )
    assert len([p for p in seen if p.startswith("/img/t")]) == 8
    assert len([p for p in seen if p.startswith("/img/e")]) == 10
    assert len(env["images"]) == 18


async def test_size_cap_is_configurable_and_leaves_nothing(
    make_skill, yard_for, db_env, server, seen, allow_private, monkeypatch, home
):
    monkeypatch.setenv("SKILLYARD_MAX_DOWNLOAD_MB", "1")
    url_skill(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {
                "result": {
                    "ok": True,
                    "file_url": f"{server}/big/{2 * 1024 * 1024}",
                    "download_url": f"{server}/bigstream/{2 * 1024 * 1024}",
                    "oss_url": f"{server}/big/{512 * 1024}",
                }
            },
            context={"session_id": "mat-5"},
        )
    assert env["ok"] is True
    assert len(env["warnings"]) == 2
    assert files_in(home / "workspaces" / "mat-5") == [str(512 * 1024)]


async def test_failed_downloads_leave_url_and_warning_never_fail(
    make_skill, yard_for, db_env, server, seen, allow_private, home
):
    url_skill(make_skill)
    result = {
        "ok": True,
        "video_url": f"{server}/status/404",
        "audio_url": f"{server}/truncated/a.png",
        "cdn_url": f"{server}/loop/start",
        "result_url": "ftp://example.invalid/file.bin",
    }
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": "mat-6"})
    assert env["ok"] is True and env["success"] is True
    for key, value in result.items():
        assert env[key] == value
    assert len(env["warnings"]) == 4
    assert files_in(home / "workspaces" / "mat-6") == []


async def test_redirects_followed_for_downloads(make_skill, yard_for, db_env, server, seen, allow_private):
    url_skill(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "output_url": f"{server}/redirect?to=/img/final.png"}},
            context={"session_id": "mat-7"},
        )
    [item] = env["images"]
    assert Path(item["local_path"]).read_bytes() == PNG


@pytest.mark.spec("§6.3")
async def test_top_level_entry_with_existing_local_path_is_not_downloaded_again(
    make_skill, yard_for, db_env, server, seen, allow_private, home
):
    """§6.3: "已带存在的 local_path 的条目跳过，幂等" — a single top-level artifact (§6.3 allows top level) that
    already has its file in the workspace, plus the download_url it was fetched from, is skipped."""
    result_skill(
        make_skill,
        "saved",
        """
(ws / "cat.png").write_bytes(input["png"].encode("latin-1"))
return {"ok": True, "local_path": str(ws / "cat.png"), "filename": "cat.png", "media": "image",
        "download_url": input["url"]}
""",
    )
    async with yard_for() as yard:
        env = await yard.run(
            "saved",
            {"png": PNG.decode("latin-1"), "url": f"{server}/img/cat.png"},
            context={"session_id": "mat-8"},
        )
    assert seen == []
    assert files_in(home / "workspaces" / "mat-8") == ["cat.png"]
    assert "images" not in env


async def test_items_with_existing_local_path_skip_download(
    make_skill, yard_for, db_env, server, seen, allow_private, home
):
    result_skill(
        make_skill,
        "saved_items",
        """
(ws / "dog.png").write_bytes(b"dog")
return {"ok": True, "images": [{"url": input["url"], "local_path": str(ws / "dog.png")}]}
""",
    )
    async with yard_for() as yard:
        env = await yard.run("saved_items", {"url": f"{server}/img/dog.png"}, context={"session_id": "mat-9"})
    assert seen == [] and len(env["images"]) == 1 and env["images"][0]["ref"] == "img_1"


async def test_call_skill_results_skip_post_processing(make_skill, yard_for, db_env, server, seen, allow_private):
    result_skill(make_skill, "inner", "return {'ok': True, 'image_url': input['u'], 'blob': 'q' * 20000}")
    make_skill(
        "outer",
        files={
            "handler.py": """
        async def execute(i, ctx):
            r = await ctx["call_skill"]("inner", {"u": i["u"]})
            seen = {"seen_offloaded": r.get("offloaded"), "seen_images": r.get("images")}
            return {"ok": True, **seen, "n": len(r["blob"])}
    """
        },
    )
    async with yard_for() as yard:
        env = await yard.run("outer", {"u": f"{server}/img/x.png"}, context={"session_id": "mat-10"})
    assert env["seen_offloaded"] is None and env["seen_images"] is None and env["n"] == 20000
    assert seen == []


async def test_materialized_downloads_are_turn_artifacts_and_survive_offload(
    make_skill, yard_for, db_env, server, seen, allow_private
):
    url_skill(make_skill)
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="mat-11", channel="web")
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "image_url": f"{server}/img/p.png", "rows": ["r" * 100] * 200}},
            turn=turn,
        )
    assert env["offloaded"] is True
    assert env["images"][0]["ref"] == "img_1" and Path(env["images"][0]["local_path"]).is_file()
    assert [a["ref"] for a in turn.artifacts] == ["img_1"]


def test_processor_chain_order_is_documented_order(yard_for):
    yard = yard_for()
    names = [p.name for p in yard.registries.processors]
    assert names == [
        "materialize_urls",
        "register_artifacts",
        "collect_artifacts",
        "deliver_artifacts",
        "offload_large_result",
    ]


async def test_content_disposition_filename_star_is_decoded(db_env, make_skill, yard_for, server, allow_private):
    result_skill(make_skill, "urls", URLS)
    url = cd_url(server, "attachment; filename*=UTF-8''%E6%8A%A5%E5%91%8A%202024.png")
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "file_url": url}}, context={"session_id": sid("cd1")})
    [item] = env["images"]
    assert item["filename"] == "报告 2024.png" and Path(item["local_path"]).name == "报告 2024.png"


async def test_content_disposition_filename_star_wins_over_plain_filename(
    db_env, make_skill, yard_for, server, allow_private
):
    """RFC 6266 §4.3 (the header RFC 5987 parameters live in): when both filename and filename* are present,
    recipients pick filename* — servers send both so that old clients get an ASCII fallback."""
    result_skill(make_skill, "urls", URLS)
    url = cd_url(server, "attachment; filename=\"report.png\"; filename*=UTF-8''%E6%8A%A5%E5%91%8A.png")
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "file_url": url}}, context={"session_id": sid("cd2")})
    [item] = env["images"]
    assert item["filename"] == "报告.png", item


async def test_unsafe_download_names_stay_plain_visible_files_in_the_workspace(
    db_env, make_skill, yard_for, server, allow_private, home
):
    result_skill(make_skill, "urls", URLS)
    session = sid("unsafe")
    urls = [cd_url(server, d, name=f"u{n}") for n, d in enumerate(UNSAFE_DISPOSITIONS)]
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "image_urls": urls}}, context={"session_id": session})
    ws = home / "workspaces" / session
    items = env["images"]
    assert len(items) == len(urls) and not env.get("warnings")
    for item in items:
        path = Path(item["local_path"])
        assert path.parent == ws and path.read_bytes() == PNG
        assert not path.name.startswith(".") and len(path.name.encode()) <= 255, path.name
    assert len({i["ref"] for i in items}) == len(urls)
    assert sorted(p.name for p in ws.iterdir()) == sorted(Path(i["local_path"]).name for i in items)
    assert not (home / "etc").exists() and not (home / "workspaces" / "up.png").exists()


async def test_same_name_twice_never_clobbers(db_env, make_skill, yard_for, server, allow_private, home):
    """安全落盘: default no-clobber — two downloads named cat.png and an earlier artifact called cat.png all stay."""
    result_skill(make_skill, "urls", URLS)
    session = sid("clob")
    ws = home / "workspaces" / session
    ws.mkdir(parents=True)
    (ws / "cat.png").write_bytes(b"the user's own cat")
    urls = [f"{server}/img/a/cat.png", f"{server}/img/b/cat.png"]
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "image_urls": urls}}, context={"session_id": session})
        again = await yard.run(
            "urls", {"result": {"ok": True, "image_url": f"{server}/img/c/cat.png"}}, context={"session_id": session}
        )
    assert (ws / "cat.png").read_bytes() == b"the user's own cat"
    paths = [Path(i["local_path"]) for i in env["images"] + again["images"]]
    assert len(set(paths)) == 3 and ws / "cat.png" not in paths
    assert all(p.read_bytes() == PNG for p in paths)
    assert [i["ref"] for i in env["images"] + again["images"]] == ["img_1", "img_2", "img_3"]


@pytest.mark.parametrize(
    "url",
    [
        "http://alice:s3cr3t-pw@127.0.0.1:{port}/status/404",
        "http://alice:s3cr3t-pw@127.0.0.1:{port}/redirect?to=/status/500",
        "http://127.0.0.1:{port}/redirect?to=http%3A%2F%2Falice%3As3cr3t-pw%40127.0.0.1%3A{port}%2Fstatus%2F503",
        "http://alice:s3cr3t-pw@127.0.0.1:1/unreachable.png",
        "http://alice:s3cr3t-pw@127.0.0.1:99999/bad-port.png",
        "ftp://alice:s3cr3t-pw@127.0.0.1/file.bin",
    ],
)
async def test_credentials_in_a_url_never_appear_in_warnings(db_env, make_skill, yard_for, server, allow_private, url):
    result_skill(make_skill, "urls", URLS)
    port = str(urlsplit(server).port)
    link = url.replace("{port}", port)
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "download_url": link, "text": f"also at {link.replace('ftp:', 'http:')} ok"}},
            context={"session_id": sid("cred")},
        )
    assert env["ok"] is True and env.get("warnings"), env
    joined = json.dumps(env["warnings"])
    assert "s3cr3t-pw" not in joined and "alice" not in joined, joined


async def test_at_most_eight_probes_across_ambiguous_fields_and_text(
    db_env, make_skill, yard_for, server, seen, allow_private
):
    result_skill(make_skill, "urls", URLS)
    fields = ("url", "link", "href", "src", "image", "video", "audio", "file")
    result: dict[str, Any] = {"ok": True, **{f: f"{server}/img/f-{f}.png" for f in fields}}
    result["summary"] = " ".join(f"{server}/page/t{n}" for n in range(5))
    result["images"] = [{"url": f"{server}/img/item{n}.png"} for n in range(3)]
    result["download_url"] = f"{server}/img/explicit.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": sid("eight")})
    probed = [p for p in seen if p != "/img/explicit.png"]
    assert len(probed) == 8, seen
    assert "/img/explicit.png" in seen
    assert len(env["images"]) == 3 + 5 + 1  # items keep their place; 5 more probes; the explicit file


async def test_explicit_fields_are_downloaded_even_when_the_server_sends_a_page(
    db_env, make_skill, yard_for, server, seen, allow_private
):
    result_skill(make_skill, "urls", URLS)
    result = {
        "ok": True,
        "download_url": f"{server}/page/report.html",
        "file_urls": [f"{server}/json/data", f"{server}/page/other"],
        "files": [{"oss_url": f"{server}/json/export"}],
    }
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": sid("explicit")})
    assert not env.get("warnings")
    assert sorted(seen) == ["/json/data", "/json/export", "/page/other", "/page/report.html"]
    bodies = sorted(Path(i["local_path"]).read_bytes() for i in env["files"])
    assert bodies == sorted([HTML, HTML, JSON_BODY, JSON_BODY])
    assert all(i.get("ref", "").startswith("file_") for i in env["files"])


async def test_a_download_in_progress_is_never_visible_under_a_final_name(
    db_env, make_skill, yard_for, server, allow_private, home
):
    """安全落盘: a temp file, then an atomic publish — nobody looking at the workspace meanwhile sees a partial
    file under a name that looks like the final product, and nothing temporary is left afterwards."""
    result_skill(make_skill, "urls", URLS)
    session = sid("vis")
    ws = home / "workspaces" / session
    ws.mkdir(parents=True)
    sightings: list[tuple[str, int]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                for entry in os.scandir(ws):
                    if not entry.name.startswith("."):
                        sightings.append((entry.name, entry.stat().st_size))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        async with yard_for() as yard:
            env = await yard.run(
                "urls", {"result": {"ok": True, "file_url": f"{server}/slow/big.bin"}}, context={"session_id": session}
            )
        await asyncio.sleep(0.05)  # let the watcher see the published file too
    finally:
        stop.set()
        watcher.join()
    [item] = env["files"]
    assert item["size"] == 10 * 65536
    assert sightings and all(size == 10 * 65536 for _, size in sightings), sorted(set(sightings))[:5]
    assert files_in(ws) == ["big.bin"]


async def test_a_query_string_is_not_part_of_the_downloaded_name(db_env, make_skill, yard_for, server, allow_private):
    """docs: "the name comes from Content-Disposition … or the URL, made safe" — a signed CDN link's query string
    is not part of the file name, so the extension (and the media type) survive."""
    result_skill(make_skill, "urls", URLS)
    url = f"{server}/img/cat.png?X-Amz-Signature=abc123&Expires=99"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "image_url": url}}, context={"session_id": sid("qs")})
    [item] = env["images"]
    assert item["filename"] == "cat.png" and Path(item["local_path"]).name == "cat.png", item
    assert item["media"] == "image" and item["ref"] == "img_1"


async def test_a_percent_encoded_slash_in_the_url_name_stays_in_the_workspace(
    db_env, make_skill, yard_for, server, allow_private, home
):
    """Issue: "a model-built path must never escape the session workspace"; docs: names "made safe"."""
    result_skill(make_skill, "urls", URLS)
    session = sid("pct")
    url = f"{server}/img/..%2F..%2F..%2Fescaped.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "file_url": url}}, context={"session_id": session})
    ws = home / "workspaces" / session
    items = env.get("images", []) + env.get("files", [])
    assert len(items) == 1, env
    assert Path(items[0]["local_path"]).parent == ws
    assert not (home / "escaped.png").exists() and not (home / "workspaces" / "escaped.png").exists()


async def test_an_image_behind_a_url_without_extension_is_an_image(db_env, make_skill, yard_for, server, allow_private):
    """Issue: ambiguous fields "are probed by Content-Type first"; docs: a download becomes an item "{url,
    local_path, filename, media, size, sha256, content_type} in images/videos/audios/files" — an image/png body
    behind `/noext/photo` is an image, listed as such."""
    result_skill(make_skill, "urls", URLS)
    session = sid("noext")
    async with yard_for() as yard:
        env = await yard.run(
            "urls", {"result": {"ok": True, "image": f"{server}/noext/photo"}}, context={"session_id": session}
        )
    [item] = env["images"]
    assert item["media"] == "image" and item["ref"] == "img_1", item
    [row] = await listed(session)
    assert row["type"] == "image"


async def test_an_audio_file_url_without_extension_is_an_audio(db_env, make_skill, yard_for, server, allow_private):
    """docs: a downloaded file lands "in `images`/`videos`/`audios`/`files`" by its media: an audio/mpeg body is an
    audio, whatever explicit field named it."""
    result_skill(make_skill, "urls", URLS)
    async with yard_for() as yard:
        env = await yard.run(
            "urls", {"result": {"ok": True, "file_url": f"{server}/audio/track"}}, context={"session_id": sid("aud")}
        )
    [item] = env["audios"]
    assert item["media"] == "audio" and item["ref"] == "audio_1" and Path(item["local_path"]).read_bytes() == MP3


async def test_a_downloaded_item_has_every_documented_key(db_env, make_skill, yard_for, server, allow_private):
    """docs: "A downloaded file becomes an artifact item `{url, local_path, filename, media, size, sha256,
    content_type}`"."""
    result_skill(make_skill, "urls", URLS)
    url = f"{server}/img/full.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "download_url": url}}, context={"session_id": sid("k")})
    [item] = env["images"]
    assert {"url", "local_path", "filename", "media", "size", "sha256", "content_type", "ref"} <= set(item), item
    assert item["url"] == url and item["size"] == len(PNG) and item["sha256"] == sha(PNG)
    assert item["content_type"].startswith("image/png") and item["filename"] == "full.png"


async def test_a_download_fills_the_item_it_came_from(db_env, make_skill, yard_for, server, allow_private):
    """docs: a downloaded file becomes an item "(or fills the item the URL came from)" — the item keeps its other
    keys and gains local_path and ref."""
    result_skill(make_skill, "urls", URLS)
    result = {"ok": True, "files": [{"download_url": f"{server}/img/a.png", "title": "cover", "page": 3}]}
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": sid("fill")})
    items = env.get("files", []) + env.get("images", [])
    assert len(items) == 1, env
    [item] = items
    assert item["title"] == "cover" and item["page"] == 3
    assert Path(item["local_path"]).read_bytes() == PNG and item.get("ref")


@pytest.mark.parametrize("ctype", ["Image/PNG", "IMAGE/png; charset=binary", "image/png ;q=1"])
async def test_probe_reads_content_type_case_insensitively(db_env, make_skill, yard_for, server, allow_private, ctype):
    """Issue: "ambiguous fields and links found in text are probed by Content-Type first (HTML/JSON skipped)" —
    media types are case-insensitive (RFC 9110 §8.3.1), parameters aside."""
    result_skill(make_skill, "urls", URLS)
    url = f"{server}/ctype/{quote(ctype, safe='')}/shot"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "link": url}}, context={"session_id": sid("ci")})
    assert len(env.get("images", [])) == 1, env


@pytest.mark.parametrize(
    "ctype", ["TEXT/HTML", "application/xhtml+xml", "application/ld+json", "application/problem+json", "text/json"]
)
async def test_probe_skips_pages_and_json_in_every_spelling(
    db_env, make_skill, yard_for, server, allow_private, home, ctype
):
    """Issue: probed links with "HTML/JSON skipped" — XHTML pages and `+json` media types are pages and JSON."""
    result_skill(make_skill, "urls", URLS)
    session = sid("skip")
    url = f"{server}/ctype/{quote(ctype, safe='')}/thing"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "href": url}}, context={"session_id": session})
    assert "images" not in env and "files" not in env, env
    assert files_in(home / "workspaces" / session) == []


@pytest.mark.spec("§6.3")
async def test_a_markdown_link_in_text_is_downloaded_without_the_closing_parenthesis(
    db_env, make_skill, yard_for, server, seen, allow_private
):
    """§6.3: "正文里发现的链接先探 Content-Type" — a link written as Markdown, `[chart](URL).`, is the URL without
    the `)` and `.` around it."""
    result_skill(make_skill, "urls", URLS)
    summary = f"Done: see [the chart]({server}/img/chart.png). Also <{server}/img/angle.png>."
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "summary": summary}}, context={"session_id": sid("md")})
    assert sorted(i["filename"] for i in env.get("images", [])) == ["angle.png", "chart.png"], env
    assert sorted(seen) == ["/img/angle.png", "/img/chart.png"]


async def test_materialize_false_downloads_nothing(db_env, make_skill, yard_for, server, seen, allow_private, home):
    """authoring.md: `materialize: false`: "links in the results are data, never downloaded"."""
    result_skill(make_skill, "urls", URLS, frontmatter="name: urls\ndescription: d\nmaterialize: false")
    session = sid("nomat")
    result = {"ok": True, "image_url": f"{server}/img/a.png", "summary": f"at {server}/img/b.png"}
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": session})
    assert seen == [] and "images" not in env and not env.get("warnings")
    assert env["image_url"] == result["image_url"]
    assert files_in(home / "workspaces" / session) == []


async def test_a_failed_download_adds_to_the_skills_own_warnings(db_env, make_skill, yard_for, server, allow_private):
    """Issue: "a failed download leaves the URL in place and adds a warning" — adds, so the skill's own warnings
    stay."""
    result_skill(make_skill, "urls", URLS)
    result = {"ok": True, "warnings": ["3 rows skipped"], "file_url": f"{server}/status/500"}
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": sid("warn")})
    assert env["warnings"][0] == "3 rows skipped" and len(env["warnings"]) == 2, env


async def test_a_failed_download_in_an_item_leaves_the_item_without_a_local_path(
    db_env, make_skill, yard_for, server, allow_private
):
    """Issue: "a failed download leaves the URL in place and adds a warning, never fails the skill"."""
    result_skill(make_skill, "urls", URLS)
    result = {"ok": True, "images": [{"image_url": f"{server}/status/404", "alt": "x"}]}
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": sid("itemfail")})
    assert env["ok"] is True and len(env["warnings"]) == 1
    [item] = env["images"]
    assert item["image_url"] == f"{server}/status/404" and item["alt"] == "x"
    assert not item.get("local_path") and not item.get("ref")


@pytest.mark.parametrize("route", ["chunked-cut/x.png", "hangup/x.png"])
async def test_a_broken_body_leaves_no_file_and_a_warning(
    db_env, make_skill, yard_for, server, allow_private, home, route
):
    """安全落盘: "失败时不得留下看似最终产物的半成品"; issue: a failed download "leaves the URL in place and adds a
    warning" — a chunked body cut before its last chunk, or a connection closed before any answer."""
    result_skill(make_skill, "urls", URLS)
    session = sid("cut")
    url = f"{server}/{route}"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "download_url": url}}, context={"session_id": session})
    assert env["ok"] is True and env["download_url"] == url and len(env.get("warnings", [])) == 1, env
    assert "images" not in env and "files" not in env
    assert files_in(home / "workspaces" / session) == []


async def test_concurrent_runs_downloading_one_url_each_get_a_whole_file(
    db_env, make_skill, yard_for, server, allow_private, home
):
    """安全落盘: "默认 no-clobber" and no half-written file — four runs of one session fetch the same URL at once:
    four whole files, four refs, nothing temporary left."""
    result_skill(make_skill, "urls", URLS)
    session = sid("samurl")
    url = f"{server}/slowpng/same.png"
    async with yard_for() as yard:
        envs = await asyncio.gather(
            *(
                yard.run("urls", {"result": {"ok": True, "image_url": url}}, context={"session_id": session})
                for _ in range(4)
            )
        )
    paths = [Path(e["images"][0]["local_path"]) for e in envs]
    assert len(set(paths)) == 4, paths
    assert all(p.read_bytes() == PNG for p in paths)
    assert sorted(e["images"][0]["ref"] for e in envs) == ["img_1", "img_2", "img_3", "img_4"]
    assert len(files_in(home / "workspaces" / session)) == 4


async def test_the_same_url_twice_in_one_result_leaves_whole_files(
    db_env, make_skill, yard_for, server, allow_private, home
):
    """安全落盘: downloads are published atomically and never clobber — one URL listed twice leaves only whole
    files, each item pointing at one."""
    result_skill(make_skill, "urls", URLS)
    session = sid("dupurl")
    url = f"{server}/slowpng/twice.png"
    async with yard_for() as yard:
        env = await yard.run(
            "urls", {"result": {"ok": True, "image_urls": [url, url]}}, context={"session_id": session}
        )
    assert not env.get("warnings"), env
    for item in env["images"]:
        assert Path(item["local_path"]).read_bytes() == PNG
    ws = home / "workspaces" / session
    assert all((ws / n).read_bytes() == PNG for n in files_in(ws))


async def test_a_redirect_to_a_page_skips_a_probed_link(db_env, make_skill, yard_for, server, allow_private, home):
    """Issue: probed links skip HTML — the Content-Type that counts is the one of the page the link leads to."""
    result_skill(make_skill, "urls", URLS)
    session = sid("redpage")
    url = f"{server}/redirect?to=/page/landing"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "url": url}}, context={"session_id": session})
    assert "images" not in env and "files" not in env and not env.get("warnings"), env
    assert files_in(home / "workspaces" / session) == []


async def test_a_url_download_is_listed_with_its_url(db_env, make_skill, yard_for, server, allow_private):
    """Issue: attachments carry "filename, local_path, url, size, sha256" — `artifacts --json` of a download with a
    query string keeps the whole URL it came from."""
    result_skill(make_skill, "urls", URLS)
    session = sid("listurl")
    url = f"{server}/img/q.png?v=2"
    async with yard_for() as yard:
        await yard.run("urls", {"result": {"ok": True, "image_urls": [url]}}, context={"session_id": session})
    proc = await asyncio.to_thread(invoke, "artifacts", "--session", session, "--json")
    [row] = json.loads(proc.stdout)
    assert row["url"] == url and row["size"] == len(PNG) and row["sha256"] == sha(PNG) and row["skill"] == "urls"


async def test_a_file_url_in_an_explicit_field_is_never_read_from_disk(db_env, make_skill, yard_for, home, tmp_path):
    """Issue: "Remote URL materialization with httpx" — a `file://` URL is not remote: the host's files are never
    copied into the workspace because a result names them."""
    private = tmp_path / "host-secret.txt"
    private.write_text("host secret")
    result_skill(make_skill, "urls", URLS)
    session = sid("fileurl")
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "download_url": private.as_uri(), "image_urls": [private.as_uri()]}},
            context={"session_id": session},
        )
    assert env["ok"] is True
    assert files_in(home / "workspaces" / session) == []
    assert await listed(session) == []


async def test_raw_utf8_content_disposition_name_is_kept_readable_and_safe(
    db_env, make_skill, yard_for, server, allow_private
):
    """docs: "the name comes from Content-Disposition … made safe" — many servers send a raw UTF-8 `filename`;
    whatever is made of it, the name keeps its extension and holds no control characters."""
    result_skill(make_skill, "urls", URLS)
    raw = 'attachment; filename="报告.png"'.encode().decode("latin-1")
    url = f"{server}/cd/raw?v={quote(raw)}"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "file_url": url}}, context={"session_id": sid("rawcd")})
    [item] = env["images"]
    name = Path(item["local_path"]).name
    assert name.endswith(".png") and not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name), repr(name)


@pytest.mark.parametrize("where", ["path", "disposition"])
async def test_a_long_unicode_name_is_cut_to_a_valid_file_name(
    db_env, make_skill, yard_for, server, allow_private, where
):
    """docs: the download name is "made safe"; a file name is at most 255 bytes — 120 CJK characters (360 bytes)
    must still give a downloaded file, not a failed download."""
    result_skill(make_skill, "urls", URLS)
    long = "长" * 120 + ".png"
    if where == "path":
        url = f"{server}/img/{quote(long)}"
    else:
        url = f"{server}/cd/x?v={quote(chr(39).join(['attachment; filename*=UTF-8', '', quote(long)]))}"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "file_url": url}}, context={"session_id": sid("long")})
    assert not env.get("warnings"), env.get("warnings")
    [item] = env["images"]
    name = Path(item["local_path"]).name
    assert len(name.encode()) <= 255 and name.endswith(".png"), name
    assert Path(item["local_path"]).read_bytes() == PNG


async def test_at_most_four_downloads_run_at_a_time(db_env, make_skill, yard_for, allow_private):
    """docs: "Four downloads run at a time"."""
    result_skill(make_skill, "urls", URLS)
    Counting.peak = 0
    with serve(Counting) as base:
        async with yard_for() as yard:
            env = await yard.run(
                "urls",
                {"result": {"ok": True, "image_urls": [f"{base}/p{n}.png" for n in range(10)]}},
                context={"session_id": sid("four")},
            )
    assert len(env["images"]) == 10
    assert 1 <= Counting.peak <= 4, Counting.peak


@pytest.mark.spec("§6.3")
async def test_a_url_named_twice_in_one_result_is_fetched_once(
    db_env, make_skill, yard_for, server, seen, allow_private
):
    """§6.3: materialization is "幂等" — a link that is both an explicit field and in the text of the same result
    is one file, not two copies with two refs."""
    result_skill(make_skill, "urls", URLS)
    session = sid("once-url")
    url = f"{server}/img/one.png"
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "image_url": url, "summary": f"done: {url}"}},
            context={"session_id": session},
        )
    assert seen == ["/img/one.png"], seen
    assert len(await listed(session)) == 1, env


@pytest.mark.spec("§4.7")
async def test_a_downloaded_file_is_an_attachment_with_its_url_for_the_next_run(
    db_env, make_skill, yard_for, server, allow_private
):
    """§4.7: attachment items carry `"url": "https://..."` and include "此前技能生成的产物"."""
    result_skill(make_skill, "urls", URLS)
    echo_skill(make_skill)
    session = sid("nexturl")
    url = f"{server}/img/next.png"
    async with yard_for() as yard:
        await yard.run("urls", {"result": {"ok": True, "image_url": url}}, context={"session_id": session})
        env = await yard.run("echo", context={"session_id": session})
    [item] = env["attachments"]
    assert item["url"] == url and item["ref"] == "img_1" and item["type"] == "image"
    assert Path(item["local_path"]).read_bytes() == PNG


@pytest.mark.parametrize(
    "array, item, ref",
    [("videos", {}, "video_1"), ("files", {"media": "audio"}, "audio_1")],
    ids=["array-says-video", "item-says-audio"],
)
async def test_a_downloaded_item_keeps_the_media_its_array_or_item_states(
    db_env, make_skill, yard_for, server, allow_private, array, item, ref
):
    """docs: "the media type comes from `media`, the array, or the extension"; a download "fills the item the URL
    came from" — a file fetched for an item of `videos` (served as application/octet-stream, no extension), or for
    an item stating `media: audio`, keeps that type."""
    result_skill(make_skill, "urls", URLS)
    url = f"{server}/ctype/{quote('application/octet-stream', safe='')}/clip"
    async with yard_for() as yard:
        env = await yard.run(
            "urls", {"result": {"ok": True, array: [{"download_url": url, **item}]}}, context={"session_id": sid("oct")}
        )
    [got] = env[array]
    assert got.get("ref") == ref and Path(got["local_path"]).is_file(), env


@pytest.mark.spec("§6.3")
async def test_the_urls_field_downloads_each_link_by_its_type(db_env, make_skill, yard_for, server, allow_private):
    """Issue/§6.3: explicit fields (`urls` first among them) are always downloaded; each file lands in the array of
    its media."""
    result_skill(make_skill, "urls", URLS)
    links = [f"{server}/img/u1.png", f"{server}/audio/u2.mp3", f"{server}/json/u3.json"]
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "urls": links}}, context={"session_id": sid("urlsf")})
    assert env["urls"] == links and not env.get("warnings")
    assert [i["ref"] for i in env["images"]] == ["img_1"] and [i["ref"] for i in env["audios"]] == ["audio_1"]
    assert [i["ref"] for i in env["files"]] == ["file_1"]


@pytest.mark.parametrize("suffix", ["#page=2", "?a=1#frag", "?name=evil.exe"])
async def test_fragments_and_queries_never_reach_the_file_name(
    db_env, make_skill, yard_for, server, allow_private, suffix
):
    """docs: "the name comes from Content-Disposition … or the URL, made safe" — the file's name is the path's
    last segment."""
    result_skill(make_skill, "urls", URLS)
    url = f"{server}/img/shot.png{suffix}"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "image_url": url}}, context={"session_id": sid("frag")})
    [item] = env["images"]
    assert Path(item["local_path"]).name == "shot.png", item
