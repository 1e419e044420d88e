"""Fake Feishu, WeCom, DingTalk, Telegram and Slack APIs and a webhook receiver, answering as the real ones do
(their token endpoints, send and upload endpoints, the downloads of inbound messages' files, their error shapes).
Each knows one good credential, one unknown recipient (``*_UNKNOWN``) and can expire its current token
(``expire_token``) to check the one refresh. The files a fake serves are the ones a test puts in ``files``
(an id or key → (content, Content-Type)); any other id is answered with the vendor's not-found error."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from .fake_api import FakeApi, Request

Answer = tuple[int, dict[str, Any] | bytes, dict[str, str]]


def _file(content: tuple[bytes, str]) -> Answer:
    return 200, content[0], {"Content-Type": content[1]}


class _Tokens(FakeApi):
    """A fake whose token endpoint hands out numbered tokens as long as real ones (so they are masked in logs);
    only the newest one is valid."""

    def __init__(self) -> None:
        super().__init__()
        self._numbers = itertools.count(1)
        self.valid = ""
        self.issued = 0
        self.files: dict[str, tuple[bytes, str]] = {}

    def issue(self) -> str:
        self.issued += 1
        self.valid = f"tok-{next(self._numbers)}-{uuid.uuid4().hex}"
        return self.valid

    def expire_token(self) -> None:
        self.valid = "expired"


class FakeFeishu(_Tokens):
    APP_ID, APP_SECRET = "cli_a1b2c3d4e5", "feishu-secret-9f8e7d6c5b4a"
    UNKNOWN = "ou_nobody"
    BOT_OPEN_ID = "ou_yardbot"

    def route(self, r: Request) -> Answer:
        if r.path == "/open-apis/auth/v3/tenant_access_token/internal":
            if (r.json or {}).get("app_id") != self.APP_ID or r.json.get("app_secret") != self.APP_SECRET:
                return 400, {"code": 10014, "msg": "app secret invalid"}, {}
            return 200, {"code": 0, "msg": "ok", "tenant_access_token": self.issue(), "expire": 7200}, {}
        if r.headers.get("authorization") != f"Bearer {self.valid}":
            return (
                400,
                {
                    "code": 99991663,
                    "msg": "Invalid access token for authorization. Please make a request with token attached.",
                },
                {},
            )
        if r.path == "/open-apis/bot/v3/info":
            bot = {"activate_status": 2, "app_name": "yard", "ip_white_list": [], "open_id": self.BOT_OPEN_ID}
            return 200, {"code": 0, "msg": "ok", "bot": bot}, {}
        if r.path.startswith("/open-apis/im/v1/messages/") and "/resources/" in r.path:
            key = r.path.rsplit("/", 1)[-1]
            if key in self.files and r.query.get("type") in ("image", "file"):
                return _file(self.files[key])
            return 400, {"code": 234003, "msg": "File not in msg."}, {}
        if r.path == "/open-apis/im/v1/images":
            return 200, {"code": 0, "msg": "success", "data": {"image_key": "img_v2_fake"}}, {}
        if r.path == "/open-apis/im/v1/files":
            return 200, {"code": 0, "msg": "success", "data": {"file_key": "file_v2_fake"}}, {}
        if r.path == "/open-apis/im/v1/messages":
            if r.json["receive_id"] == self.UNKNOWN:
                return (
                    400,
                    {
                        "code": 230001,
                        "msg": "Your request contains an invalid request parameter, ext=invalid receive_id",
                    },
                    {},
                )
            return 200, {"code": 0, "msg": "success", "data": {"message_id": f"om_{len(self.requests)}"}}, {}
        return 404, {"code": 1254000, "msg": "not found"}, {}


class FakeWecom(_Tokens):
    CORP_ID, CORP_SECRET, AGENT_ID = "ww1234567890", "wecom-secret-abcdef123456", "1000002"
    UNKNOWN = "nobody"

    def route(self, r: Request) -> Answer:
        if r.path == "/cgi-bin/gettoken":
            if r.query.get("corpid") != self.CORP_ID or r.query.get("corpsecret") != self.CORP_SECRET:
                return 200, {"errcode": 40001, "errmsg": "invalid credential"}, {}
            return 200, {"errcode": 0, "errmsg": "ok", "access_token": self.issue(), "expires_in": 7200}, {}
        if r.path.startswith("/pic/"):  # an image message's PicUrl: WeCom's image server, no token
            name = r.path.rsplit("/", 1)[-1]
            return _file(self.files[name]) if name in self.files else (404, b"", {})
        if r.query.get("access_token") != self.valid:
            return 200, {"errcode": 42001, "errmsg": "access_token expired"}, {}
        if r.path == "/cgi-bin/media/get":
            media = self.files.get(r.query.get("media_id", ""))
            return _file(media) if media else (200, {"errcode": 40007, "errmsg": "invalid media_id"}, {})
        if r.path == "/cgi-bin/media/upload":
            return 200, {"errcode": 0, "errmsg": "ok", "type": r.query["type"], "media_id": "MEDIA1"}, {}
        if r.path == "/cgi-bin/message/send":
            body = r.json
            if str(body.get("agentid")) != self.AGENT_ID:
                return 200, {"errcode": 301002, "errmsg": "not allow operate another agent with this accesstoken."}, {}
            if body.get("touser") == self.UNKNOWN:
                return 200, {"errcode": 0, "errmsg": "ok", "invaliduser": self.UNKNOWN, "msgid": "m1"}, {}
            return 200, {"errcode": 0, "errmsg": "ok", "msgid": f"msg{len(self.requests)}"}, {}
        return 404, {"errcode": 404, "errmsg": "not found"}, {}


class FakeDingtalk(_Tokens):
    APP_KEY, APP_SECRET, ROBOT = "dingabcdef123", "dingtalk-secret-0123456789", "dingrobot42"
    UNKNOWN = "nobody"
    UNKNOWN_GROUP = "cidNoSuchGroup=="

    def route(self, r: Request) -> Answer:
        if r.path == "/v1.0/oauth2/accessToken":
            if (r.json or {}).get("appKey") != self.APP_KEY or r.json.get("appSecret") != self.APP_SECRET:
                return 400, {"code": "invalidClientSecret", "message": "应用凭证不合法", "requestid": "r1"}, {}
            return 200, {"accessToken": self.issue(), "expireIn": 7200}, {}
        if r.path.startswith("/files/"):  # a downloadUrl: signed by DingTalk's storage, no token
            code = r.path.rsplit("/", 1)[-1]
            return _file(self.files[code]) if code in self.files else (404, b"", {})
        if r.path == "/media/upload":
            if r.query.get("access_token") != self.valid:
                return 200, {"errcode": 40014, "errmsg": "不合法的access_token"}, {}
            return 200, {"errcode": 0, "errmsg": "ok", "type": r.query["type"], "media_id": "@lADPfake"}, {}
        if r.headers.get("x-acs-dingtalk-access-token") != self.valid:
            return 401, {"code": "InvalidAuthentication", "message": "不合法的access_token", "requestid": "r2"}, {}
        if r.path.startswith("/v1.0/robot/") and r.json.get("robotCode") != self.ROBOT:
            return 400, {"code": "robotNotExist", "message": "robot 不存在", "requestid": "r3"}, {}
        if r.path == "/v1.0/robot/oToMessages/batchSend":
            invalid = [u for u in r.json["userIds"] if u == self.UNKNOWN]
            return 200, {"processQueryKey": f"pq{len(self.requests)}", "invalidStaffIdList": invalid}, {}
        if r.path == "/v1.0/robot/groupMessages/send":
            if r.json.get("openConversationId") == self.UNKNOWN_GROUP:
                return 400, {"code": "resource.not.found", "message": "群不存在", "requestid": "r4"}, {}
            return 200, {"processQueryKey": f"pq{len(self.requests)}"}, {}
        if r.path == "/v1.0/robot/messageFiles/download":
            code = r.json.get("downloadCode", "")
            if code not in self.files:
                return 400, {"code": "invalidParameter", "message": "downloadCode 无效", "requestid": "r5"}, {}
            return 200, {"downloadUrl": f"{self.base}/files/{code}"}, {}
        return 404, {"code": "NotFound", "message": "not found"}, {}


class FakeTelegram(FakeApi):
    TOKEN = "123456789:AAHfakeTelegramBotToken_xyz"
    UNKNOWN = "999"
    USERNAME = "yard_bot"

    def route(self, r: Request) -> Answer:
        if r.path.startswith(f"/file/bot{self.TOKEN}/"):
            return 200, {"file": r.path.rsplit("/", 1)[-1]}, {}
        prefix, _, method = r.path.rpartition("/")
        if prefix != f"/bot{self.TOKEN}":
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}, {}
        if method == "getMe":
            return 200, {"ok": True, "result": {"id": 1, "is_bot": True, "username": self.USERNAME}}, {}
        if method == "getFile":
            return 200, {"ok": True, "result": {"file_id": r.query.get("file_id"), "file_path": "photos/p1.jpg"}}, {}
        chat = (r.json or {}).get("chat_id") or r.form.get("chat_id")
        if str(chat) == self.UNKNOWN:
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}, {}
        if method in ("sendMessage", "sendPhoto", "sendDocument", "sendVideo", "sendAudio"):
            return 200, {"ok": True, "result": {"message_id": len(self.requests), "chat": {"id": chat}}}, {}
        return 404, {"ok": False, "error_code": 404, "description": "Not Found"}, {}

    @staticmethod
    def rate_limit(seconds: int = 7) -> tuple[int, dict[str, Any]]:
        return 429, {
            "ok": False,
            "error_code": 429,
            "description": f"Too Many Requests: retry after {seconds}",
            "parameters": {"retry_after": seconds},
        }


class FakeSlack(FakeApi):
    TOKEN = "xoxb-fake-slack-bot-token-123"
    UNKNOWN = "C0NOWHERE"

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, tuple[bytes, str]] = {}

    def route(self, r: Request) -> Answer:
        if r.path == "/upload/F1":
            return 200, {"ok": True}, {}
        if r.headers.get("authorization") != f"Bearer {self.TOKEN}":
            return 200, {"ok": False, "error": "invalid_auth"}, {}
        if r.path.startswith("/files-pri/"):  # url_private_download: Slack redirects to where the file is served
            return 302, b"", {"Location": f"{self.base}/files-cdn/{r.path.rsplit('/', 1)[-1]}"}
        if r.path.startswith("/files-cdn/"):
            name = r.path.rsplit("/", 1)[-1]
            return (
                _file(self.files[name]) if name in self.files else (404, b"not found", {"Content-Type": "text/plain"})
            )
        args = {**r.query, **r.form, **(r.json or {})}
        method = r.path.rsplit("/", 1)[-1]
        if method == "conversations.open":
            return 200, {"ok": True, "channel": {"id": "D" + str(args["users"])[1:]}}, {}
        if args.get("channel", args.get("channel_id")) == self.UNKNOWN:
            return 200, {"ok": False, "error": "channel_not_found"}, {}
        if method == "chat.postMessage":
            return 200, {"ok": True, "channel": args["channel"], "ts": f"17000.{len(self.requests)}"}, {}
        if method == "files.getUploadURLExternal":
            return 200, {"ok": True, "upload_url": f"{self.base}/upload/F1", "file_id": "F1"}, {}
        if method == "files.completeUploadExternal":
            return 200, {"ok": True, "files": [{"id": "F1", "title": "f"}]}, {}
        return 200, {"ok": False, "error": "unknown_method"}, {}


class WebhookReceiver(FakeApi):
    def route(self, r: Request) -> Answer:
        if r.path == "/broken":
            return 503, {"error": "maintenance"}, {}
        return 200, {"id": f"w{len(self.requests)}"}, {}
