"""The console in a real browser (Playwright on Debian's chromium, headless): run a skill from its generated form,
chat with the example agent through an approval by clicking, browse a datatable table — all by keyboard-reachable
controls found by their labels and roles."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from .conftest import cli

MESSAGE = "把标题为季度总结的笔记保存下来：收入增长 12%"


def test_run_a_skill_from_its_form(console, page: Page):
    console.sign_in(page)
    console.shot(page, "skills")
    page.get_by_role("link", name="echo", exact=True).click()
    console.shot(page, "skill-form")
    page.get_by_label("text").fill("hello browser")
    page.get_by_role("button", name="Run").click()
    expect(page.get_by_role("status")).to_have_text("Succeeded")
    expect(page.locator(".display strong")).to_have_text("hello browser")  # display_md rendered
    console.shot(page, "skill-result")
    page.goto(f"{console.base}/console/runs")
    expect(page.get_by_role("row").filter(has_text="echo").first).to_contain_text("ok")
    console.shot(page, "runs")


def test_chat_through_an_approval_by_clicking(console, page: Page):
    console.sign_in(page)
    page.goto(f"{console.base}/console/chat?agent=notes&session=web-{console.org}")
    console.shot(page, "chat")
    page.get_by_label("Message").fill(MESSAGE)
    page.get_by_role("button", name="Send").click()
    approval = page.get_by_role("group", name="APPROVAL checkpoint")
    expect(approval).to_be_visible()
    expect(page.get_by_role("log")).to_contain_text("收入增长 12%")
    expect(page.get_by_label("Progress")).to_contain_text("find_note")  # the turn's progress, over SSE
    console.shot(page, "chat-approval")
    approval.get_by_role("button", name="Approve").focus()
    page.keyboard.press("Enter")  # works without a mouse
    expect(page.locator(".msg.assistant").last).to_have_attribute("data-status", "DONE")
    expect(page.get_by_role("log")).to_contain_text("已保存笔记《季度总结》")
    console.shot(page, "chat-done")


def test_browse_a_datatable_table(console, page: Page):
    context = json.dumps({"org_id": console.org, "team_role": "owner"})
    fields = [{"title": "城市", "uidt": "文本"}, {"title": "人口", "uidt": "数字"}]
    cli("run", "datatable", "--context", context, "--input",
        json.dumps({"action": "create_table", "table_name": "城市", "fields": fields}))  # fmt: skip
    records = [{"城市": "上海", "人口": 2487}, {"城市": "北京", "人口": 2189}]
    cli("run", "datatable", "--context", context, "--input",
        json.dumps({"action": "insert_batch", "table_name": "城市", "records": records}))  # fmt: skip
    console.sign_in(page)
    page.goto(f"{console.base}/console/data")
    console.shot(page, "tables")
    page.get_by_role("link", name="城市").click()
    expect(page.get_by_role("table", name="Columns")).to_contain_text("人口")
    console.shot(page, "table")
    page.get_by_label("Field").select_option("人口")
    page.get_by_label("Condition").select_option("gt")
    page.get_by_label("Value").fill("2200")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("#rows tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("上海")
    console.shot(page, "table-filtered")
