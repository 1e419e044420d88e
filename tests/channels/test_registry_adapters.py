"""The registry's adapters: built-ins registered through register_channels like a third party's, the first
protocol (``send(recipient, text, attachments)`` only) adapted, unknown channels named with the known ones."""

from __future__ import annotations

from skillyard import hookimpl


class SendOnly:
    """A channel of the first protocol: one call per delivery."""

    def __init__(self) -> None:
        self.sent = []

    async def send(self, recipient, text, attachments):
        self.sent.append((dict(recipient), text, list(attachments)))


async def test_builtin_adapters_are_registered_through_the_hook(host):
    assert set(host.yard.channels.names()) >= {"feishu", "wecom", "dingtalk", "telegram", "slack", "webhook", "web"}
    owners = host.yard.channels._owners
    assert owners["telegram"] == "skillyard.channels.telegram" and owners["web"] == "skillyard.channels.web"


async def test_a_send_only_channel_gets_send_message_through_the_shim(db_env, plugin_reg, tmp_path):
    from skillyard import SkillYard

    channel = SendOnly()

    class Plugin:
        @hookimpl
        def register_channels(self, register):
            register("legacy", channel)

    plugin_reg(Plugin(), "legacy-channel")
    async with SkillYard() as yard:
        workspace = yard.workspace("legacy-s")
        (tmp_path / "x").mkdir()
        path = f"{workspace}/note.txt"
        with open(path, "w") as handle:
            handle.write("n")
        result = await yard.run(
            "send_message", {"to": "legacy:alice", "message": "hello", "attach": path}, {"session_id": "legacy-s"}
        )
        assert yard.channels.get("legacy") is channel  # get() answers the object the plugin gave
    assert result["ok"] is True and result["delivered"] == ["legacy:alice"]
    [(recipient, text, files)] = channel.sent
    assert recipient["channel"] == "legacy" and recipient["id"] == "alice" and text == "hello"
    assert files[0]["filename"] == "note.txt" and files[0]["media"] == "file"


async def test_an_unknown_channel_names_the_known_ones(host):
    result = await host.send(to="whatsapp:123", message="hi")
    assert result["need_param"] == "to" and "unknown; known: dingtalk, feishu" in result["error"]
